"""KubeVela's `vela def` file format: a CUE file with one metadata field and a `template` field, to and from the
X-Definition object it stands for.

    import ("strings")
    "my-worker": {
        type: "component"            // component | trait | policy | workflow-step
        description: "..."
        annotations: {}              // copied to metadata.annotations (the description goes there too)
        labels: {}
        attributes: {...}            // becomes the definition's spec (workload, status, appliesToWorkloads, ...)
    }
    template: {...}                  // with the imports: spec.schematic.cue.template

Pure functions over text and plain data.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from velashard.apis.oam import API_VERSION, SYSTEM_NAMESPACE
from velashard.cue import CueError, compile_sources, parse_file, plain, tokenize

DESCRIPTION = "definition.oam.dev/description"
KINDS = {"component": "ComponentDefinition", "trait": "TraitDefinition", "policy": "PolicyDefinition",
         "workflow-step": "WorkflowStepDefinition"}
TYPES = {kind: name for name, kind in KINDS.items()}


class DefFileError(Exception):
    """A definition file that cannot be read: the message names the file, and line and column where known."""


def _offset(line_starts: list[int], line: int, col: int) -> int:
    return line_starts[line - 1] + col - 1


def _struct_span(text: str, filename: str, line: int, col: int) -> tuple[int, int]:
    """Offsets of the `{` at line:col and of its matching `}`."""
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    begin = _offset(starts, line, col)
    depth = 0
    for tok in tokenize(text, filename):
        at = _offset(starts, tok.pos.line, tok.pos.col)
        if at < begin:
            continue
        if tok.kind == "{":
            depth += 1
        elif tok.kind == "}":
            depth -= 1
            if depth == 0:
                return begin, at
    raise DefFileError(f"{filename}:{line}:{col}: unbalanced braces")


def _dedent(body: str) -> str:
    lines = body.strip("\n").splitlines()
    indents = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    cut = min(indents, default=0)
    return "\n".join(line[cut:] if line.strip() else "" for line in lines) + "\n"


def _imports_text(imports: list[Any]) -> str:
    if not imports:
        return ""
    specs = [f'{imp.name} "{imp.path}"' if imp.name and imp.name != imp.path.rsplit("/", 1)[-1] else f'"{imp.path}"'
             for imp in imports]
    return "import (\n" + "".join(f"\t{s}\n" for s in specs) + ")\n\n"


def parse_def_file(text: str, filename: str = "definition.cue", namespace: str = SYSTEM_NAMESPACE) -> dict[str, Any]:
    """The X-Definition object a `vela def` file stands for; DefFileError says what is wrong and where."""
    try:
        tree = parse_file(text, filename)
    except CueError as err:
        raise DefFileError(str(err).replace(":\n    ", " at ", 1)) from None
    fields = [d for d in tree.body.decls if type(d).__name__ == "Field"]
    template = [f for f in fields if f.label.kind == "ident" and f.label.name == "template"]
    meta = [f for f in fields if f not in template]
    if len(template) != 1 or type(template[0].value).__name__ != "StructLit":
        raise DefFileError(f"{filename}: a definition file needs one `template: {{...}}` field")
    if len(meta) != 1 or meta[0].label.kind not in ("ident", "string"):
        raise DefFileError(f'{filename}: a definition file needs exactly one metadata field besides template, like '
                           '"my-def": {type: "component", ...}')
    name = meta[0].label.name
    pos = template[0].value.pos
    begin, end = _struct_span(text, filename, pos.line, pos.col)
    body = _imports_text(tree.imports) + _dedent(text[begin + 1:end])
    label = meta[0].label.pos
    value = meta[0].value.pos
    if type(meta[0].value).__name__ != "StructLit":
        raise DefFileError(f'{filename}: "{name}" must be a struct with type, description and attributes')
    _, meta_end = _struct_span(text, filename, value.line, value.col)
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    # only the metadata field, at its own line and column so that errors point into the file
    source = "\n" * (label.line - 1) + " " * (label.col - 1) + text[_offset(starts, label.line, label.col):meta_end + 1]
    try:
        metadata = compile_sources({filename: source}).evaluate().export()[name]
    except CueError as err:
        raise DefFileError(f"{filename}: metadata of {name!r}: {err}") from None
    if not isinstance(metadata, dict):
        raise DefFileError(f'{filename}: "{name}" must be a struct with type, description and attributes')
    return definition_object(name, metadata, body, filename, namespace)


def definition_object(name: str, metadata: dict[str, Any], template: str, filename: str = "definition.cue",
                      namespace: str = SYSTEM_NAMESPACE) -> dict[str, Any]:
    kind = KINDS.get(str(metadata.get("type", "")))
    if kind is None:
        raise DefFileError(f'{filename}: "{name}".type must be one of {", ".join(KINDS)}, not '
                           f'{json.dumps(metadata.get("type"))}')
    unknown = sorted(set(metadata) - {"type", "description", "annotations", "labels", "attributes", "alias"})
    if unknown:
        raise DefFileError(f'{filename}: "{name}" has unknown field(s) {", ".join(unknown)} (allowed: type, '
                           "description, annotations, labels, attributes, alias)")
    annotations = {str(k): str(v) for k, v in (metadata.get("annotations") or {}).items()}
    if metadata.get("description"):
        annotations[DESCRIPTION] = str(metadata["description"])
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    if metadata.get("labels"):
        meta["labels"] = {str(k): str(v) for k, v in metadata["labels"].items()}
    spec = plain(copy.deepcopy(metadata.get("attributes") or {}))
    spec["schematic"] = {"cue": {"template": template}}
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": meta, "spec": spec}


_IMPORTS = re.compile(r'\A\s*((?:import\s+(?:\([^)]*\)|(?:[A-Za-z_]\w*\s+)?"[^"]*")\s*)+)')


def to_def_file(definition: dict[str, Any]) -> str:
    """The `vela def` text of an X-Definition with a CUE schematic (what `velashard def get` prints)."""
    kind = definition.get("kind", "")
    if kind not in TYPES:
        raise DefFileError(f"{kind or 'object'} is not a definition kind")
    meta = definition.get("metadata") or {}
    spec = copy.deepcopy(definition.get("spec") or {})
    template = ((spec.pop("schematic", None) or {}).get("cue") or {}).get("template")
    if template is None:
        raise DefFileError(f'{kind} "{meta.get("name")}" has no CUE schematic (spec.schematic.cue.template)')
    annotations = dict(meta.get("annotations") or {})
    description = annotations.pop(DESCRIPTION, "")
    header = {"type": TYPES[kind], "annotations": annotations, "labels": dict(meta.get("labels") or {}),
              "description": description, "attributes": spec}
    match = _IMPORTS.match(template)
    imports = match.group(1).strip() + "\n\n" if match else ""
    body = template[match.end():] if match else template
    lines = "".join(f"\t{line}\n" if line.strip() else "\n" for line in body.strip("\n").splitlines())
    return (f"{imports}{json.dumps(meta.get('name', ''))}: {_cue_data(header, 0)}\n"
            f"template: {{\n{lines}}}\n")


def _cue_data(value: Any, depth: int) -> str:
    """Plain data as CUE, one field per line; multi-line strings (status programs) as raw multi-line strings."""
    pad = "\t" * (depth + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = "".join(f"{pad}{_label(k)}: {_cue_data(v, depth + 1)}\n" for k, v in value.items())
        return "{\n" + items + "\t" * depth + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_cue_data(v, depth) for v in value) + "]"
    if isinstance(value, str) and "\n" in value:
        inner = "".join(f"{pad}{line}\n" if line.strip() else "\n" for line in value.strip("\n").splitlines())
        return f'#"""\n{inner}{pad}"""#'
    return json.dumps(value)


def _label(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z_$][\w$]*", key) and not key.startswith(("#", "_")) else json.dumps(key)
