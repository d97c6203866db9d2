"""What a cache of managed resources keeps: everything apply, drift and health read, nothing else.

Apply updates a managed object by a three-way merge onto the cached one and a PUT, so metadata (labels,
annotations with our last-applied record, finalizers, owner references, resourceVersion) and every
field outside `status` stay whole: dropping one would let the PUT erase what another writer set. What
goes: managedFields and kubectl's last-applied annotation (never read), and from `status` everything
health does not read: condition timestamps, probe times and nested structures other than conditions.

These caches are packed (kube/packing.py): what is kept costs its compressed JSON, a few hundred bytes per
object (a Deployment of KubeVela's load-test app about 350), so dropping fields saves little memory but keeps
the packing dictionary and every decoded copy small. hack/bench_api_cost.py and hack/bench_kubevela_tiers.py
measure the growth per app on a shard.
"""

from __future__ import annotations

from typing import Any, Callable

from velashard.kube.informer import Obj, strip_unread_fields

_CONDITION_FIELDS = ("type", "status", "reason", "message")


def _trim_status(status: Any) -> Any:
    if not isinstance(status, dict):
        return status
    kept: dict[str, Any] = {}
    for key, value in status.items():
        if key == "conditions" and isinstance(value, list):
            kept[key] = [{k: c[k] for k in _CONDITION_FIELDS if k in c} if isinstance(c, dict) else c
                         for c in value]
        elif not isinstance(value, (dict, list)):
            kept[key] = value  # counters, phases, observedGeneration: what health policies read
    return kept


def for_managed_resources(obj: Obj) -> Obj:
    """The managed-resource informers' transform (see the module's docstring)."""
    obj = strip_unread_fields(obj)
    if "status" in obj:
        obj["status"] = _trim_status(obj["status"])
    return obj


def without(*paths: tuple[str, ...]) -> Callable[[Obj], Obj]:
    """A transform dropping the fields at `paths` (besides what no controller reads), for caches whose readers
    never look there: e.g. the copy of the app spec an ApplicationRevision records."""
    def transform(obj: Obj) -> Obj:
        obj = strip_unread_fields(obj)
        for path in paths:
            parent: Any = obj
            for key in path[:-1]:
                parent = parent.get(key) if isinstance(parent, dict) else None
            if isinstance(parent, dict):
                parent.pop(path[-1], None)
        return obj
    return transform
