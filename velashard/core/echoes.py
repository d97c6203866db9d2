"""The events of our own writes: a managed resource's watch event that carries the very version this process
just wrote tells its app nothing new (the reconcile that wrote it saw what it wrote), so it does not wake the
app. Without this, every reconcile that applies something is followed by one that finds nothing to do."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

Key = tuple[str, str, str, str]  # group, kind, namespace, name


def _key(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    group = (obj.get("apiVersion") or "").rpartition("/")[0]
    return group, obj.get("kind") or "", meta.get("namespace") or "", meta.get("name") or ""


class OwnWrites:
    """The resourceVersion of each object this process wrote last, until its watch event arrives."""

    def __init__(self, limit: int = 10_000):
        self._versions: OrderedDict[Key, str] = OrderedDict()
        self._lock = threading.Lock()
        self._limit = limit  # echoes that never come (an informer relisted meanwhile) must not pile up

    def wrote(self, obj: dict[str, Any]) -> None:
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if not rv:
            return
        with self._lock:
            self._versions[_key(obj)] = rv
            self._versions.move_to_end(_key(obj))
            while len(self._versions) > self._limit:
                self._versions.popitem(last=False)

    def is_echo(self, obj: dict[str, Any]) -> bool:
        """Whether `obj` is the version we wrote last (forgotten then: a later event is someone else's)."""
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        key = _key(obj)
        with self._lock:
            if rv is None or self._versions.get(key) != rv:
                return False
            del self._versions[key]
            return True
