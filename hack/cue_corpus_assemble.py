"""Assemble a local corpus of CUE programs from KubeVela X-Definitions, the way KubeVela assembles them.

Input: a directory of `vela def` files (`"name": {type: ..., attributes: ...}` plus `template: {...}`)
and of X-Definition YAML objects (`spec.schematic.cue.template`), for instance KubeVela's
`vela-templates/definitions/{internal,registry,deprecated}/**` and the addon catalog's
`{,experimental/}addons/*/definitions/*`, copied out of fresh clones of kubevela/kubevela and kubevela/catalog;
optionally a directory of examples (Markdown and YAML files holding `kind: Application` documents)
whose component/trait/policy properties become realistic `parameter` values.

CUE is read with velashard's own lexer, parser and syntax tree (`velashard.cue`): the split of `vela def`
files, the parameter schema and the feature census walk the tree the evaluator compiles.

Output: one self-contained CUE program per case (template, `parameter`, `context`), named
`<origin>.<definition>.<variant>.<expression>.cue`, and `index.json` listing
{file, expression, definition, kind, variant, source}. Feed them to `hack/cue_corpus_check.py`.

    python hack/cue_corpus_assemble.py --defs /tmp/kvdefs/src --examples /tmp/kvdefs/examples \\
        --out /tmp/kvdefs/cases
    python hack/cue_corpus_assemble.py --defs /tmp/kvdefs/src --features   # what the definitions use

The texts of those repositories are not the project's: keep the corpus outside the repository.

Status cases read the objects the same definition rendered, from real CUE's stored answers, so a full
rebuild is: assemble; `hack/cue_corpus_check.py DIR --oracle-only`; assemble again (only the status
cases change); `hack/cue_corpus_check.py DIR --oracle-only --missing-only` (answers whose case text
changed are recomputed).

Assembly (KubeVela's pkg/cue/definition/template.go and kubevela/workflow's pkg/cue/process):
- the template is the file's imports, a newline, then the declarations inside `template: {...}`;
- component and policy: `template + "\\ncontext: _\\nparameter: _\\n"`, `"\\n"`, `parameter: <JSON>`
  (`parameter: {}` without properties), `"\\n"`, `context: <JSON>`;
- trait: `template + "\\n"`, `parameter: <JSON>\\n`, `context: <JSON>` (no `context: _` line);
- `context` is one JSON object with sorted keys (Go's json.Marshal of a map): appAnnotations, appLabels,
  appName, appRevision, appRevisionNum, cluster, clusterVersion {gitVersion, major, minor (a number),
  platform}, components (the Application's components), name, namespace, parameter (the component's
  properties), publishVersion, replicaKey, revision, workflowName; traits also get componentType,
  output (the workload rendered so far) and outputs (auxiliary objects so far, when any);
- status cases (`healthPolicy`, `customStatus`): the status template, `"\\n"`,
  `context: <JSON>\\n` ({appName, appRevision, name, output, outputs?, parameter, status}),
  `parameter: <JSON>\\n`; exported expressions `isHealth` and `message`.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Iterator

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from velashard.cue import ast  # noqa: E402
from velashard.cue.errors import CueError, Pos  # noqa: E402
from velashard.cue.lexer import ATTR, FLOAT, IDENT, INT, STRING, Token, tokenize  # noqa: E402
from velashard.cue.parser import Parser, parse_file  # noqa: E402

# --------------------------------------------------------------------------------------------------
# CUE read with velashard.cue's lexer, parser and syntax tree
# --------------------------------------------------------------------------------------------------


class Source:
    """A CUE text, its tokens and its syntax tree (CueError if it does not parse), with the source text of
    a token or literal for the census and the metadata of `vela def` files."""

    def __init__(self, text: str, name: str = "template.cue"):
        self.text = text
        self.tokens = tokenize(text, name)
        self.tree = Parser(self.tokens, name).parse_file()
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self._ends = {self.offset(t.pos): t.end for t in self.tokens if t.end}

    def offset(self, pos: Pos) -> int:
        return self._line_starts[pos.line - 1] + pos.col - 1

    def raw(self, node: ast.Node | Token) -> str:
        """The text of the token that starts where node does (a literal's quotes and escapes included)."""
        start = self.offset(node.pos)
        return self.text[start:self._ends.get(start, start)]


# The nodes inside each kind of node, in source order. Interpolations are strings to this script: what
# they interpolate is not walked. A list's element type is walked where it is written (see _element_type).
_CHILDREN: dict[type, tuple[str, ...]] = {
    ast.Paren: ("x",), ast.Unary: ("x",), ast.Binary: ("x", "y"), ast.Selector: ("x",),
    ast.Index: ("x", "index"), ast.Slice: ("x", "lo", "hi"), ast.Call: ("fn", "args"), ast.Label: ("expr",),
    ast.Field: ("label", "value"), ast.Embed: ("x",), ast.LetDecl: ("x",), ast.Ellipsis: ("x",),
    ast.ForClause: ("source",), ast.IfClause: ("cond",), ast.LetClause: ("x",),
    ast.Comprehension: ("clauses", "body"), ast.StructLit: ("decls",), ast.ListLit: ("elems",),
}


def _walk(x: Any) -> Iterator[Any]:
    """Every node in x (a node or a list of them), parents before children."""
    if isinstance(x, list):
        for c in x:
            yield from _walk(c)
    elif isinstance(x, ast.Node):
        yield x
        for slot in _CHILDREN.get(type(x), ()):
            yield from _walk(getattr(x, slot))
        if type(x) is ast.ListLit:
            yield from _walk(_element_type(x))


def _label_name(label: ast.Label) -> str | None:
    """A field's name; None for dynamic labels and pattern constraints."""
    return label.name if label.kind in ("ident", "string") else None


def _is_field(node: Any) -> bool:
    """A field (`x: v`, `x?: v`, `x!: v`), not a pattern constraint (`[string]: v`)."""
    return type(node) is ast.Field and node.label.kind != "pattern"


def _is_pattern(node: Any) -> bool:
    return type(node) is ast.Field and node.label.kind == "pattern"


def _ident(node: Any, name: str | None = None) -> bool:
    return type(node) is ast.Ident and (name is None or node.name == name)


def _element_type(lst: ast.ListLit) -> Any:
    """The T of `[..., ...T]`; None for a closed list and for `...` alone (the parser's `..._`)."""
    return None if lst.tail is None or _ident(lst.tail, "_") else lst.tail


def _number(lit: ast.Lit) -> Any:
    """An int, or a float where the literal is one (CUE's decimals as Python floats)."""
    return float(lit.value) if lit.kind == "float" else lit.value


# --------------------------------------------------------------------------------------------------
# vela def files
# --------------------------------------------------------------------------------------------------

@dataclass
class Definition:
    path: str                    # relative to the definitions root
    name: str
    kind: str                    # component, trait, policy, workflow-step, ...
    imports: str                 # the import declarations, verbatim
    template: str                # the declarations inside template: {...}, dedented
    metadata: dict
    status: dict                 # customStatus / healthPolicy / details strings
    origin: str                  # vela, vela-registry, vela-deprecated, cat, cat-exp
    error: str = ""


def _import_texts(src: Source) -> list[str]:
    """The file's import declarations, verbatim (`import "strings"`, `import (...)`)."""
    texts, depth, toks = [], 0, src.tokens
    for i, t in enumerate(toks):
        if depth == 0 and t.kind == IDENT and t.value == "import" and toks[i + 1].kind != ":":
            j = i + 1
            if toks[j].kind == "(":
                while toks[j].kind != ")":
                    j += 1
            elif toks[j].kind == IDENT:
                j += 1
            texts.append(src.text[src.offset(t.pos):toks[j].end])
        elif t.kind in ("{", "[", "("):
            depth += 1
        elif t.kind in ("}", "]", ")"):
            depth -= 1
    return texts


def _struct_body(src: Source, lit: ast.StructLit) -> str:
    """The text between a struct literal's braces."""
    begin, depth = src.offset(lit.pos), 0
    for t in src.tokens:
        at = src.offset(t.pos)
        if at < begin or t.kind not in ("{", "}"):
            continue
        depth += 1 if t.kind == "{" else -1
        if depth == 0:
            return src.text[begin + 1:at]
    raise CueError("unbalanced braces", "syntax", "", (lit.pos,))


def _top_level_structs(src: Source) -> Iterator[tuple[str, ast.StructLit]]:
    """(label, value) of the top-level fields whose value is a struct literal written `label: {`."""
    for d in src.tree.body.decls:
        if _is_field(d) and d.constraint == "" and type(d.value) is ast.StructLit \
                and src.text[src.offset(d.value.pos)] == "{":
            yield d.label.name, d.value


def _literal(node: Any, src: Source) -> Any:
    """The plain data of a literal-only expression (a definition's metadata): the first term of a disjunction,
    interpolated strings as written, None for anything else."""
    t = type(node)
    if t is ast.Lit:
        if node.kind == "bytes":
            return node.value.decode("utf-8", "replace")
        return _number(node) if node.kind in ("int", "float") else node.value
    if t is ast.Interp:
        return src.raw(node)
    if t is ast.Paren:
        return _literal(node.x, src)
    if t is ast.ListLit:
        return [_literal(e, src) for e in node.elems if type(e) is not ast.Comprehension]
    if t is ast.StructLit:
        out: dict = {}
        for d in node.decls:
            if _is_field(d):
                lab = _label_name(d.label)
                if lab is None:
                    continue
                v = _literal(d.value, src)
                if isinstance(v, dict) and isinstance(out.get(lab), dict):
                    out[lab] = {**out[lab], **v}
                else:
                    out[lab] = v
            elif type(d) is ast.Embed:
                v = _literal(d.x, src)
                if isinstance(v, dict):
                    out.update(v)
        return out
    if t is ast.Binary and node.op == "|":
        return _literal(node.x, src)
    if t is ast.Unary and node.op == "*":
        return _literal(node.x, src)
    return None


def _origin(rel: str) -> str:
    """A short tag for where a definition comes from: vela, vela-registry, vela-deprecated, cat, cat-exp."""
    parts = rel.replace(os.sep, "/").split("/")
    if "vela-templates" in parts or parts[0] == "kubevela":
        for sub in ("registry", "deprecated"):
            if sub in parts:
                return "vela-" + sub
        return "vela"
    return "cat-exp" if "experimental" in parts else "cat"


def read_definition(path: str, root: str) -> Definition | None:
    rel = os.path.relpath(path, root)
    src = Source(open(path, encoding="utf-8").read(), rel)
    meta_name, meta_node, tmpl_node = None, None, None
    for label, value in _top_level_structs(src):
        if label == "template":
            tmpl_node = value
        elif meta_name is None:
            meta_name, meta_node = label, value
    if meta_name is None or tmpl_node is None:
        return None
    meta = _literal(meta_node, src)
    body = _dedent(_struct_body(src, tmpl_node))
    attrs = meta.get("attributes") or {}
    status = {}
    st = attrs.get("status") or {}
    for key in ("healthPolicy", "customStatus", "details"):
        if isinstance(st.get(key), str) and st[key].strip():
            status[key] = st[key]
    return Definition(path=rel, name=meta_name, kind=str(meta.get("type", "")),
                      imports="\n".join(_import_texts(src)), template=body, metadata=meta, status=status,
                      origin=_origin(rel))
_KINDS = {"ComponentDefinition": "component", "TraitDefinition": "trait", "PolicyDefinition": "policy",
          "WorkflowStepDefinition": "workflow-step"}


def read_yaml_definitions(path: str, root: str) -> list[Definition]:
    """X-Definition objects (YAML) whose spec.schematic.cue.template is the template as stored."""
    import yaml
    rel = os.path.relpath(path, root)
    origin = _origin(rel)
    out = []
    with open(path, encoding="utf-8") as f:
        try:
            docs = list(yaml.safe_load_all(f))
        except yaml.YAMLError:
            return out
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") not in _KINDS:
            continue
        spec = doc.get("spec") or {}
        tmpl = (((spec.get("schematic") or {}).get("cue") or {}).get("template"))
        if not isinstance(tmpl, str) or not tmpl.strip():
            continue
        status = {k: v for k, v in (spec.get("status") or {}).items()
                  if k in ("healthPolicy", "customStatus", "details") and isinstance(v, str) and v.strip()}
        attrs = {k: v for k, v in spec.items() if k != "schematic"}
        out.append(Definition(path=rel, name=str((doc.get("metadata") or {}).get("name", "")),
                              kind=_KINDS[doc["kind"]], imports="", template=tmpl,
                              metadata={"type": _KINDS[doc["kind"]], "attributes": attrs},
                              status=status, origin=origin))
    return out


def _dedent(body: str) -> str:
    """Remove the indentation common to the body's non-blank lines; lines without it (blank ones,
    or inside multi-line strings) are kept as they are, so string values do not change."""
    lines = body.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    indents = [re.match(r"[ \t]*", ln).group(0) for ln in lines if ln.strip()]
    prefix = os.path.commonprefix(indents) if indents else ""
    out = [ln[len(prefix):] if ln.startswith(prefix) else ln for ln in lines]
    return "\n".join(out) + "\n"


def kubevela_template(d: Definition) -> str:
    """The template string KubeVela stores in spec.schematic.cue.template."""
    if d.imports.strip():
        return d.imports.strip() + "\n" + d.template
    return d.template



# --------------------------------------------------------------------------------------------------
# parameter values: from examples, or synthesized from the parameter schema
# --------------------------------------------------------------------------------------------------

NOVALUE = object()
_TYPE_KINDS = {"string": "string", "int": "int", "float": "float", "number": "number", "bool": "bool",
               "bytes": "bytes", "null": "null", "uint": "int", "int8": "int", "int16": "int", "int32": "int",
               "int64": "int", "uint8": "int", "uint16": "int", "uint32": "int", "uint64": "int",
               "float32": "float", "float64": "float", "rune": "int", "byte": "int"}


class Schema:
    """Reads a template's parameter schema (its syntax tree) and makes plausible values for it."""

    def __init__(self, decls: list, seed_mode: str):
        self.mode = seed_mode            # "min": required fields only; "full": every field
        self.defs: dict[str, Any] = {}
        self.lets: dict[str, Any] = {}
        # definitions and lets wherever they are declared (nested scopes rarely reuse a name)
        for node in _walk(decls):
            if _is_field(node):
                n = _label_name(node.label)
                if n and (n.startswith("#") or n.startswith("_#")) and n not in self.defs:
                    self.defs[n] = node.value
            elif type(node) in (ast.LetDecl, ast.LetClause):
                self.lets.setdefault(node.name, node.x)
        for d in decls:
            if _is_field(d):
                n = _label_name(d.label)
                if n and n in self.defs and d.value is not self.defs[n]:
                    self.defs[n] = self._merge(self.defs[n], d.value)
        # plain fields used as types (`items: [...item]` with `item: {...}` beside the parameter)
        self.fields: dict[str, Any] = {}
        for node in _walk(decls):
            if _is_field(node):
                n = _label_name(node.label)
                if n and n not in self.fields and n != "parameter":
                    self.fields[n] = node.value
        # parameter fields the template decodes as JSON or YAML text
        self.encoded: dict[str, str] = {}
        for node in _walk(decls):
            if type(node) is ast.Call and type(node.fn) is ast.Selector and node.fn.label in ("Unmarshal", "Validate") \
                    and _ident(node.fn.x) and node.args:
                arg = node.args[0]
                while type(arg) is ast.Selector:
                    if _ident(arg.x, "parameter"):
                        self.encoded[arg.label] = node.fn.x.name
                        break
                    arg = arg.x
        self.params = None
        for d in decls:
            if _is_field(d) and _label_name(d.label) == "parameter":
                self.params = self._merge(self.params, d.value)
        if self.params is None:
            # no `parameter:` of its own, but e.g. `_params: #parameter & parameter`
            for node in _walk(decls):
                if type(node) is ast.Binary and node.op == "&":
                    a, b = node.x, node.y
                    if _ident(b, "parameter"):
                        a, b = b, a
                    if _ident(a, "parameter") and type(b) in (ast.Ident, ast.StructLit, ast.Call):
                        self.params = b
                        break
        self.depth = 0

    @staticmethod
    def _merge(a: Any, b: Any) -> Any:
        if a is None:
            return b
        return ast.Binary("&", a, b, b.pos)

    def value(self) -> Any:
        if self.params is None:
            return {}
        v = self.gen(self.params, "parameter", required=True)
        return {} if v is NOVALUE else v

    # constraint analysis --------------------------------------------------------------------
    def flatten(self, node: Any, seen: tuple = ()) -> dict:
        """Return a summary: {kinds:set, lits:[..], default:[..], bounds:{}, regex:[..],
        structs:[struct-decls], lists:[list-nodes], alts:[summary...]}"""
        s = {"kinds": set(), "lits": [], "default": [], "lo": None, "hi": None, "regex": [],
             "structs": [], "lists": [], "alts": [], "unknown": False, "maps": []}
        self._collect(node, s, seen)
        return s

    def _collect(self, node: Any, s: dict, seen: tuple) -> None:
        k = type(node)
        if k is ast.Paren:
            return self._collect(node.x, s, seen)
        if k is ast.Binary and node.op == "&":
            self._collect(node.x, s, seen)
            self._collect(node.y, s, seen)
            return
        if k is ast.Binary and node.op == "|":
            alts: list = []
            self._alts(node, alts)
            defaults = [a.x for a in alts if type(a) is ast.Unary and a.op == "*"]
            plain = [a.x if type(a) is ast.Unary and a.op == "*" else a for a in alts]
            plain = [a for a in plain if type(a) is not ast.BottomLit]
            if defaults:
                for dnode in defaults:
                    dv = self._literal_value(dnode)
                    if dv is not NOVALUE:
                        s["default"].append(dv)
                    else:
                        s["default"].append(("node", dnode))
            subs = [self.flatten(a, seen) for a in plain]
            if all(sub["lits"] and not sub["kinds"] for sub in subs):
                for sub in subs:
                    s["lits"].extend(sub["lits"])
                s["enum"] = True
            else:
                s["alts"].append(subs)
            return
        if k is ast.Unary and node.op == "*":
            dv = self._literal_value(node.x)
            s["default"].append(dv if dv is not NOVALUE else ("node", node.x))
            return self._collect(node.x, s, seen)
        if k is ast.Unary and node.op in (">", ">=", "<", "<="):
            v = self._literal_value(node.x)
            if isinstance(v, (int, float)):
                if node.op in (">", ">="):
                    lo = v + (1 if node.op == ">" and isinstance(v, int) else 0)
                    s["lo"] = lo if s["lo"] is None else max(s["lo"], lo)
                else:
                    hi = v - (1 if node.op == "<" and isinstance(v, int) else 0)
                    s["hi"] = hi if s["hi"] is None else min(s["hi"], hi)
                s["kinds"].add("number")
            elif isinstance(v, str):
                s["kinds"].add("string")
            return
        if k is ast.Unary and node.op == "=~":
            v = self._literal_value(node.x)
            if isinstance(v, str):
                s["regex"].append(v)
            s["kinds"].add("string")
            return
        if k is ast.Unary and node.op in ("!=", "!~"):
            return
        if k is ast.Unary and node.op == "-":
            v = self._literal_value(node)
            if v is not NOVALUE:
                s["lits"].append(v)
            return
        if k is ast.Lit or k is ast.Interp:
            v = self._literal_value(node)
            if v is not NOVALUE:
                s["lits"].append(v)
            else:
                s["kinds"].add("string")
            return
        if k is ast.Ident:
            name = node.name
            if name in _TYPE_KINDS:
                s["kinds"].add(_TYPE_KINDS[name])
                if name.startswith("uint") and s["lo"] is None:
                    s["lo"] = 0
                return
            if name == "_":
                s["kinds"].add("top")
                return
            if name in self.defs and name not in seen:
                return self._collect(self.defs[name], s, seen + (name,))
            if name in self.lets and name not in seen:
                return self._collect(self.lets[name], s, seen + (name,))
            if name in self.fields and name not in seen \
                    and type(self.fields[name]) in (ast.StructLit, ast.Binary, ast.Call):
                return self._collect(self.fields[name], s, seen + (name,))
            s["unknown"] = True
            return
        if k is ast.StructLit:
            s["structs"].append(node.decls)
            s["kinds"].add("struct")
            return
        if k is ast.ListLit:
            s["lists"].append(node)
            s["kinds"].add("list")
            return
        if k is ast.Call:
            fn = node.fn
            if _ident(fn, "close") and node.args:
                return self._collect(node.args[0], s, seen)
            if type(fn) is ast.Selector and _ident(fn.x):
                pkg, name = fn.x.name, fn.label
                if pkg == "strings":
                    s["kinds"].add("string")
                    if name == "MinRunes":
                        s["minrunes"] = self._literal_value(node.args[0]) if node.args else 1
                elif pkg == "list":
                    s["kinds"].add("list")
                    if name == "MinItems":
                        s["minitems"] = self._literal_value(node.args[0]) if node.args else 1
                elif pkg == "net":
                    s["kinds"].add("string")
                else:
                    s["unknown"] = True
                return
            s["unknown"] = True
            return
        if k is ast.Selector and _ident(node.x) and node.x.name in self.defs:
            # #Def.field
            selected = self._select(self.defs[node.x.name], node.label)
            return self._collect(selected if selected is not None else ast.Ident("_", node.pos), s, seen)
        s["unknown"] = True

    def _select(self, node: Any, name: str) -> Any:
        if type(node) is ast.StructLit:
            for d in node.decls:
                if _is_field(d) and _label_name(d.label) == name:
                    return d.value
        return None

    def _alts(self, node: Any, out: list) -> None:
        if type(node) is ast.Binary and node.op == "|":
            self._alts(node.x, out)
            self._alts(node.y, out)
        elif type(node) is ast.Paren and type(node.x) is ast.Binary and node.x.op == "|":
            self._alts(node.x, out)
        else:
            out.append(node)

    def _literal_value(self, node: Any) -> Any:
        k = type(node)
        if k is ast.Lit:
            if node.kind == "bytes":
                return NOVALUE
            return _number(node) if node.kind in ("int", "float") else node.value
        if k is ast.Paren:
            return self._literal_value(node.x)
        if k is ast.Unary and node.op == "-":
            v = self._literal_value(node.x)
            return -v if isinstance(v, (int, float)) else NOVALUE
        if k is ast.ListLit:
            vals = []
            for e in node.elems:
                if type(e) is ast.Comprehension:
                    return NOVALUE
                v = self._literal_value(e)
                if v is NOVALUE:
                    return NOVALUE
                vals.append(v)
            return vals
        if k is ast.StructLit:
            out = {}
            for d in node.decls:
                if not _is_field(d):
                    return NOVALUE
                if d.constraint == "?":
                    continue
                v = self._literal_value(d.value)
                n = _label_name(d.label)
                if v is NOVALUE or n is None:
                    return NOVALUE
                out[n] = v
            return out
        return NOVALUE

    # generation --------------------------------------------------------------------------------
    def gen(self, node: Any, hint: str, required: bool) -> Any:
        s = self.flatten(node)
        if s["default"] and self.mode == "min":
            return NOVALUE
        self.depth += 1
        try:
            if self.depth > 12:
                return NOVALUE
            return self._gen_from(s, hint)
        finally:
            self.depth -= 1

    def _gen_from(self, s: dict, hint: str) -> Any:
        if s["lits"]:
            lits = s["lits"]
            if self.mode == "full" and s.get("enum") and len(lits) > 1:
                non_default = [v for v in lits if v not in [d for d in s["default"]]]
                if non_default:
                    return non_default[0]
            if s["default"] and not isinstance(s["default"][0], tuple):
                return s["default"][0]
            return lits[0]
        if s["alts"]:
            # a disjunction of types: pick the alternative the default belongs to, else the first
            subs = s["alts"][0]
            pick = subs[0]
            if self.mode == "full" and s["default"]:
                dv = s["default"][0]
                for sub in subs:
                    if not (sub["lits"] and dv in sub["lits"]):
                        pick = sub
                        break
            merged = dict(pick)
            for key in ("structs", "lists"):
                merged[key] = pick[key] + s[key]
            merged["kinds"] = pick["kinds"] | s["kinds"]
            for key in ("lo", "hi"):
                if merged.get(key) is None:
                    merged[key] = s[key]
            merged["regex"] = pick["regex"] + s["regex"]
            merged["default"] = []
            return self._gen_from(merged, hint)
        if s["default"] and not isinstance(s["default"][0], tuple) and self.mode == "min":
            return NOVALUE
        kinds = s["kinds"]
        if "struct" in kinds or s["structs"]:
            return self._gen_struct(s["structs"], hint)
        if "list" in kinds or s["lists"]:
            return self._gen_list(s["lists"], hint, s)
        if "string" in kinds or "bytes" in kinds:
            return self._gen_string(hint, s)
        if "int" in kinds or "number" in kinds:
            return self._gen_int(hint, s)
        if "float" in kinds:
            return float(self._gen_int(hint, s)) + 0.5
        if "bool" in kinds:
            return True
        if "null" in kinds:
            return None
        if "top" in kinds or s["unknown"]:
            return guess_by_name(hint)
        if s["default"]:
            d = s["default"][0]
            return d if not isinstance(d, tuple) else NOVALUE
        return guess_by_name(hint)

    def _gen_struct(self, structs: list, hint: str) -> Any:
        out: dict = {}
        patterns = []
        conds = []
        for decls in structs:
            for d in self._expand(decls):
                if _is_field(d):
                    name = _label_name(d.label)
                    if name is None or name.startswith("_") or name.startswith("#"):
                        continue
                    optional = d.constraint == "?"
                    if optional and self.mode == "min":
                        continue
                    v = self.gen(d.value, name, required=not optional)
                    if v is NOVALUE:
                        continue
                    if name in out and isinstance(out[name], dict) and isinstance(v, dict):
                        out[name] = {**out[name], **v}
                    else:
                        out[name] = v
                elif _is_pattern(d):
                    patterns.append(d)
                elif type(d) is ast.Comprehension:
                    conds.append(d)
        # `if type == "pvc" { claimName: string }`: the fields the values chosen so far switch on
        for d in conds:
            if all(type(c) is ast.IfClause and _cond(c.cond, out) is True for c in d.clauses):
                extra = self._gen_struct([d.body.decls], hint)
                if isinstance(extra, dict):
                    for k, v in extra.items():
                        out.setdefault(k, v)
        if not out and patterns and (self.mode == "full" or self.depth <= 2):
            d = patterns[0]
            key = "app" if re.search("label|selector", hint, re.I) else (
                "example.com/owner" if re.search("annotation", hint, re.I) else "key1")
            v = self.gen(d.value, key, required=True)
            if v is not NOVALUE:
                out[key] = v
        return out

    def _expand(self, decls: list) -> Iterator[Any]:
        for d in decls:
            if type(d) is ast.Embed:
                s = self.flatten(d.x)
                for st in s["structs"]:
                    yield from self._expand(st)
            else:
                yield d

    def _gen_list(self, lists: list, hint: str, s: dict) -> Any:
        elem_nodes = []
        fixed = None
        for lst in lists:
            plain = [e for e in lst.elems if type(e) is not ast.Comprehension]
            if _element_type(lst) is not None:
                elem_nodes.append(lst.tail)
            elif plain and lst.tail is None:
                fixed = plain
            elif plain:
                elem_nodes.extend(plain[:1])
        singular = re.sub(r"(ies)$", "y", hint)
        singular = re.sub(r"(s)$", "", singular) if singular == hint else singular
        if fixed is not None:
            vals = [self.gen(e, singular, True) for e in fixed]
            return [v for v in vals if v is not NOVALUE]
        if not elem_nodes:
            g = guess_by_name(hint)
            return g if isinstance(g, list) else []
        node = elem_nodes[0]
        for extra in elem_nodes[1:]:
            node = ast.Binary("&", node, extra, extra.pos)
        saved = self.mode
        # list elements are filled like required structs in both modes
        v = self.gen(node, singular, True)
        self.mode = saved
        if v is NOVALUE:
            return []
        if hint in ("command", "cmd", "args") and isinstance(v, str):
            return ["sh", "-c", "echo hello"] if hint != "args" else ["--verbose"]
        return [v]

    def _gen_string(self, hint: str, s: dict) -> str:
        if hint in self.encoded:
            return '{"title": "demo", "uid": "demo"}' if self.encoded[hint] == "json" else "title: demo\n"
        cands = []
        g = guess_by_name(hint)
        if isinstance(g, str):
            cands.append(g)
        cands += ["demo", "demo-1", "1Gi", "500m", "1", "10", "a", "v1", "default", "Always", "TCP",
                  "example.com", "https://example.com", "/data", "10s", "1.0.0", "demo.example.com",
                  "a1b2c3", "*/5 * * * *", "00:00", "0 0 * * *", "10.0.0.1", "10.0.0.0/16",
                  "us-east-1", "1h", "5m", "true", "ReadWriteOnce"]
        for c in cands:
            if all(_re_ok(r, c) for r in s["regex"]):
                mr = s.get("minrunes")
                if isinstance(mr, int) and len(c) < mr:
                    continue
                return c
        return cands[0]

    def _gen_int(self, hint: str, s: dict) -> int:
        g = guess_by_name(hint)
        v = g if isinstance(g, int) and not isinstance(g, bool) else 1
        if s["lo"] is not None and v < s["lo"]:
            v = int(s["lo"]) if float(s["lo"]).is_integer() else s["lo"]
        if s["hi"] is not None and v > s["hi"]:
            v = int(s["hi"]) if float(s["hi"]).is_integer() else s["hi"]
        return v



def _cond(node: Any, env: dict) -> Any:
    """Evaluate a guard over sibling values: ==, !=, &&, ||, !, `x != _|_`; None when unknown."""
    k = type(node)
    if k is ast.Paren:
        return _cond(node.x, env)
    if k is ast.Unary and node.op == "!":
        v = _cond(node.x, env)
        return None if v is None else not v
    if k is ast.Binary and node.op in ("&&", "||"):
        a, b = _cond(node.x, env), _cond(node.y, env)
        if a is None or b is None:
            return None
        return (a and b) if node.op == "&&" else (a or b)
    if k is ast.Binary and node.op in ("==", "!="):
        left, right = node.x, node.y
        if _ident(right) and not _ident(left):
            left, right = right, left
        if not _ident(left):
            return None
        if type(right) is ast.BottomLit:
            present = left.name in env
            return (not present) if node.op == "==" else present
        if left.name not in env:
            return None
        if type(right) is ast.Interp:
            value = None  # an interpolation is not known here
        elif type(right) is ast.Lit and right.kind != "bytes":
            value = _number(right) if right.kind in ("int", "float") else right.value
        else:
            return None
        same = env[left.name] == value
        return same if node.op == "==" else not same
    if k is ast.Ident and isinstance(env.get(node.name), bool):
        return env[node.name]
    return None


def _re_ok(pattern: str, s: str) -> bool:
    try:
        return re.search(pattern, s) is not None
    except re.error:
        return True




_NAME_GUESSES = [
    (r"^image$|image$", "nginx:1.25"),
    (r"^namespace$|namespace$", "default"),
    (r"^(cpu|cpuLimit|cpuRequest)$", "500m"),
    (r"mem(ory)?", "512Mi"),
    (r"storage|capacity|size$|disk", "1Gi"),
    (r"^(port|containerPort|targetPort|servicePort|nodePort)$|port$", 8080),
    (r"replica|instances|count", 2),
    (r"percent|weight|utilization|threshold|ratio", 50),
    (r"timeoutSeconds|seconds$|periodSeconds|Seconds$", 10),
    (r"schedule|cron", "*/5 * * * *"),
    (r"mountPath|^path$|Path$|dir$", "/data"),
    (r"^url$|url$|Url$|URL$|endpoint|webhook", "https://example.com"),
    (r"host|domain", "demo.example.com"),
    (r"email", "admin@example.com"),
    (r"password|secret(Key)?$|token|apiKey|accessKey", "s3cr3t"),
    (r"region", "us-east-1"),
    (r"zone", "us-east-1a"),
    (r"version", "1.0.0"),
    (r"^tag$", "latest"),
    (r"duration|timeout|interval|period|delay|^time$", "30s"),
    (r"protocol", "TCP"),
    (r"^key$|Key$", "key1"),
    (r"^value$|Value$", "value1"),
    (r"^(command|cmd)$", ["sh", "-c", "echo hello"]),
    (r"^args$", ["--verbose"]),
    (r"^(labels|annotations|selector|matchLabels|nodeSelector)$", {"app": "demo"}),
    (r"^env$", [{"name": "MODE", "value": "demo"}]),
    (r"[nN]ame$|^name", "demo"),
    (r"^(enabled?|enable[A-Z].*|is[A-Z].*)$", True),
    (r"^(id|uid)$", "a1b2c3"),
    (r"^(ip|address|addr)$", "10.0.0.1"),
    (r"cidr", "10.0.0.0/16"),
    (r"^(type|kind)$", "demo"),
]


def guess_by_name(hint: str) -> Any:
    for pat, val in _NAME_GUESSES:
        if re.search(pat, hint):
            return json.loads(json.dumps(val))
    return "demo"


# examples -----------------------------------------------------------------------------------------

def load_examples(root: str | None) -> dict:
    """Collect (kind, type) -> [ {properties, component, app} ] from Application documents found in
    YAML files and in ```yaml blocks of Markdown files under root."""
    import yaml  # PyYAML is a dependency of the project's tooling
    found: dict = collections.defaultdict(list)
    if not root or not os.path.isdir(root):
        return found
    for dirpath, _, files in sorted(os.walk(root)):
        for fn in sorted(files):
            p = os.path.join(dirpath, fn)
            try:
                text = open(p, encoding="utf-8").read()
            except (UnicodeDecodeError, OSError):
                continue
            chunks = []
            if fn.endswith(".md"):
                chunks = re.findall(r"```ya?ml[^\n]*\n(.*?)```", text, re.S)
            elif fn.endswith((".yaml", ".yml")):
                chunks = [text]
            for chunk in chunks:
                try:
                    docs = list(yaml.safe_load_all(chunk))
                except Exception:
                    continue
                for doc in docs:
                    _collect_app(doc, found, os.path.relpath(p, root))
    return found


def _collect_app(doc: Any, found: dict, where: str) -> None:
    if not isinstance(doc, dict) or doc.get("kind") != "Application":
        return
    spec = doc.get("spec") or {}
    meta = doc.get("metadata") or {}
    comps = [c for c in (spec.get("components") or []) if isinstance(c, dict)]
    app = {"name": meta.get("name") or "demo-app", "namespace": meta.get("namespace") or "default",
           "labels": meta.get("labels") or {}, "annotations": meta.get("annotations") or {},
           "components": comps, "where": where}
    for c in comps:
        props = c.get("properties")
        if isinstance(c.get("type"), str) and isinstance(props, dict):
            found[("component", c["type"])].append({"properties": props, "component": c, "app": app})
        for t in c.get("traits") or []:
            if isinstance(t, dict) and isinstance(t.get("type"), str) and isinstance(t.get("properties"), dict):
                found[("trait", t["type"])].append({"properties": t["properties"], "component": c, "app": app})
    for pol in spec.get("policies") or []:
        if isinstance(pol, dict) and isinstance(pol.get("type"), str) and isinstance(pol.get("properties"), dict):
            found[("policy", pol["type"])].append({"properties": pol["properties"], "component": None,
                                                   "app": app, "policy_name": pol.get("name")})


def _has_placeholder(v: Any) -> bool:
    s = json.dumps(v)
    return bool(re.search(r"<[a-zA-Z][^>]*>|\$\{|\{\{", s))


# --------------------------------------------------------------------------------------------------
# context and assembly
# --------------------------------------------------------------------------------------------------

CLUSTER_VERSION = {"gitVersion": "v1.29.2", "major": "1", "minor": 29, "platform": "linux/amd64"}


class Ordered(dict):
    """A Go struct or a RawExtension: json.Marshal keeps its field order instead of sorting."""


def go_json(v: Any) -> str:
    """json.Marshal as Go does it: map keys sorted (Ordered keeps its order), compact, HTML
    characters escaped, integral float64 values without a fraction (YAML numbers are float64)."""
    return _go(v).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026") \
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _go(v: Any) -> str:
    if isinstance(v, dict):
        items = v.items() if isinstance(v, Ordered) else sorted(v.items())
        return "{" + ",".join(json.dumps(str(k), ensure_ascii=False) + ":" + _go(x) for k, x in items) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_go(x) for x in v) + "]"
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e21:
        return str(int(v))
    if isinstance(v, float):
        r = repr(v)
        if "e" in r:
            m, e = r.split("e")
            r = f"{m}e{'+' if not e.startswith('-') else '-'}{int(e.lstrip('+-')):02d}"
        return r
    if isinstance(v, (bool, type(None), int, str)):
        return json.dumps(v, ensure_ascii=False)
    return json.dumps(str(v), ensure_ascii=False)


def typical_workload(kind: str, name: str, image: str = "nginx:1.25") -> dict:
    """What a component renders before traits run (context.output of a trait), in KubeVela's shape."""
    labels = {"app.oam.dev/component": name, "app.oam.dev/name": "demo-app"}
    pod = {"metadata": {"labels": {"app.oam.dev/component": name, "app.oam.dev/name": "demo-app"}},
           "spec": {"containers": [{"name": name, "image": image,
                                    "ports": [{"containerPort": 80, "name": "port-80", "protocol": "TCP"}]}]}}
    if kind == "HelmRelease":
        return {"apiVersion": "helm.toolkit.fluxcd.io/v2beta1", "kind": "HelmRelease",
                "metadata": {"name": name},
                "spec": {"interval": "30s", "chart": {"spec": {"chart": "podinfo", "version": "6.5.0",
                                                               "sourceRef": {"kind": "HelmRepository",
                                                                             "name": "demo-repo"}}},
                         "values": {}}}
    if kind == "StatefulSet":
        return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "labels": labels},
                "spec": {"replicas": 1, "serviceName": name,
                         "selector": {"matchLabels": {"app.oam.dev/component": name}}, "template": pod}}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"labels": {"app.oam.dev/component": name, "app.oam.dev/name": "demo-app"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app.oam.dev/component": name}},
                     "template": pod}}


def workload_kind_for(meta: dict) -> str:
    applies = [str(a).lower() for a in ((meta.get("attributes") or {}).get("appliesToWorkloads") or [])]
    if applies and all("helmrelease" in a for a in applies):
        return "HelmRelease"
    if applies and not any(a in ("*", "deployments.apps", "webservice", "worker") or "deployment" in a
                           for a in applies) and any("statefulset" in a for a in applies):
        return "StatefulSet"
    return "Deployment"


@dataclass
class Case:
    name: str
    text: str
    expression: str
    definition: str
    kind: str
    variant: str
    source: str
    parameter: Any


def build_context(kind: str, app: dict, comp_name: str, comp_type: str, comp_props: dict,
                  traits: list, parameter_in_context: Any, output: dict | None = None,
                  outputs: dict | None = None, policy: bool = False) -> dict:
    components = []
    for c in app.get("components_override") or [{"name": comp_name, "type": comp_type,
                                                  "properties": comp_props, "traits": traits}]:
        # common.ApplicationComponent's JSON: name, type, externalRevision, properties, dependsOn,
        # inputs, outputs, traits, scopes (empty ones left out); properties are raw JSON
        entry = Ordered(name=c.get("name", ""), type=c.get("type", ""))
        for key in ("externalRevision", "properties", "dependsOn", "inputs", "outputs", "traits", "scopes"):
            val = c.get(key)
            if val in (None, "", [], {}) and key != "properties":
                continue
            if val is None:
                continue
            if key == "properties":
                val = _ordered_deep(val)
            if key == "traits":
                val = [Ordered(type=t.get("type", ""), **({"properties": _ordered_deep(t["properties"])}
                                                          if t.get("properties") is not None else {}))
                       for t in val if isinstance(t, dict)]
            entry[key] = val
        components.append(entry)
    ctx = {
        "appAnnotations": app.get("annotations") or {},
        "appLabels": app.get("labels") or {},
        "appName": app["name"],
        "appRevision": app["name"] + "-v1",
        "appRevisionNum": 1,
        "cluster": "" if policy else "local",
        "clusterVersion": CLUSTER_VERSION,
        "components": components,
        "name": comp_name,
        "namespace": app.get("namespace") or "default",
        "publishVersion": "",
        "replicaKey": "",
        "revision": "" if policy else "7d9c8f6b5",
        "workflowName": "",
    }
    if parameter_in_context is not None:
        ctx["parameter"] = parameter_in_context
    if kind == "trait":
        ctx["componentType"] = comp_type
        ctx["output"] = output or {}
        if outputs:
            ctx["outputs"] = outputs
    return ctx


def _ordered_deep(v: Any) -> Any:
    if isinstance(v, dict):
        return Ordered((k, _ordered_deep(x)) for k, x in v.items())
    if isinstance(v, list):
        return [_ordered_deep(x) for x in v]
    return v


def assemble_program(d: Definition, parameter: Any, context: dict) -> str:
    tmpl = kubevela_template(d)
    if d.kind == "trait":
        text = tmpl + "\n"
        if parameter is not None:
            text += "parameter: " + go_json(parameter) + "\n"
        return text + "context: " + go_json(context) + "\n"
    param_file = "parameter: {}" if parameter is None else "parameter: " + go_json(parameter)
    return "\n".join([tmpl + "\ncontext: _\nparameter: _\n", param_file, "context: " + go_json(context)]) + "\n"


def assemble_status(template: str, parameter: Any, context: dict) -> str:
    ptxt = "parameter: {}\n" if parameter is None else "parameter: " + go_json(parameter) + "\n"
    return template + "\n" + "context: " + go_json(context) + "\n" + ptxt


def top_fields(decls: list) -> set:
    """Labels of the template's top-level fields, also those inside top-level comprehensions."""
    names = set()
    for d in decls:
        if _is_field(d):
            n = _label_name(d.label)
            if n:
                names.add(n)
        elif type(d) is ast.Comprehension:
            names |= top_fields(d.body.decls)
        elif type(d) is ast.Embed and type(d.x) is ast.StructLit:
            names |= top_fields(d.x.decls)
    return names


def export_expressions(d: Definition, decls: list | None) -> list[str]:
    names = top_fields(decls) if decls is not None else set(
        re.findall(r"^(output|outputs|patch|patchOutputs)\s*:", d.template, re.M))
    if decls is None:
        names |= {m for m in re.findall(r"^\s*(output|outputs|patch)\s*:", d.template, re.M)}
    exprs = [e for e in ("output", "outputs", "patch") if e in names]
    if not exprs and d.kind == "policy":
        exprs = ["parameter"]
    return exprs


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", s).strip("-") or "x"


def live_status(obj: dict, name: str = "frontend", namespace: str = "default") -> dict:
    """A running object as the API server returns it: the rendered object with its name, namespace
    and generation, and a healthy-looking status for the kinds KubeVela's health policies read."""
    o = json.loads(json.dumps(obj))
    if not isinstance(o.get("metadata"), dict):
        o["metadata"] = {}
    o["metadata"].setdefault("name", name)
    o["metadata"].setdefault("namespace", namespace)
    o["metadata"].setdefault("generation", 1)
    kind = o.get("kind")
    spec = o.get("spec")
    # the API server's defaults for the fields health policies read
    if isinstance(spec, dict) and kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        spec.setdefault("replicas", 1)
    if isinstance(spec, dict) and kind == "Job":
        spec.setdefault("parallelism", 1)
        spec.setdefault("completions", 1)
        spec.setdefault("backoffLimit", 6)
    replicas = (o.get("spec") or {}).get("replicas", 1) if isinstance(o.get("spec"), dict) else 1
    if not isinstance(replicas, int):
        replicas = 1
    if kind in ("Deployment", "StatefulSet", "ReplicaSet", "CloneSet"):
        o["status"] = {"observedGeneration": 1, "replicas": replicas, "readyReplicas": replicas,
                       "updatedReplicas": replicas, "availableReplicas": replicas, "currentReplicas": replicas}
    elif kind == "DaemonSet":
        o["status"] = {"observedGeneration": 1, "desiredNumberScheduled": 1, "numberReady": 1,
                       "updatedNumberScheduled": 1, "numberAvailable": 1, "currentNumberScheduled": 1}
    elif kind == "Job":
        o["status"] = {"succeeded": 1, "active": 0, "failed": 0}
    elif kind == "CronJob":
        o["status"] = {"lastScheduleTime": "2024-01-01T00:00:00Z"}
    elif kind == "Service":
        o["status"] = {"loadBalancer": {"ingress": [{"ip": "10.0.0.10"}]}}
        o.setdefault("spec", {}).setdefault("clusterIP", "10.96.0.10")
    elif kind == "Ingress":
        o["status"] = {"loadBalancer": {"ingress": [{"ip": "10.0.0.11"}]}}
    elif kind == "PersistentVolumeClaim":
        o["status"] = {"phase": "Bound"}
    else:
        o["status"] = {"phase": "Running", "state": "Running", "status": "Completed", "observedGeneration": 1,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
                                       "message": "ready"}]}
    return o


class Assembler:
    def __init__(self, defs_root: str, examples_root: str | None, max_examples: int = 2,
                 variants: tuple = ("min", "full"), oracle_dir: str | None = None):
        self.defs_root = defs_root
        self.oracle_dir = oracle_dir
        self.examples = load_examples(examples_root)
        self.max_examples = max_examples
        self.variants = variants
        self.definitions: list[Definition] = []
        self.skipped: list[tuple[str, str]] = []
        for dirpath, _, files in sorted(os.walk(defs_root)):
            for fn in sorted(files):
                p = os.path.join(dirpath, fn)
                if fn.endswith((".yaml", ".yml")):
                    found = read_yaml_definitions(p, defs_root)
                    if not found:
                        self.skipped.append((os.path.relpath(p, defs_root), "no X-Definition with a CUE schematic"))
                    self.definitions.extend(found)
                    continue
                if not fn.endswith(".cue"):
                    continue
                try:
                    d = read_definition(p, defs_root)
                except CueError as e:
                    self.skipped.append((os.path.relpath(p, defs_root), f"cannot split: {e}"))
                    continue
                if d is None:
                    self.skipped.append((os.path.relpath(p, defs_root), "no metadata or no template field"))
                    continue
                self.definitions.append(d)

    def parameter_sets(self, d: Definition, decls: list | None) -> list[tuple[str, Any, dict | None]]:
        """[(variant, parameter, example)]"""
        out: list[tuple[str, Any, dict | None]] = []
        seen = set()
        for ex in self.examples.get((d.kind, d.name), []):
            props = ex["properties"]
            key = go_json(props)
            if key in seen or _has_placeholder(props):
                continue
            seen.add(key)
            out.append((f"ex{len([o for o in out if o[0].startswith('ex')]) + 1}", props, ex))
            if len(out) >= self.max_examples:
                break
        if decls is not None:
            for mode in self.variants:
                try:
                    v = Schema(decls, mode).value()
                except RecursionError:
                    continue
                key = go_json(v)
                if key in seen:
                    continue
                seen.add(key)
                out.append((mode, v, None))
        elif not out:
            out.append(("empty", {}, None))
        return out

    def cases(self, kinds: tuple = ("component", "trait", "policy"), status: bool = True) -> list[Case]:
        cases: list[Case] = []
        names: set[str] = set()
        for d in self.definitions:
            if d.kind not in kinds:
                continue
            try:
                decls = parse_file(kubevela_template(d), d.path).body.decls
            except CueError as e:
                d.error = f"schema not read: {e}"
                decls = None
            exprs = export_expressions(d, decls)
            if not exprs:
                self.skipped.append((d.path, "nothing to export (no output/outputs/patch)"))
                continue
            stem, n = f"{d.origin}.{_slug(d.name)}", 2
            while stem in names:   # the same name twice in one origin
                stem, n = f"{d.origin}.{_slug(d.name)}-{n}", n + 1
            names.add(stem)
            for variant, param, ex in self.parameter_sets(d, decls):
                prog, ctx = self._program(d, param, ex)
                base = f"{stem}.{variant}"
                for e in exprs:
                    cases.append(Case(name=f"{base}.{e}", text=prog, expression=e, definition=d.name,
                                      kind=d.kind, variant=variant, source=d.path, parameter=param))
                if status and d.status:
                    cases.extend(self._status_cases(d, base, param, ctx))
        return cases

    def _program(self, d: Definition, param: Any, ex: dict | None) -> tuple[str, dict]:
        app = {"name": "demo-app", "namespace": "default", "labels": {}, "annotations": {}}
        comp_name = "frontend"
        if ex is not None:
            exapp = ex["app"]
            app.update({k: exapp[k] for k in ("name", "namespace", "labels", "annotations")})
            app["labels"] = {k: str(v) for k, v in (app["labels"] or {}).items()}
            app["annotations"] = {k: str(v) for k, v in (app["annotations"] or {}).items()}
            if ex.get("component"):
                comp_name = ex["component"].get("name") or comp_name
            if exapp.get("components"):
                app["components_override"] = exapp["components"]
        if d.kind == "component":
            ctx = build_context("component", app, comp_name, d.name, param, [], param)
        elif d.kind == "trait":
            wk = workload_kind_for(d.metadata)
            comp_type = "webservice"
            comp_props = {"image": "nginx:1.25", "ports": [{"port": 80, "expose": True}]}
            if ex is not None and ex.get("component"):
                comp_type = ex["component"].get("type") or comp_type
                comp_props = ex["component"].get("properties") or comp_props
            if wk == "HelmRelease":
                comp_type = "helm"
                comp_props = {"chart": "podinfo", "url": "https://stefanprodan.github.io/podinfo",
                              "repoType": "helm", "version": "6.5.0"}
            elif wk == "StatefulSet":
                comp_type = "statefulset"
            image = comp_props.get("image") if isinstance(comp_props.get("image"), str) else "nginx:1.25"
            output = typical_workload(wk, comp_name, image)
            traits = [{"type": d.name, "properties": param}]
            ctx = build_context("trait", app, comp_name, comp_type, comp_props, traits, comp_props,
                                output=output)
        else:
            pname = (ex or {}).get("policy_name") or "demo-policy"
            ctx = build_context("policy", app, pname, d.name, None, [], None, policy=True)
            ctx["components"] = [{"name": "frontend", "type": "webservice",
                                  "properties": {"image": "nginx:1.25"}}]
            ctx["artifacts"] = {"frontend": {"workload": typical_workload("Deployment", "frontend")}}
        return assemble_program(d, param, ctx), ctx

    def _rendered(self, case_name: str) -> Any:
        """What real CUE rendered for a case in an earlier run (its .oracle.json), if it succeeded."""
        if not self.oracle_dir:
            return None
        p = os.path.join(self.oracle_dir, case_name + ".oracle.json")
        try:
            with open(p) as f:
                res = json.load(f)
            return json.loads(res["stdout"]) if res.get("code") == 0 else None
        except (OSError, ValueError, KeyError):
            return None

    def _status_cases(self, d: Definition, base: str, param: Any, render_ctx: dict) -> list[Case]:
        """Health and custom status as KubeVela evaluates them (pkg/cue/definition/health): the
        template context {name, appName, appRevision, output (components only), outputs, parameter,
        status} with the objects as read back from the cluster. The rendered objects come from real
        CUE's answers of this definition's own cases when they are there (run the oracle, assemble
        again, run the oracle on the status cases); before that, a typical Deployment stands in."""
        out = []
        ctx: dict = {"appName": render_ctx["appName"], "appRevision": render_ctx["appRevision"],
                     "name": render_ctx["name"]}
        ns = render_ctx["namespace"]
        if d.kind == "component":
            obj = self._rendered(base + ".output")
            if not isinstance(obj, dict):
                obj = typical_workload("Deployment", render_ctx["name"])
            ctx["output"] = live_status(obj, render_ctx["name"], ns)
        aux = self._rendered(base + ".outputs")
        if isinstance(aux, dict) and aux:
            ctx["outputs"] = {k: live_status(v, k, ns) if isinstance(v, dict) else v for k, v in aux.items()}
        ctx["parameter"] = param
        details = {} if "details" in d.status else None
        for key, expr in (("healthPolicy", "isHealth"), ("customStatus", "message")):
            if key not in d.status:
                continue
            c = dict(ctx)
            c["status"] = {} if details is None else {"details": details}
            if key == "customStatus":
                c["status"] = {**c["status"], "healthy": True}
            out.append(Case(name=f"{base}.status-{expr}", text=assemble_status(d.status[key], param, c),
                            expression=expr, definition=d.name, kind=d.kind + "-status", variant=base.split(".")[-1],
                            source=d.path, parameter=param))
        return out



# --------------------------------------------------------------------------------------------------
# feature census
# --------------------------------------------------------------------------------------------------

def feature_census(defs: list[Definition], kinds: tuple) -> dict:
    """Per feature: the number of definitions whose template (and, separately, status programs) use it."""
    tmpl_counts: dict[str, set] = collections.defaultdict(set)
    status_counts: dict[str, set] = collections.defaultdict(set)
    for d in defs:
        if d.kind not in kinds:
            continue
        key = f"{d.origin}:{d.name}" + ("" if d.kind != "trait" else "(trait)") + f" [{d.path}]"
        try:
            for feat in features_of(kubevela_template(d)):
                tmpl_counts[feat].add(key)
        except CueError:
            tmpl_counts["<template does not parse>"].add(key)
        for prog in d.status.values():
            try:
                for feat in features_of(prog):
                    status_counts[feat].add(key)
            except CueError:
                status_counts["<status does not parse>"].add(key)

    def rank(counts: dict) -> list:
        return [[k, len(v), sorted(x.split(" [")[0] for x in v)[:8]] for k, v in
                sorted(counts.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
    return {"template": rank(tmpl_counts), "status": rank(status_counts)}


_COMMENT_TAG = re.compile(r"\s*\+(patchKey|patchStrategy|usage|short|ignore)\b(=\S+)?")


def features_of(text: str) -> set[str]:
    """The language features and builtins a CUE text uses; CueError if it does not parse."""
    src = Source(text)
    feats: set[str] = set()
    imports: dict[str, str] = {}
    for imp in src.tree.imports:
        imports[imp.name] = imp.path
        feats.add(f'import "{imp.path}"')
    decls = src.tree.body.decls
    callees = {id(n.fn) for n in _walk(decls) if type(n) is ast.Call}
    names: dict[str, list] = {}
    for n in _walk(decls):
        if _is_field(n):
            lab = _label_name(n.label)
            if lab:
                names.setdefault(lab, []).append(n.value)
        elif type(n) in (ast.LetDecl, ast.LetClause):
            names.setdefault(n.name, []).append(n.x)
    for n in _walk(decls):
        if type(n) is ast.StructLit and any(type(d) is ast.Comprehension for d in n.decls):
            feats.add("comprehension in struct {for/if ...{}}")
        elif type(n) is ast.ListLit and any(type(e) is ast.Comprehension for e in n.elems):
            feats.add("comprehension in list [for ...]")
        elif type(n) is ast.Binary and n.op == "|":
            alts: list = []
            _flat_or(n, alts)
            for a in alts:
                if type(a) is ast.Unary and a.op == "*" and type(a.x) is ast.ListLit \
                        and any(type(e) is ast.Comprehension for e in a.x.elems):
                    feats.add("*[for ...] | [] (default that may fail)")
    for t in src.tokens:
        for c in t.comments:
            m = _COMMENT_TAG.match(c)
            if m:
                tag = m.group(1)
                feats.add(f"// +{tag}" + (m.group(2) if tag == "patchStrategy" and m.group(2) else ""))
        if t.kind == ATTR:
            feats.add("attribute @" + t.value[1:].split("(")[0])
        raw = src.raw(t)
        if t.kind == STRING:
            if t.parts is None and raw.startswith("#"):
                feats.add('raw string #"..."#')
            if raw.lstrip("#").startswith('"""'):
                feats.add('multi-line string """')
            if raw.lstrip("#").startswith("'"):
                feats.add("bytes literal '...'")
            if t.parts is not None:
                feats.add("string interpolation \\(...)")
        if t.kind in (INT, FLOAT) and re.search(r"[KMGTP]i?$", raw):
            feats.add("number multiplier (1Ki)")
        if t.kind in (INT, FLOAT) and ("." in raw or "e" in raw.lower()) and not raw.lower().startswith("0x"):
            feats.add("float literal")
    for node in _walk(decls):
        _node_features(node, feats, imports, callees, names)
    return feats


def _flat_or(n: Any, out: list) -> None:
    if type(n) is ast.Binary and n.op == "|":
        _flat_or(n.x, out)
        _flat_or(n.y, out)
    else:
        out.append(n)


def _operand_kind(node: Any, names: dict, depth: int = 0) -> str:
    """list, string, number or ? for an operand of +, by what it is or what its name is bound to."""
    k = type(node)
    if depth > 4:
        return "?"
    if k is ast.Paren:
        return _operand_kind(node.x, names, depth + 1)
    if k is ast.ListLit:
        return "list"
    if (k is ast.Lit and node.kind == "string") or k is ast.Interp:
        return "string"
    if k is ast.Lit and node.kind in ("int", "float"):
        return "number"
    if k is ast.Call:
        fn = node.fn
        if type(fn) is ast.Selector and _ident(fn.x):
            if fn.x.name in ("strings", "strconv") and fn.label not in ("Atoi", "ParseInt", "ParseFloat",
                                                                        "ParseBool", "Split", "Fields", "Count",
                                                                        "Index"):
                return "string"
            if fn.x.name == "list":
                return "list"
        if _ident(fn, "len"):
            return "number"
        return "?"
    if k is ast.Binary and node.op in ("+", "*"):
        a, b = _operand_kind(node.x, names, depth + 1), _operand_kind(node.y, names, depth + 1)
        return a if a != "?" else b
    if k is ast.Binary and node.op == "|":
        alts: list = []
        _flat_or(node, alts)
        kinds = {_operand_kind(a.x if type(a) is ast.Unary and a.op == "*" else a, names, depth + 1) for a in alts}
        kinds.discard("?")
        return kinds.pop() if len(kinds) == 1 else "?"
    if k is ast.Ident or k is ast.Selector:
        name = node.name if k is ast.Ident else node.label
        if name in ("string",):
            return "string"
        if name in ("int", "number", "float"):
            return "number"
        for v in names.get(name, [])[:3]:
            kk = _operand_kind(v, names, depth + 1)
            if kk != "?":
                return kk
    return "?"


_TYPE_IDENTS = {"string", "int", "float", "number", "bool", "bytes", "null", "uint", "int8", "int16",
                "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64", "rune"}
_BUILTIN_FUNCS = {"len", "close", "and", "or", "div", "mod", "quo", "rem"}


def _node_features(node: Any, feats: set, imports: dict, callees: set, names: dict) -> None:
    k = type(node)
    if k is ast.Call:
        fn = node.fn
        if _ident(fn) and fn.name in _BUILTIN_FUNCS:
            feats.add(f"{fn.name}()")
        elif type(fn) is ast.Selector and _ident(fn.x) and fn.x.name in imports:
            feats.add(f"{imports[fn.x.name]}.{fn.label}")
        elif _ident(fn):
            feats.add(f"call {fn.name}()")
    elif k is ast.Selector and _ident(node.x) and node.x.name in imports and id(node) not in callees:
        feats.add(f"{imports[node.x.name]}.{node.label} (not called)")
    elif _is_pattern(node):
        match = node.label.expr
        if _ident(match, "string"):
            feats.add("pattern [string]: T")
        elif type(match) is ast.Unary and match.op == "=~":
            feats.add('pattern [=~"re"]: T')
        else:
            feats.add("pattern [expr]: T (other)")
    elif k is ast.Field:
        if node.constraint == "?":
            feats.add("optional field x?:")
        elif node.constraint == "!":
            feats.add("required field x!:")
        _label_features(node.label, feats)
    elif k is ast.LetDecl or k is ast.LetClause:
        feats.add("let")
    elif k is ast.Embed:
        feats.add("embedding in struct")
    elif k is ast.Ellipsis or (k is ast.ListLit and node.tail is not None):
        feats.add("... (open list/struct)")
    elif k is ast.Comprehension:
        for c in node.clauses:
            if type(c) is ast.ForClause:
                feats.add("for k, v in" if c.key is not None else "for x in")
            elif type(c) is ast.IfClause:
                feats.add("if comprehension")
            else:
                feats.add("let clause in comprehension")
        if len(node.clauses) > 1:
            feats.add("multi-clause comprehension (for/if chained)")
    elif k is ast.Binary:
        _binary_features(node, feats, names)
    elif k is ast.Unary:
        op = node.op
        if op == "*":
            feats.add("*_|_ default" if type(node.x) is ast.BottomLit else "default *x")
        elif op in ("<", "<=", ">", ">="):
            feats.add("bound >=, <= ...")
        elif op == "=~":
            feats.add('bound =~"re"')
        elif op == "!~":
            feats.add('bound !~"re"')
        elif op == "!=":
            feats.add("bound !=x")
        elif op == "!":
            feats.add("! not")
        elif op == "-":
            feats.add("unary -")
    elif k is ast.BottomLit:
        feats.add("_|_ literal")
    elif k is ast.Ident:
        _name_features(node.name, feats)
    elif k is ast.Index:
        feats.add("index x[i] / x[\"k\"]")
    elif k is ast.Slice:
        feats.add("slice x[a:b]")


def _binary_features(node: ast.Binary, feats: set, names: dict) -> None:
    op, left, right = node.op, node.x, node.y
    if op in ("==", "!=") and (type(left) is ast.BottomLit or type(right) is ast.BottomLit):
        feats.add(f"x {op} _|_")
    elif op == "|":
        feats.add("disjunction |")
    elif op == "&":
        feats.add("conjunction &")
    elif op in ("+", "*"):
        kinds = {_operand_kind(left, names), _operand_kind(right, names)} - {"?"}
        if op == "+":
            feats.add("list + list" if "list" in kinds else "string + string" if "string" in kinds else
                      "number + number" if "number" in kinds else "+ (operands not known statically)")
        else:
            feats.add("list * n" if "list" in kinds else "string * n" if "string" in kinds else "* multiply")
    elif op in ("-", "/"):
        feats.add(f"{op} arithmetic")
    elif op in ("&&", "||"):
        feats.add(f"{op}")
    elif op in ("=~", "!~"):
        feats.add(f"binary {op} regexp match")
    elif op in ("<", "<=", ">", ">="):
        feats.add("comparison < <= > >=")
    elif op in ("==", "!="):
        feats.add(f"{op} comparison")


def _name_features(name: str, feats: set) -> None:
    """What an identifier (a reference, or a label) says: a sized type, top, a definition or a hidden field."""
    if name in _TYPE_IDENTS and name not in ("string", "int", "bool", "null", "number", "float"):
        feats.add(f"sized/other type {name}")
    elif name == "_":
        feats.add("top _")
    elif name.startswith("#") or name.startswith("_#"):
        feats.add("definition reference #X")
    elif name.startswith("_"):
        feats.add("hidden reference _x")


def _label_features(label: ast.Label, feats: set) -> None:
    if label.alias is not None:
        feats.add("field alias X=label")
        feats.add("alias X=")
    if label.kind == "dynamic":
        feats.add("dynamic label (expr): / \"\\(x)\":")
    elif label.kind == "string":
        feats.add('quoted label "x":')
    elif label.kind == "ident":
        n = label.name
        _name_features(n, feats)
        if n.startswith("#"):
            feats.add("definition #X:")
        elif n.startswith("_#"):
            feats.add("hidden definition _#X:")
        elif n.startswith("_"):
            feats.add("hidden field _x:")


# --------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--defs", required=True,
                    help="directory of vela def .cue files and X-Definition .yaml files (searched recursively)")
    ap.add_argument("--examples", help="directory of .md/.yaml files holding example Applications")
    ap.add_argument("--out", help="directory to write the cases and index.json into")
    ap.add_argument("--max-examples", type=int, default=2, help="example-based variants per definition")
    ap.add_argument("--no-status", action="store_true", help="leave out health/custom status cases")
    ap.add_argument("--features", action="store_true",
                    help="print which CUE features and builtins the definitions use (JSON)")
    ap.add_argument("--kinds", default="component,trait,policy")
    args = ap.parse_args(argv)
    kinds = tuple(args.kinds.split(","))
    asm = Assembler(args.defs, args.examples, max_examples=args.max_examples, oracle_dir=args.out)
    if args.features:
        census = feature_census(asm.definitions, kinds)
        counted = [d for d in asm.definitions if d.kind in kinds]
        print(json.dumps({"definitions": len(counted),
                          "by_kind": collections.Counter(d.kind for d in counted),
                          **census}, indent=1))
        return 0
    if not args.out:
        ap.error("--out is required unless --features")
    os.makedirs(args.out, exist_ok=True)
    cases = asm.cases(kinds, status=not args.no_status)
    index = []
    for c in cases:
        fn = c.name + ".cue"
        with open(os.path.join(args.out, fn), "w", encoding="utf-8") as f:
            f.write(c.text)
        index.append({"file": fn, "expression": c.expression, "definition": c.definition,
                      "kind": c.kind, "variant": c.variant, "source": c.source})
    with open(os.path.join(args.out, "index.json"), "w", encoding="utf-8") as f:
        json.dump(index, f, indent=1)
        f.write("\n")
    summary = {
        "definitions": len([d for d in asm.definitions if d.kind in kinds]),
        "cases": len(cases),
        "by_kind": collections.Counter(c.kind for c in cases),
        "by_variant": collections.Counter(re.sub(r"\d+$", "", c.variant) for c in cases),
        "schema_not_read": [d.path for d in asm.definitions if d.error],
        "skipped": asm.skipped,
    }
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

