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

import sys
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


_SHORT = 64


def _share_short_strings(value: Any) -> Any:
    """Intern short string values: a workload's defaulted fields (policies, paths, protocols, images) repeat
    across every object of its kind, and each decoded copy would otherwise cost its own string."""
    if isinstance(value, dict):
        for key, item in value.items():
            value[key] = sys.intern(item) if isinstance(item, str) and len(item) <= _SHORT \
                else _share_short_strings(item)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            value[i] = sys.intern(item) if isinstance(item, str) and len(item) <= _SHORT \
                else _share_short_strings(item)
    return value


def for_managed_resources(obj: Obj) -> Obj:
    """The managed-resource informers' transform (see the module's memory budget)."""
    obj = strip_unread_fields(obj)
    if "status" in obj:
        obj["status"] = _trim_status(obj["status"])
    return _share_short_strings(obj)


def compact(obj: Obj) -> Obj:
    """For caches that keep whole objects (applications, trackers): what no controller reads goes, and short
    strings (label keys, kinds, API versions, phases, step types) are shared across the thousands of copies."""
    return _share_short_strings(strip_unread_fields(obj))


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
        return _share_short_strings(obj)
    return transform
