"""What a cache of managed resources keeps: everything apply, drift and health read, nothing else.

Apply updates a managed object by a three-way merge onto the cached one and a PUT, so metadata (labels,
annotations with our last-applied record, finalizers, owner references, resourceVersion) and every
field outside `status` stay whole: dropping one would let the PUT erase what another writer set. What
goes: managedFields and kubectl's last-applied annotation (never read), and from `status` everything
health does not read: condition timestamps, probe times and nested structures other than conditions.

Memory budget, per cached object (CPython, after string interning in the informer): about 2 KiB of
fixed overhead plus roughly 5x the JSON size of what is kept. A webservice component's Deployment
(one container, one port, our last-applied record) keeps about 2 KiB of JSON, so about 12 KiB; its
Service about 6 KiB. hack/bench_api_cost.py measures the growth per app on a shard (goal <= 20 KiB
for the app, its revision, its tracker and its managed resources).
"""

from __future__ import annotations

from typing import Any

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
    """The managed-resource informers' transform (see the module's memory budget)."""
    obj = strip_unread_fields(obj)
    if "status" in obj:
        obj["status"] = _trim_status(obj["status"])
    return obj
