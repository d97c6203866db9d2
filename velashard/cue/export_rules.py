"""CUE's export rules: plain data of an evaluated value (fields in CUE's order, defaults chosen; optional
fields, hidden fields and definitions left out; anything not concrete, conflicting or required-but-absent an error
that names its path), and the first error `cue export` reports anywhere in a value."""

from __future__ import annotations

from typing import Any

from velashard.cue.labels import is_regular
from velashard.cue.errors import CueError
from velashard.cue.limits import LimitExceeded
from velashard.cue.values import NULL, Bottom, Conj, Disj, Validator, check_validator, default_of, fmt, is_atom
from velashard.cue.vertex import LIST, STRUCT, VertexBase


def ordered_keys(v: VertexBase) -> list:
    """The order CUE v0.4 gives a struct's fields: a topological merge of the field order of every
    struct literal that contributed, then the fields no literal declared (comprehensions, dynamic
    labels) in the order they were added (cue/types.go structValOpts and export.VertexFeatures)."""
    arcs = v.arcs
    fronts = [list(s) for s in v.structs]
    if not fronts:
        return list(arcs)
    known = set()
    for f in fronts:
        known.update(f)
    extra = [k for k in arcs if k not in known]
    if extra:
        fronts.append(extra)
    if len(fronts) == 1:
        order = fronts[0]
    else:
        order = _sort_arcs(fronts)
    return [k for k in order if k in arcs]


def _sort_arcs(fronts: list[list]) -> list:
    counts: dict = {}
    for a in fronts:
        if len(a) <= 1:
            continue
        for f in a[1:]:
            counts[f] = counts.get(f, 0) + 1
    order: list = []
    done: set = set()
    while True:
        progress = False
        for i, a in enumerate(fronts):
            if not a:
                continue
            f = a[0]
            n = counts.get(f, 0)
            if n > 0 and f not in done:
                continue
            a = a[1:]
            fronts[i] = a
            if len(a) > 1 and counts.get(a[0], 0) > 0 and a[0] not in done:
                counts[a[0]] -= 1
            if f not in done:
                done.add(f)
                order.append(f)
            progress = True
            break
        if progress:
            continue
        for a in fronts:
            if a:
                counts[a[0]] = 0
                break
        else:
            return order



def first_error(v: VertexBase, depth: int = 0) -> CueError | None:
    """The first error (not merely incomplete) anywhere in v: fields, hidden fields and definitions."""
    v.expand()
    if v.not_allowed is not None:
        return v.not_allowed.error(v.path())
    if v.err is not None:
        # an undefined field may still be supplied: cue export reports it only where it exports
        return None if v.err.incomplete or v.err.kind == "undefined" else v.err.error(v.path())
    if v.alts is not None:
        return None
    if depth > v.ctx.limits.depth:
        raise LimitExceeded("value nested too deeply (a structural cycle?)")
    for arc in list(v.arcs.values()):
        if arc.regular or arc.required:
            e = first_error(arc, depth + 1)
            if e is not None:
                return e
    return None


def to_data(v: Any, path: str = "") -> Any:
    """Plain data of a concrete value: dict, list, str, int, Decimal, bool, bytes, None for null."""
    if isinstance(v, VertexBase):
        return _vertex_data(v, 0)
    return _scalar_data(v, path)


def _path(v: VertexBase, fallback: str = "") -> str:
    return v.path() or fallback


def _vertex_data(v: VertexBase, depth: int) -> Any:
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
            out[key if type(key) is str else str(key)] = _vertex_data(arc, depth + 1)
        return _validate(v, out)
    if v.kind == LIST:
        return _validate(v, [_vertex_data(a, depth + 1) for a in v.arcs.values()])
    return _scalar_data(v.scalar, _path(v))


def _describe_alts(v: VertexBase) -> str:
    parts = []
    for a, d in v.alts[:4]:
        a.expand()
        kind = "struct" if a.kind == STRUCT else "list" if a.kind == LIST else fmt(a.scalar)
        parts.append(("*" if d else "") + kind)
    return " | ".join(parts)


def _validate(v: VertexBase, data: Any) -> Any:
    """A struct or list with validators (list.MinItems(2), struct.MaxFields(3)): checked on its data."""
    s = v.scalar
    validators = [s] if type(s) is Validator else [b for b in s.bounds if type(b) is Validator] \
        if type(s) is Conj else []
    for val in validators:
        r = check_validator(data, val)
        if type(r) is Bottom:
            raise r.error(_path(v))
    return data


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

