"""What `velashard def show` prints: a definition's parameters as rows, nested structs as their own tables, read
from the CUE `parameter` of its template (name, type, required, default, `// +usage=`), as `vela show` does.
Fields marked `// +ignore` are left out. Pure functions over a definition object."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from velashard.core.templates import compile_template
from velashard.workflow.templates import compile_step
from velashard.cue import CueError, is_regular, label_text
from velashard.cue.evaluator import Vertex
from velashard.cue.export import tail_element
from velashard.cue.export_rules import to_data
from velashard.cue.values import BasicType, Disj, default_of, fmt
from velashard.cue.vertex import LIST, STRUCT


@dataclass(frozen=True)
class Row:
    name: str
    description: str
    type: str
    required: bool
    default: str


@dataclass(frozen=True)
class Table:
    path: str  # "" for the top level, else the dotted parameter path, e.g. "volumeMounts.pvc"
    rows: tuple[Row, ...]


def _comment(arc: Vertex, key: str) -> str | None:
    for group in arc.docs or ():
        for line in group:
            line = line.strip()
            if line == f"+{key}" or line.startswith(f"+{key}="):
                return line.partition("=")[2].strip()
    return None


def _type(v: Vertex) -> str:
    if v.alts is not None:  # `*["a"] | [...string]`: the type of the alternatives, once each
        kinds = []
        for alt, _ in v.alts:
            alt.expand()
            kinds.append(_type(alt))
        known = [k for k in dict.fromkeys(kinds) if k not in ("[]_", "_")]
        return " | ".join(known) or kinds[0]
    if v.kind == STRUCT:
        return "map[string]" + _pattern_type(v) if not _fields(v) and v.patterns else "struct"
    if v.kind == LIST:
        element = tail_element(v)
        return "[]" + (_type(element) if element is not None else "_")
    scalar = v.scalar
    if type(scalar) is Disj:
        basic = [fmt(a) for a, _ in scalar.alts if type(a) is BasicType]
        literals = [fmt(a) for a, _ in scalar.alts if type(a) is not BasicType]
        if basic:  # `*false | bool` is a bool
            return " | ".join(dict.fromkeys(_kind_word(b) for b in basic))
        return " | ".join(literals)
    return _kind_word(fmt(scalar)) if scalar is not None else "_"


def _kind_word(text: str) -> str:
    return {"int": "int", "string": "string", "bool": "bool", "number": "number", "float": "float"}.get(
        text, text if not text.startswith(('"', "<", ">", "!", "=")) else "string" if text.startswith('"') else text)


def _pattern_type(v: Vertex) -> str:
    probe = Vertex(v, "_probe")
    for pattern in v.patterns:
        probe.add(pattern.conjunct("_probe"))
    if not probe.conjuncts:
        return "_"
    probe.expand()
    return _type(probe)


def _fields(v: Vertex) -> list[str]:
    return [k for k in v.arcs if type(k) is not int and is_regular(k)]


def _default(v: Vertex) -> str:
    if v.alts is not None:
        marked = [a for a, d in v.alts if d]
        try:
            return json.dumps(to_data(marked[0])) if len(marked) == 1 else ""
        except CueError:
            return ""
    if v.kind in (STRUCT, LIST):
        return ""
    scalar = v.scalar
    if type(scalar) is Disj:
        d = default_of(scalar)
        if d is not scalar and type(d) is not Disj:
            try:
                return json.dumps(to_data(d))
            except CueError:
                return ""
    return ""


def _all_defaulted(v: Vertex) -> bool:
    """A struct whose every field is optional or has a default need not be given."""
    if v.kind != STRUCT or not _fields(v):
        return False
    for key in _fields(v):
        arc = v.arcs[key]
        arc.expand()
        if not (arc.optional or _default(arc) or _all_defaulted(arc)):
            return False
    return True


def _nested(v: Vertex) -> Vertex | None:
    if v.kind == STRUCT and _fields(v):
        return v
    if v.kind == LIST:
        element = tail_element(v)
        if element is not None and element.kind == STRUCT and _fields(element):
            return element
    return None


def _tables(v: Vertex, path: str) -> list[Table]:
    rows = []
    nested: list[Table] = []
    for key in _fields(v):
        arc = v.arcs[key]
        if _comment(arc, "ignore") is not None:
            continue
        arc.expand()
        default = _default(arc)
        required = not arc.optional and not default and not _all_defaulted(arc)
        rows.append(Row(label_text(key), _comment(arc, "usage") or "", _type(arc), required, default))
        inner = _nested(arc)
        if inner is not None:
            nested.extend(_tables(inner, f"{path}.{key}" if path else label_text(key)))
    rows.sort(key=lambda r: (not r.required, r.name))
    return [Table(path, tuple(rows))] + nested


def parameter_tables(definition: dict[str, Any]) -> list[Table]:
    """The top-level parameters, then one table per nested struct, depth first; a kube schematic's list."""
    schematic = (definition.get("spec") or {}).get("schematic") or {}
    if "kube" in schematic:
        params = schematic["kube"].get("parameters") or []
        return [Table("", tuple(Row(p["name"], p.get("description", ""), p.get("type", "string"),
                                    bool(p.get("required")), json.dumps(p["default"]) if "default" in p else "")
                                for p in params))]
    template = (schematic.get("cue") or {}).get("template")
    if template is None:
        return [Table("", ())]
    # a step's template may import the workflow providers' packages (vela/op, vela/kube, ...)
    compile_ = compile_step if definition.get("kind") == "WorkflowStepDefinition" else compile_template
    instance = compile_(template).evaluate({})
    value = instance.lookup("parameter")
    if type(value) is not Vertex:
        return [Table("", ())]
    value.expand()
    if value.alts is not None:  # alternative forms (e.g. env's): the fields of each, once
        merged: dict[str, Row] = {}
        nested: dict[str, Table] = {}
        for alt, _ in value.alts:
            alt.expand()
            if alt.kind != STRUCT:
                continue
            first, *inner = _tables(alt, "")
            for row in first.rows:
                merged.setdefault(row.name, Row(row.name, row.description, row.type, False, row.default))
            for table in inner:
                nested.setdefault(table.path, table)
        return [Table("", tuple(sorted(merged.values(), key=lambda r: r.name)))] + list(nested.values())
    if value.kind != STRUCT:
        kind = _type(value)
        if kind == "_":  # only the declaration beside the template: it takes no parameters (KubeVela's step-group)
            return [Table("", ())]
        return [Table("", (Row("(parameter)", "", kind, True, ""),))]
    return _tables(value, "")


def render_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """A bordered text table, the way `vela show` prints parameters."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [line, "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |", line]
    out += ["| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths)) + " |" for row in rows]
    out.append(line)
    return "\n".join(out)
