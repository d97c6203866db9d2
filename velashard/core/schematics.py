"""A definition's schematic evaluated: a CUE template with the properties as `parameter` and KubeVela's
`context` (its errors as the Rendered condition shows them), or KubeVela's CUE-free kube schematic."""

from __future__ import annotations

import json
import re
from typing import Any

from velashard.core.rendered import RenderError
from velashard.core.templates import compile_template
from velashard.cue import CueError, plain
from velashard.patch.copying import copy_json


def cue_template(definition: dict[str, Any]) -> str | None:
    return (((definition.get("spec") or {}).get("schematic") or {}).get("cue") or {}).get("template")


def _definition_kind(definition: dict[str, Any]) -> str:
    return {"ComponentDefinition": "component", "TraitDefinition": "trait",
            "PolicyDefinition": "policy"}.get(definition.get("kind", ""), "definition")


def _cue_error(err: CueError, definition: dict[str, Any], component: str, trait: str | None) -> RenderError:
    """A CUE error as the Rendered condition shows it: the definition, the field and CUE's message."""
    name = f'{_definition_kind(definition)} definition "{definition["metadata"]["name"]}"'
    path = err.path or ""
    where = "; ".join(str(p) for p in err.positions[:2])
    if path == "parameter" or path.startswith("parameter."):
        param = path[len("parameter."):] or "properties"
        missing = err.kind == "incomplete" and param != "properties"
        message = (f'{name}: parameter "{param}" is required' + (f" ({err.message})" if err.message else "")
                   if missing else f'{name}: parameter "{param}": {err.message}')
        return RenderError("InvalidParameter", message, component, trait, param)
    if err.kind == "syntax":
        return RenderError("TemplateError", f"{name}: the template does not compile: {err.message} at {where}",
                           component, trait)
    detail = f"{path}: {err.message}" if path else err.message
    return RenderError("TemplateError", f"{name}: {detail}" + (f" ({where})" if where else ""), component, trait,
                       path or None)


def evaluate(definition: dict[str, Any], parameter: Any, context: dict[str, Any], component: str,
             trait: str | None) -> Any:
    template = cue_template(definition)
    try:
        program = compile_template(template or "", f'{definition["metadata"]["name"]}.cue')
        # no properties are an empty struct, as KubeVela gives a component (`parameter: {}`)
        instance = program.evaluate({"parameter": {} if parameter is None else parameter, "context": context})
        if instance.exists("parameter"):
            instance.export("parameter", check=False)  # a parameter error is the user's: say so first
    except CueError as err:
        raise _cue_error(err, definition, component, trait) from None
    return instance


def export(instance: Any, expression: str, definition: dict[str, Any], component: str, trait: str | None) -> Any:
    try:
        return plain(instance.export(expression, check=False))
    except CueError as err:
        raise _cue_error(err, definition, component, trait) from None


def outputs_of(instance: Any, definition: dict[str, Any], component: str,
               trait: str | None) -> list[tuple[str, Any]]:
    """`outputs`, each read on its own as KubeVela does (an error elsewhere in the struct does not hide them)."""
    if not instance.exists("outputs"):
        return []
    try:
        keys = instance.fields("outputs")
    except CueError as err:
        raise _cue_error(err, definition, component, trait) from None
    return [(key, export(instance, f"outputs[{json.dumps(key)}]", definition, component, trait)) for key in keys]


def _set_path(obj: dict[str, Any], path: str, value: Any) -> None:
    """Set `a.b[0].c` in a nested object, creating maps along the way."""
    tokens = re.findall(r"([^.\[\]]+)|\[(\d+)\]", path)
    node: Any = obj
    for i, (name, index) in enumerate(tokens):
        last = i == len(tokens) - 1
        nxt_is_index = not last and tokens[i + 1][1] != ""
        if name:
            if last:
                node[name] = value
            else:
                node = node.setdefault(name, [] if nxt_is_index else {})
        else:
            idx = int(index)
            while len(node) <= idx:
                node.append({})
            if last:
                node[idx] = value
            else:
                node = node[idx]


_KUBE_TYPES = {"string": str, "number": (int, float), "boolean": bool, "array": list, "object": dict}


def kube_schematic(schematic: dict[str, Any], properties: dict[str, Any], component: str) -> dict[str, Any]:
    """KubeVela's CUE-free schematic: parameters set fields of a literal object by their paths."""
    params = {p["name"]: p for p in schematic.get("parameters") or []}
    for name, value in properties.items():
        if name not in params:
            raise RenderError("InvalidParameter", f'unknown parameter "{name}"', component, field=name)
        want = _KUBE_TYPES.get(params[name].get("type", "string"))
        if want and not isinstance(value, want) or isinstance(value, bool) and want == (int, float):
            raise RenderError("InvalidParameter", f'parameter "{name}" must be a {params[name].get("type")}',
                              component, field=name)
    workload = copy_json(schematic.get("template") or {})
    for name, p in params.items():
        value = properties.get(name, p.get("default"))
        if value is None:
            if p.get("required"):
                raise RenderError("InvalidParameter", f'parameter "{name}" is required', component, field=name)
            continue
        for path in p.get("fieldPaths") or []:
            _set_path(workload, path, copy_json(value))
    return workload
