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
        return _validate(v, out)
    if v.kind == LIST:
        return _validate(v, [_vertex_data(a, depth + 1) for a in v.arcs.values()])
    return _scalar_data(v.scalar, _path(v))


def _describe_alts(v: Vertex) -> str:
    parts = []
    for a, d in v.alts[:4]:
        a.expand()
        kind = "struct" if a.kind == STRUCT else "list" if a.kind == LIST else fmt(a.scalar)
        parts.append(("*" if d else "") + kind)
    return " | ".join(parts)


def _validate(v: Vertex, data: Any) -> Any:
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


TagTree = tuple  # (tags of this field: {key: value}, {child label or list index: TagTree})
OPEN_LIST = "..."  # the tag tree's mark of an open list (not a comment tag)
LIST_TAIL = "...T"  # and the data of its `...T` element type, when that is concrete


def comment_tags(groups: list[list[str]] | None) -> dict[str, str]:
    """`// +key=value` lines of a field's comments (value one word), as KubeVela reads patch tags."""
    tags: dict[str, str] = {}
    for group in groups or ():
        for line in group:
            line = line.strip()
            if not line.startswith("+"):
                continue
            key, sep, value = line[1:].partition("=")
            value = value.strip()
            if sep and value and len(value.split()) == 1:
                tags[key.strip()] = value
    return tags


def tail_element(v: Vertex) -> Vertex | None:
    """An open list's next element as its `...T` makes it (None without a tail), to describe or export."""
    if not v.tails:
        return None
    element = Vertex(v, len(v.arcs))
    for tail in v.tails:
        element.add(tail)
    element.expand()
    return element


def _tail_data(v: Vertex) -> Any:
    element = tail_element(v)
    if element is None:
        return None
    try:
        data = to_data(element)
    except CueError:
        return None
    return data if isinstance(data, (dict, list)) and data else None


def tag_tree(v: Any) -> TagTree | None:
    """The `+tags` of a value's field and of the fields inside it, nested as the exported data is; None
    where there are none."""
    if type(v) is not Vertex:
        return None
    v.expand()
    tags = comment_tags(v.docs)
    if v.alts is not None:
        v = ([a for a, d in v.alts if d] or [a for a, _ in v.alts])[0]
        v.expand()
    children: dict = {}
    if v.kind == STRUCT:
        for key in ordered_keys(v):
            arc = v.arcs[key]
            if is_regular(key) and arc.regular:
                sub = tag_tree(arc)
                if sub:
                    children[key.lstrip(QUOTED) if key[:1] == QUOTED else key] = sub
    elif v.kind == LIST:
        if v.list_open:  # `[a, ...]`: KubeVela merges an open patch list into a longer one
            tags = {**tags, OPEN_LIST: "true"}
            tail = _tail_data(v)
            if tail is not None:  # `[...T]`: T constrains every further element of the workload's list
                tags[LIST_TAIL] = tail
        for i, arc in enumerate(v.arcs.values()):
            sub = tag_tree(arc)
            if sub:
                children[i] = sub
    return (tags, children) if tags or children else None
