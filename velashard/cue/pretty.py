"""Evaluated values in CUE syntax, as `cue eval` prints them (incomplete values included)."""

from __future__ import annotations

from typing import Any

from velashard.cue.labels import Quoted, is_regular
from velashard.cue.encode import json_string
from velashard.cue.evaluator import Vertex
from velashard.cue.export_rules import ordered_keys
from velashard.cue.values import NULL, Bottom, Disj, fmt
from velashard.cue.vertex import LIST, STRUCT


def format_value(v: Any) -> str:
    lines: list[str] = []
    if type(v) is Vertex:
        v.expand()
        if v.kind == STRUCT and v.alts is None and v.err is None:
            _fields(v, lines, 0)
            return "\n".join(lines) + "\n"
    return _value(v, 0) + "\n"


def _label(key: str) -> str:
    if type(key) is Quoted:
        return json_string(str(key))
    return key if key.isidentifier() or not is_regular(key) else json_string(key)


def _fields(v: Vertex, lines: list[str], depth: int) -> None:
    pad = "    " * depth
    for key in ordered_keys(v):
        arc = v.arcs[key]
        if not (arc.regular or arc.optional or arc.required):
            continue
        marker = "" if arc.regular else ("?" if arc.optional else "!")
        lines.append(f"{pad}{_label(key)}{marker}: {_value(arc, depth)}")


def _value(v: Any, depth: int) -> str:
    if type(v) is Vertex:
        v.expand()
        if v.not_allowed is not None:
            return "_|_ // field not allowed"
        if v.err is not None:
            return f"_|_ // {v.err.message}"
        if v.alts is not None:
            return " | ".join(("*" if d else "") + _value(a, depth) for a, d in v.alts)
        if v.kind == STRUCT:
            inner: list[str] = []
            _fields(v, inner, depth + 1)
            return "{\n" + "\n".join(inner) + "\n" + "    " * depth + "}" if inner else "{}"
        if v.kind == LIST:
            items = [_value(a, depth + 1) for a in v.arcs.values()]
            if v.list_open:
                items.append("...")
            if not items:
                return "[]"
            pad = "    " * (depth + 1)
            return "[" + ", ".join(items) + "]" if all("\n" not in i for i in items) and len(items) < 8 else \
                "[\n" + ",\n".join(pad + i for i in items) + ",\n" + "    " * depth + "]"
        return _value(v.scalar, depth) if v.scalar is not None else "_"
    if type(v) is Bottom:
        return f"_|_ // {v.message}"
    if type(v) is Disj:
        return " | ".join(("*" if d else "") + _value(a, depth) for a, d in v.alts)
    if v is NULL:
        return "null"
    if type(v) is str:
        return json_string(v, escape_html=False)
    return fmt(v)
