"""Who owns a managed resource, and what applying our desired state onto it produces."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from velashard.apis import labels
from velashard.core.slotcache import SlotCache, digest
from velashard.patch import three_way_merge

LAST_APPLIED = labels.LAST_APPLIED

# Per app and managed object, the digest of the last (desired, live) pair found in sync (see `merged_if_drifted`).
_IN_SYNC = SlotCache()


def owner_of(obj: dict[str, Any]) -> tuple[str, str] | None:
    """(app namespace, app name) from a resource's labels, if an application manages it."""
    lbls = (obj.get("metadata") or {}).get("labels") or {}
    if labels.APP_NAME in lbls:
        return lbls.get(labels.APP_NAMESPACE, ""), lbls[labels.APP_NAME]
    return None


def conflicting_owner(live: dict[str, Any] | None, app_namespace: str, app_name: str) -> tuple[str, str] | None:
    owner = owner_of(live) if live is not None else None
    if owner is not None and owner != (app_namespace, app_name):
        return owner
    return None


def with_last_applied(desired: dict[str, Any]) -> dict[str, Any]:
    """`desired` carrying a record of itself, for the next three-way merge.

    The record leaves out the shard label: the master relabels a moved app's resources itself, and a
    record naming the old shard would make the new owner rewrite every resource it takes over."""
    record = json.dumps(_without_shard_label(desired), sort_keys=True, separators=(",", ":"))
    meta = dict(desired.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), LAST_APPLIED: record}
    return {**desired, "metadata": meta}


def _without_shard_label(obj: dict[str, Any]) -> dict[str, Any]:
    obj_labels = (obj.get("metadata") or {}).get("labels") or {}
    if labels.SCHEDULED_SHARD_ID not in obj_labels:
        return obj
    kept = {k: v for k, v in obj_labels.items() if k != labels.SCHEDULED_SHARD_ID}
    return {**obj, "metadata": {**obj["metadata"], "labels": kept}}


def merged_for_update(desired: dict[str, Any], live: dict[str, Any]) -> dict[str, Any]:
    """Three-way merge of desired onto live against what we applied last; fields set by others survive."""
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    try:
        last = json.loads(annotations[LAST_APPLIED]) if LAST_APPLIED in annotations else None
    except ValueError:
        last = None
    merged = three_way_merge(last, with_last_applied(desired), live, desired.get("kind"))
    merged["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
    return merged


def needs_update(merged: dict[str, Any], live: dict[str, Any]) -> bool:
    ignore = {"status"}
    return any(merged.get(k) != live.get(k) for k in (set(merged) | set(live)) - ignore)


def merged_if_drifted(desired: dict[str, Any], live: dict[str, Any], owner: str = "") -> dict[str, Any] | None:
    """`merged_for_update` when applying `desired` would change `live` (`needs_update`), else None.

    The answer is a pure function of the two objects (status aside, which no update writes), so a pair found in
    sync is remembered for the owning app (its key; its entries go with it: `forget`) by a digest of both: a
    re-sync of a settled app, or a restart with the snapshot of core/cachesnapshot.py, merges nothing (the merge
    was a fifth of such a reconcile)."""
    meta = desired.get("metadata") or {}
    slot = digest(str(desired.get("kind")), str(meta.get("namespace")), str(meta.get("name")))
    inputs = b""
    if owner:
        text = json.dumps(desired, separators=(",", ":"), default=str) + "\x00" + json.dumps(
            {k: v for k, v in live.items() if k != "status"}, separators=(",", ":"), default=str)
        inputs = hashlib.blake2b(text.encode(), digest_size=16).digest()
        if _IN_SYNC.get(owner, slot, inputs):
            return None
    merged = merged_for_update(desired, live)
    if needs_update(merged, live):
        return merged
    if owner:
        _IN_SYNC.put(owner, slot, inputs, True)
    return None


def in_sync() -> SlotCache:
    """The pairs found in sync (for core/cachesnapshot.py)."""
    return _IN_SYNC


def forget(key: str) -> None:
    """The app `key` (namespace/name) is gone from this process: so are its pairs."""
    _IN_SYNC.forget(key)


def dependent_labels(app: dict[str, Any]) -> dict[str, str]:
    """Labels for the app's revisions and trackers: its name, namespace and shard."""
    out = {labels.APP_NAME: app["metadata"]["name"], labels.APP_NAMESPACE: app["metadata"]["namespace"]}
    shard = (app["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID)
    if shard:
        out[labels.SCHEDULED_SHARD_ID] = shard
    return out
