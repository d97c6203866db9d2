"""JSON merge patch (RFC 7386)."""

from __future__ import annotations

from typing import Any

from velashard.patch.copying import copy_json


def json_merge_patch(target: Any, patch: Any) -> Any:
    """Apply `patch` to `target`, returning a new value; null in the patch removes a key.

    A patch that is not an object replaces the target; a nested object patch merges into the
    matching member (or into {} when the member is absent or not an object).
    """
    if not isinstance(patch, dict):
        return copy_json(patch)
    return _merge_into(copy_json(target) if isinstance(target, dict) else {}, patch)


def _merge_into(result: dict, patch: dict) -> dict:
    """Merge into `result`, a copy this patch owns (copying again at every level would be quadratic)."""
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            current = result.get(key)
            result[key] = _merge_into(current if isinstance(current, dict) else {}, value)
        else:
            result[key] = copy_json(value)
    return result
