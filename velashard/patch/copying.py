"""Copies of JSON-shaped data (dicts, lists and immutable atoms), several times faster than copy.deepcopy,
which keeps a memo for cycles and shared objects that JSON cannot have."""

from __future__ import annotations

from typing import Any


def copy_json(value: Any) -> Any:
    t = type(value)
    if t is dict:
        return {k: copy_json(v) for k, v in value.items()}
    if t is list:
        return [copy_json(v) for v in value]
    return value
