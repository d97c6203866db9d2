"""Three-way merge for an apply-style controller, after kubectl's client-side apply.

kubectl computes a patch from (last-applied, desired, live) and sends it; here the controller
computes the merged object directly: fields in `desired` win, fields it applied before and no
longer wants are removed, and fields set by others (never in last-applied) survive. Lists with a
strategic merge key are merged item by item, so a sidecar container someone else added stays.
"""

from __future__ import annotations

import copy
from typing import Any

from velashard.patch.strategic_merge import _merge_key


def three_way_merge(last_applied: dict[str, Any] | None, desired: dict[str, Any], live: dict[str, Any],
                    kind: str | None = None) -> dict[str, Any]:
    return _merge(last_applied or {}, desired, live, (), kind)


def _merge(last: Any, desired: Any, live: Any, path: tuple[str, ...], kind: str | None) -> Any:
    if isinstance(desired, dict):
        last_map = last if isinstance(last, dict) else {}
        result = copy.deepcopy(live) if isinstance(live, dict) else {}
        for key in last_map:
            if key not in desired:
                result.pop(key, None)
        for key, value in desired.items():
            result[key] = _merge(last_map.get(key), value, result.get(key), path + (key,), kind)
        return result
    if isinstance(desired, list) and isinstance(live, list):
        key = _merge_key(path, kind)
        if key and all(isinstance(i, dict) and key in i for i in desired) and all(
                isinstance(i, dict) for i in live):
            last_items = {i.get(key): i for i in (last or []) if isinstance(i, dict)}
            wanted = {i[key]: i for i in desired}
            merged = []
            for item in live:
                ident = item.get(key)
                if ident in wanted:
                    merged.append(_merge(last_items.get(ident), wanted[ident], item, path, kind))
                elif ident not in last_items:
                    merged.append(copy.deepcopy(item))  # added by someone else: keep it
            present = {i.get(key) for i in live}
            merged.extend(copy.deepcopy(i) for i in desired if i[key] not in present)
            return merged
    return copy.deepcopy(desired)
