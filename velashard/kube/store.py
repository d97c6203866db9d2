"""A thread-safe object cache keyed by namespace/name, with secondary indexes."""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Iterable

IndexFunc = Callable[[dict[str, Any]], list[str]]


def object_key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f'{meta["namespace"]}/{meta["name"]}' if meta.get("namespace") else meta["name"]


def namespace_index(obj: dict[str, Any]) -> list[str]:
    return [obj["metadata"].get("namespace") or ""]


@functools.cache  # one function per label key, so two users of a shared informer ask for the same index
def label_index(key: str) -> IndexFunc:
    """Index objects by the value of one label, e.g. app.oam.dev/name."""
    def index(obj: dict[str, Any]) -> list[str]:
        value = (obj["metadata"].get("labels") or {}).get(key)
        return [value] if value is not None else []
    return index


class Store:
    def __init__(self, indexers: dict[str, IndexFunc] | None = None):
        self._lock = threading.RLock()
        self._items: dict[str, dict[str, Any]] = {}
        self._indexers = dict(indexers or {})
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}

    def add_indexers(self, indexers: dict[str, IndexFunc]) -> None:
        """Add indexes (e.g. a second user of a shared informer needs one more); existing objects are indexed."""
        with self._lock:
            for name, func in indexers.items():
                if name in self._indexers:
                    if self._indexers[name] is not func:
                        raise ValueError(f"indexer {name!r} is already defined differently")
                    continue
                self._indexers[name] = func
                self._indices[name] = {}
                for key, obj in self._items.items():
                    for value in func(obj):
                        self._indices[name].setdefault(value, set()).add(key)

    def _unindex(self, key: str, obj: dict[str, Any]) -> None:
        for name, func in self._indexers.items():
            for value in func(obj):
                keys = self._indices[name].get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._indices[name][value]

    def _index(self, key: str, obj: dict[str, Any]) -> None:
        for name, func in self._indexers.items():
            for value in func(obj):
                self._indices[name].setdefault(value, set()).add(key)

    def upsert(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """Store `obj`; returns the previous version, if any."""
        key = object_key(obj)
        with self._lock:
            old = self._items.get(key)
            if old is not None:
                self._unindex(key, old)
            self._items[key] = obj
            self._index(key, obj)
            return old

    def remove(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        key = object_key(obj)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._unindex(key, old)
            return old

    def replace(self, objects: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Replace the whole content (after a relist); returns the previous content by key."""
        with self._lock:
            previous = self._items
            self._items = {}
            self._indices = {name: {} for name in self._indexers}
            for obj in objects:
                key = object_key(obj)
                self._items[key] = obj
                self._index(key, obj)
            return previous

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            return self._items.get(key)

    def get_by(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.get(f"{namespace}/{name}" if namespace else name)

    def list(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._items.values())

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._items)

    def by_index(self, index: str, value: str) -> list[dict[str, Any]]:
        with self._lock:
            if index not in self._indices:
                raise KeyError(f"no indexer named {index!r}")
            return [self._items[k] for k in sorted(self._indices[index].get(value, ()))]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
