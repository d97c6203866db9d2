"""Three-way merge for an apply-style controller, after kubectl's client-side apply.

kubectl apply computes a strategic merge patch from (last-applied, desired, live) and the server
applies it to live. This does the same in one process: `three_way_patch` builds the patch kubectl
would send (desired's fields; a null for every field that was in last-applied and is no longer
desired; `$patch: delete` for keyed list items that left desired; `$deleteFromPrimitiveList` for
set members that left; `$setElementOrder` so keyed lists follow desired's order) and
`strategic_merge_patch` applies it. So fields in desired win, fields this controller applied
before and no longer wants are removed, and fields others set (never in last-applied) survive,
including items of keyed lists such as an injected sidecar container. Unlike kubectl it sends all
of desired rather than only what differs from live, which yields the same object.
"""

from __future__ import annotations

from typing import Any

from velashard.patch.strategic_merge import list_strategy, strategic_merge_patch


def three_way_merge(last_applied: dict[str, Any] | None, desired: dict[str, Any], live: dict[str, Any],
                    kind: str | None = None) -> dict[str, Any]:
    """The object an apply of `desired` should leave, given what was applied before and what is live."""
    patch = three_way_patch(last_applied, desired, kind)
    return strategic_merge_patch(live if isinstance(live, dict) else {}, patch, kind)


def three_way_patch(last_applied: dict[str, Any] | None, desired: dict[str, Any],
                    kind: str | None = None) -> dict[str, Any]:
    """The strategic merge patch that applies `desired` over whatever `last_applied` set."""
    return _patch_map(last_applied if isinstance(last_applied, dict) else {}, desired, (), kind)


def _patch_map(last: dict[str, Any], desired: dict[str, Any], path: tuple[str, ...],
               kind: str | None) -> dict[str, Any]:
    patch: dict[str, Any] = {key: None for key in last if key not in desired}
    for key, value in desired.items():
        previous = last.get(key)
        if isinstance(value, dict):
            patch[key] = _patch_map(previous if isinstance(previous, dict) else {}, value, path + (key,), kind)
        elif isinstance(value, list):
            _patch_list(patch, key, previous if isinstance(previous, list) else [], value, path + (key,), kind)
        else:
            patch[key] = value
    return patch


def _patch_list(patch: dict[str, Any], key: str, last: list[Any], desired: list[Any], path: tuple[str, ...],
                kind: str | None) -> None:
    strategy = list_strategy(path, kind)
    if strategy == "set" and not any(isinstance(v, (dict, list)) for v in desired):
        patch[key] = list(desired)
        removed = [v for v in last if v not in desired]
        if removed:
            patch[f"$deleteFromPrimitiveList/{key}"] = removed
        patch[f"$setElementOrder/{key}"] = list(desired)
    elif strategy not in (None, "set") and all(isinstance(i, dict) and strategy in i for i in desired):
        before = {i[strategy]: i for i in last if isinstance(i, dict) and strategy in i}
        wanted = {i[strategy] for i in desired}
        patch[key] = [_patch_map(before.get(i[strategy], {}), i, path, kind) for i in desired]
        patch[key] += [{strategy: k, "$patch": "delete"} for k in before if k not in wanted]
        patch[f"$setElementOrder/{key}"] = [{strategy: i[strategy]} for i in desired]
    else:
        # Atomic lists, and keyed lists whose items lack their key: desired replaces the live list.
        patch[key] = list(desired) + ([{"$patch": "replace"}] if strategy is not None else [])
