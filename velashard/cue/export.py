"""What export keeps beside the data: the `// +key=value` comment tags of a value's fields, nested as the
exported data is (`tag_tree`), and an open list's element type. The data itself is `export_rules.to_data`."""

from __future__ import annotations

from typing import Any

from velashard.cue.labels import is_regular, label_text
from velashard.cue.errors import CueError
from velashard.cue.evaluator import Vertex
from velashard.cue.export_rules import ordered_keys, to_data
from velashard.cue.vertex import LIST, STRUCT

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
                    children[label_text(key)] = sub
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
