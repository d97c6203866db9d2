"""From evaluated values to plain data, by CUE's export rules: defaults chosen; optional fields, hidden
fields and definitions left out; anything not concrete, conflicting or required-but-absent is an error
that names its path."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from velashard.cue.compiler import QUOTED, is_regular
from velashard.cue.errors import CueError
from velashard.cue.evaluator import DONE, LIST, SCALAR, STRUCT, Vertex, ordered_keys
from velashard.cue.values import NULL, Bottom, Conj, Disj, Validator, check_validator, default_of, fmt, is_atom


def to_data(v: Any, path: str = "") -> Any:
    """Plain data of a concrete value: dict, list, str, int, Decimal, bool, bytes, None for null."""
    if type(v) is Vertex:
        return _vertex_data(v, 0)
    return _scalar_data(v, path)


def _path(v: Vertex, fallback: str = "") -> str:
    return v.path() or fallback


def _vertex_data(v: Vertex, depth: int) -> Any:
    v.expand()
    if depth > 1000:
        raise CueError("value nested too deeply", "limit", _path(v))
    if v.not_allowed is not None:
        raise v.not_allowed.error(_path(v))
    if v.err is not None:
        raise v.err.error(_path(v))
    if v.alts is not None:
        candidates = [a for a, d in v.alts if d] or [a for a, _ in v.alts]
        if len(candidates) == 1:
            return _vertex_data(candidates[0], depth)
        # alternatives that differ only where export cannot see (`[] | [...]`) are one value
        try:
            values = [_vertex_data(a, depth) for a in candidates]
        except CueError:
            values = []
        if values and all(x == values[0] for x in values[1:]):
            return values[0]
        raise CueError(f"incomplete value {_describe_alts(v)} (unresolved disjunction)", "incomplete", _path(v))
    if v.kind == STRUCT:
        _validate(v)
        out: dict = {}
        arcs = v.arcs
        for key in ordered_keys(v):
            if not is_regular(key):
                continue
            arc = arcs[key]
            if not arc.regular:
                if arc.required:
                    raise CueError("field is required but not present", "incomplete", _path(arc))
                continue
            out[key.lstrip(QUOTED) if key[:1] == QUOTED else key] = _vertex_data(arc, depth + 1)
        return out
    if v.kind == LIST:
        _validate(v)
        return [_vertex_data(a, depth + 1) for a in v.arcs.values()]
    return _scalar_data(v.scalar, _path(v))


def _describe_alts(v: Vertex) -> str:
    parts = []
    for a, d in v.alts[:4]:
        a.expand()
        kind = "struct" if a.kind == STRUCT else "list" if a.kind == LIST else fmt(a.scalar)
        parts.append(("*" if d else "") + kind)
    return " | ".join(parts)


def _validate(v: Vertex) -> None:
    s = v.scalar
    validators = []
    if type(s) is Validator:
        validators = [s]
    elif type(s) is Conj:
        validators = [b for b in s.bounds if type(b) is Validator]
    if not validators:
        return
    data = None
    for val in validators:
        if data is None:
            data = to_data_no_validate(v)
        r = check_validator(data, val)
        if type(r) is Bottom:
            raise r.error(_path(v))


def to_data_no_validate(v: Vertex) -> Any:
    saved = v.scalar
    v.scalar = None
    try:
        return _vertex_data(v, 0)
    finally:
        v.scalar = saved


def _scalar_data(s: Any, path: str) -> Any:
    if s is None:
        raise CueError("incomplete value _", "incomplete", path)
    t = type(s)
    if t is Disj:
        d = default_of(s)
        if type(d) is Bottom:
            raise CueError(f"incomplete value {s!r}", "incomplete", path)
        return _scalar_data(d, path)
    if t is Bottom:
        raise s.error(path)
    if s is NULL:
        return None
    if is_atom(s):
        return s
    raise CueError(f"incomplete value {s!r}", "incomplete", path)


def from_data(obj: Any, parent: Vertex | None = None, label: Any = None) -> Any:
    """Plain data as a value: containers become evaluated vertices, atoms stay atoms."""
    t = type(obj)
    if t is dict:
        v = Vertex(parent, label)
        v.state = DONE
        v.kind = STRUCT
        v.is_struct = 2
        v.structs = [tuple(QUOTED + k if k[:1] in "#_" else k for k in obj)]
        for k, x in obj.items():
            key = QUOTED + k if k[:1] in "#_" else k
            v.arcs[key] = _arc(x, v, key)
        return v
    if t is list:
        v = Vertex(parent, label)
        v.state = DONE
        v.kind = LIST
        for i, x in enumerate(obj):
            v.arcs[i] = _arc(x, v, i)
        return v
    if obj is None:
        return NULL
    if t is float:
        return Decimal(repr(obj))
    return obj


def _arc(x: Any, parent: Vertex, key: Any) -> Vertex:
    value = from_data(x, parent, key)
    if type(value) is Vertex:
        return value
    arc = Vertex(parent, key)
    arc.state = DONE
    arc.kind = SCALAR
    arc.scalar = value
    return arc
