"""Field sets: which fields of an object exist or are owned, in Kubernetes' FieldsV1 encoding.

A path is a tuple of encoded elements as structured-merge-diff writes them: `f:<field>` for a map
field, `k:{"name":"app"}` for an item of a list keyed by fields (a list-map), `v:"x"` for a member
of a set of scalars, `i:<n>` for an item of a list addressed by index. A field set holds the leaves
(scalars, atomic lists and maps, empty maps) and the items of list-maps themselves (written `.` in
FieldsV1). Which lists are list-maps, sets or atomic is told by a `Shapes`.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

Path = tuple[str, ...]
FieldSet = frozenset[Path]

ATOMIC = "atomic"
SET = "set"
MAP = "map"

_ITEM = object()  # the value recorded for a list-map item node: it has no value of its own
# Key fields with a server default: an item that omits them is the item with the default.
_KEY_DEFAULTS = {"protocol": "TCP"}


class Shapes:
    """How the lists and maps at a field-name path merge; the default: granular maps, atomic lists."""

    def list_type(self, names: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
        return ATOMIC, ()

    def atomic_map(self, names: tuple[str, ...]) -> bool:
        return False


def _key_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def item_element(item: Any, index: int, keys: tuple[str, ...]) -> str:
    """The path element naming a list-map item: its key fields, or its index when it has none."""
    if not isinstance(item, dict):
        return f"i:{index}"
    key: dict[str, Any] = {}
    for name in keys:
        if name in item:
            key[name] = item[name]
        elif name in _KEY_DEFAULTS:
            key[name] = _KEY_DEFAULTS[name]
    if not key:
        return f"i:{index}"
    return "k:" + _key_json(key)


def leaves(obj: Any, shapes: Shapes, prefix: Path = (), names: tuple[str, ...] = ()) -> dict[Path, Any]:
    """Every member path of `obj` with its value (list-map items map to a marker)."""
    out: dict[Path, Any] = {}
    _walk(obj, shapes, prefix, names, out)
    return out


def _walk(value: Any, shapes: Shapes, path: Path, names: tuple[str, ...], out: dict[Path, Any]) -> None:
    if isinstance(value, dict):
        if (not value and path) or (names and shapes.atomic_map(names)):
            out[path] = value
            return
        for key, child in value.items():
            if child is None:
                continue
            _walk(child, shapes, path + (f"f:{key}",), names + (key,), out)
        return
    if isinstance(value, list):
        kind, keys = shapes.list_type(names)
        if kind == SET:
            for item in value:
                out[path + ("v:" + _key_json(item),)] = item
            if not value:
                out[path] = value
            return
        if kind == MAP and value:
            for index, item in enumerate(value):
                item_path = path + (item_element(item, index, keys),)
                out[item_path] = _ITEM
                if isinstance(item, dict):
                    for key, child in item.items():
                        if child is not None:
                            _walk(child, shapes, item_path + (f"f:{key}",), names + (key,), out)
            return
        out[path] = value
        return
    out[path] = value


def field_set(obj: Any, shapes: Shapes) -> FieldSet:
    return frozenset(leaves(obj, shapes))


def compare(old: dict[Path, Any], new: dict[Path, Any]) -> tuple[set[Path], set[Path], set[Path]]:
    """(added, removed, modified) between two `leaves` results."""
    added = new.keys() - old.keys()
    removed = old.keys() - new.keys()
    modified = {p for p in new.keys() & old.keys() if new[p] is not _ITEM and not _equal(new[p], old[p])}
    return set(added), set(removed), modified


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


# --- FieldsV1 ------------------------------------------------------------------------------------

def to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    """The FieldsV1 form: nested objects, keys sorted, `.` first in a member that has children."""
    root: dict[str, Any] = {}
    members: set[int] = set()
    for path in sorted(paths):  # a member sorts before its children, so `.` is written first
        node = root
        for element in path:
            child = node.get(element)
            if child is None:
                if not node and id(node) in members:
                    node["."] = {}
                child = node[element] = {}
            node = child
        members.add(id(node))
    return root


def from_fields_v1(fields: Any) -> FieldSet:
    out: set[Path] = set()

    def visit(node: Any, path: Path) -> None:
        if not isinstance(node, dict):
            return
        if not node:
            if path:
                out.add(path)
            return
        for key, child in node.items():
            if key == ".":
                out.add(path)
            else:
                visit(child, path + (key,))
    visit(fields, ())
    return frozenset(out)


def has_fields(fields: Any, root: bool = True) -> bool:
    """Whether from_fields_v1(fields) is not empty, without building it."""
    if not isinstance(fields, dict):
        return False
    if not fields:
        return not root
    return any(key == "." or has_fields(child, False) for key, child in fields.items())


def path_string(path: Path) -> str:
    """A path as Kubernetes prints it in conflicts: `.spec.containers[name="app"].image`."""
    parts: list[str] = []
    for element in path:
        kind, _, text = element.partition(":")
        if kind == "f":
            parts.append("." + text)
        elif kind == "k":
            key = json.loads(text)
            parts.append("[" + ",".join(f"{k}={_key_json(v)}" for k, v in key.items()) + "]")
        elif kind == "v":
            parts.append(f"[={text}]")
        else:
            parts.append(f"[{text}]")
    return "".join(parts)


# --- merging applied configuration and removing fields --------------------------------------------

def merge(live: Any, applied: Any, shapes: Shapes, names: tuple[str, ...] = ()) -> Any:
    """The live object with the applied configuration merged in (maps by key, lists by their type)."""
    if isinstance(applied, dict) and isinstance(live, dict) and not (names and shapes.atomic_map(names)):
        out = dict(live)
        for key, value in applied.items():
            if value is None:
                continue
            out[key] = merge(live.get(key), value, shapes, names + (key,)) if key in live else _clean(value)
        return out
    if isinstance(applied, list) and isinstance(live, list):
        kind, keys = shapes.list_type(names)
        if kind == SET:
            merged = list(live)
            for item in applied:
                if not any(_equal(item, have) for have in merged):
                    merged.append(item)
            return merged
        if kind == MAP:
            index = {item_element(item, i, keys): i for i, item in enumerate(live)}
            merged = list(live)
            for i, item in enumerate(applied):
                element = item_element(item, i, keys)
                at = index.get(element)
                if at is None or element.startswith("i:"):
                    merged.append(_clean(item))
                else:
                    merged[at] = merge(merged[at], item, shapes, names)
            return merged
    return _clean(applied)


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def remove(obj: dict[str, Any], paths: Iterable[Path], shapes: Shapes) -> dict[str, Any]:
    """`obj` without the given member paths; maps and lists left empty by the removal go too.

    Shorter paths go first: removing a list-map item takes its fields with it, while removing its
    key field first would leave an item that no path names any more.
    """
    result = obj
    for path in sorted(paths, key=len):
        result = _remove_one(result, path, shapes, ())
    return result


def _remove_one(node: Any, path: Path, shapes: Shapes, names: tuple[str, ...]) -> Any:
    if not path:
        return node
    head, rest = path[0], path[1:]
    kind, _, text = head.partition(":")
    if kind == "f" and isinstance(node, dict) and text in node:
        out = dict(node)
        if not rest:
            del out[text]
        else:
            child = _remove_one(node[text], rest, shapes, names + (text,))
            if isinstance(child, (dict, list)) and not child and node[text]:
                del out[text]
            else:
                out[text] = child
        return out
    if isinstance(node, list):
        list_kind, keys = shapes.list_type(names)
        for i, item in enumerate(node):
            element = ("v:" + _key_json(item)) if list_kind == SET else item_element(item, i, keys)
            if element != head:
                continue
            out = list(node)
            if not rest:
                del out[i]
            else:
                out[i] = _remove_one(item, rest, shapes, names)
            return out
    return node
