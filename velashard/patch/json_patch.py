"""JSON patch (RFC 6902): add, remove, replace, move, copy, test, with JSON pointers (RFC 6901)."""

from __future__ import annotations

from typing import Any

from velashard.patch.copying import copy_json
from velashard.patch.errors import PatchError


class _OpError(Exception):
    """Raised inside one operation; apply_json_patch adds which operation and path."""


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str):
        raise _OpError("path must be a string")
    if path and not path.startswith("/"):
        raise _OpError(f"invalid JSON pointer {path!r}: must be empty or start with '/'")
    # RFC 6901: ~1 before ~0, so that "~01" decodes to "~1".
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]


def _index(items: list[Any], token: str, for_add: bool) -> int:
    if token == "-" and for_add:
        return len(items)
    if not token.isascii() or not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise _OpError(f"invalid array index {token!r}")
    idx = int(token)
    if idx > len(items) or (idx == len(items) and not for_add):
        raise _OpError(f"array index {idx} out of range (length {len(items)})")
    return idx


def _resolve(doc: Any, tokens: list[str]) -> Any:
    node = doc
    for token in tokens:
        if isinstance(node, dict):
            if token not in node:
                raise _OpError("path not found")
            node = node[token]
        elif isinstance(node, list):
            if token == "-":
                raise _OpError("path not found")
            node = node[_index(node, token, False)]
        else:
            raise _OpError("path not found")
    return node


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _resolve(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, True), value)
    else:
        raise _OpError("path not found")
    return doc


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise _OpError("cannot remove the whole document")
    parent = _resolve(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _OpError("path not found")
        del parent[last]
    elif isinstance(parent, list):
        if last == "-":
            raise _OpError("path not found")
        del parent[_index(parent, last, False)]
    else:
        raise _OpError("path not found")
    return doc


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 equals 1.0, but true is not 1; objects ignore member order."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def _apply(doc: Any, op: dict[str, Any]) -> Any:
    name = op.get("op")
    tokens = _pointer(op.get("path"))
    if name in ("add", "replace", "test") and "value" not in op:
        raise _OpError("missing value")
    if name == "add":
        return _add(doc, tokens, copy_json(op["value"]))
    if name == "remove":
        return _remove(doc, tokens)
    if name == "replace":
        _resolve(doc, tokens)  # the target must exist
        return _add(_remove(doc, tokens), tokens, copy_json(op["value"])) if tokens else copy_json(op["value"])
    if name in ("move", "copy"):
        if "from" not in op:
            raise _OpError("missing from")
        source = _pointer(op["from"])
        if name == "move":
            if source == tokens:
                return doc
            if tokens[:len(source)] == source:
                raise _OpError("cannot move a value into one of its own children")
        value = copy_json(_resolve(doc, source))
        if name == "move":
            doc = _remove(doc, source)
        return _add(doc, tokens, value)
    if name == "test":
        actual = _resolve(doc, tokens)
        if not json_equal(actual, op["value"]):
            raise _OpError(f"test failed: value is {actual!r}, expected {op['value']!r}")
        return doc
    raise _OpError(f"unknown op {name!r}")


def apply_json_patch(target: Any, operations: list[dict[str, Any]]) -> Any:
    """Apply RFC 6902 operations to a copy of `target`; the patch applies wholly or not at all.

    PatchError names the failing operation, e.g. `json patch operation 2 (replace /spec/x): path not found`.
    """
    if not isinstance(operations, list):
        raise PatchError("a json patch must be a list of operations")
    doc = copy_json(target)
    for i, op in enumerate(operations):
        if not isinstance(op, dict):
            raise PatchError(f"json patch operation {i}: must be an object")
        try:
            doc = _apply(doc, op)
        except _OpError as err:
            raise PatchError(f"json patch operation {i} ({op.get('op')} {op.get('path')}): {err}") from None
    return doc
