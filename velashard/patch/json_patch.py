"""JSON patch (RFC 6902): add, remove, replace, move, copy, test."""

from __future__ import annotations

import copy
from typing import Any

from velashard.patch.errors import PatchError


def _pointer(path: Any, where: str) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise PatchError(f"{where}: invalid JSON pointer {path!r}")
    if path == "":
        return []
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list, token: str, where: str, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"{where}: invalid array index {token!r}")
    idx = int(token)
    if idx > len(container) or (idx == len(container) and not allow_end):
        raise PatchError(f"{where}: array index {idx} out of range")
    return idx


def _parent(doc: Any, tokens: list[str], where: str) -> Any:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict):
            if token not in node:
                raise PatchError(f"{where}: path not found")
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, where, False)]
        else:
            raise PatchError(f"{where}: path not found")
    return node


def _get(doc: Any, tokens: list[str], where: str) -> Any:
    if not tokens:
        return doc
    parent = _parent(doc, tokens, where)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"{where}: path not found")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, where, False)]
    raise PatchError(f"{where}: path not found")


def _add(doc: Any, tokens: list[str], value: Any, where: str) -> Any:
    if not tokens:
        return value
    parent = _parent(doc, tokens, where)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, where, True), value)
    else:
        raise PatchError(f"{where}: path not found")
    return doc


def _remove(doc: Any, tokens: list[str], where: str) -> Any:
    if not tokens:
        raise PatchError(f"{where}: cannot remove the whole document")
    parent = _parent(doc, tokens, where)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"{where}: path not found")
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, where, False)]
    else:
        raise PatchError(f"{where}: path not found")
    return doc


def apply_json_patch(target: Any, operations: Any) -> Any:
    """Apply RFC 6902 operations to a copy of `target`; PatchError names the failing operation and path."""
    if not isinstance(operations, list):
        raise PatchError("a json patch must be a list of operations")
    doc = copy.deepcopy(target)
    for i, op in enumerate(operations):
        if not isinstance(op, dict):
            raise PatchError(f"json patch operation {i}: must be an object")
        name = op.get("op")
        where = f"json patch operation {i} ({name} {op.get('path')})"
        tokens = _pointer(op.get("path"), where)
        if name in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"{where}: missing value")
        if name == "add":
            doc = _add(doc, tokens, copy.deepcopy(op["value"]), where)
        elif name == "remove":
            doc = _remove(doc, tokens, where)
        elif name == "replace":
            _get(doc, tokens, where)
            if not tokens:
                doc = copy.deepcopy(op["value"])
            else:
                doc = _remove(doc, tokens, where)
                doc = _add(doc, tokens, copy.deepcopy(op["value"]), where)
        elif name in ("move", "copy"):
            source = _pointer(op.get("from"), where)
            if name == "move" and tokens[:len(source)] == source and tokens != source:
                raise PatchError(f"{where}: cannot move a value into one of its children")
            value = copy.deepcopy(_get(doc, source, where))
            if name == "move":
                doc = _remove(doc, source, where)
            doc = _add(doc, tokens, value, where)
        elif name == "test":
            actual = _get(doc, tokens, where)
            if actual != op["value"] or isinstance(actual, bool) != isinstance(op["value"], bool):
                raise PatchError(f"{where}: test failed: value is {actual!r}, expected {op['value']!r}")
        else:
            raise PatchError(f"json patch operation {i}: unknown op {name!r}")
    return doc
