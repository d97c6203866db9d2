"""JSON merge patch (RFC 7386)."""

from __future__ import annotations

import copy
from typing import Any


def json_merge_patch(target: Any, patch: Any) -> Any:
    """Apply `patch` to `target`, returning a new value; null in the patch removes a key.

    A patch that is not an object replaces the target; a nested object patch merges into the
    matching member (or into {} when the member is absent or not an object).
    """
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge_patch(result.get(key), value)
    return result
