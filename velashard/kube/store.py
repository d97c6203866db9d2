"""A thread-safe object cache keyed by namespace/name, with secondary indexes.

A packed store (caches whose size grows with apps) keeps each object compressed (kube/packing.py) and hands
out a new decoded copy on every read; a plain one keeps and hands out the objects themselves, which readers
must not modify.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Iterable, Iterator, Mapping

from velashard.kube.packing import Packer

IndexFunc = Callable[[dict[str, Any]], list[str]]


def object_key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f'{meta["namespace"]}/{meta["name"]}' if meta.get("namespace") else meta["name"]


@functools.cache  # one function per label key, so two users of a shared informer ask for the same index
def label_index(key: str) -> IndexFunc:
    """Index objects by the value of one label, e.g. app.oam.dev/name."""
    def index(obj: dict[str, Any]) -> list[str]:
        value = (obj["metadata"].get("labels") or {}).get(key)
        return [value] if value is not None else []
    return index


def _index_into(indices: dict[str, dict[str, set[str]]], indexers: dict[str, IndexFunc], key: str,
                obj: dict[str, Any]) -> None:
    for name, func in indexers.items():
        for value in func(obj):
            indices[name].setdefault(value, set()).add(key)


_UNKNOWN = 255  # a version prefix too long to keep: read from the object itself


def _versioned(version: str, packed: bytes) -> bytes:
    """A packed entry: its object's resourceVersion (a length byte, then the version) before the packed object,
    so that the version is read without decoding the object (core/settled.py compares versions of thousands)."""
    raw = version.encode()
    return (bytes((len(raw),)) + raw if len(raw) < _UNKNOWN else bytes((_UNKNOWN,))) + packed


def _packed_part(entry: bytes) -> memoryview:
    size = entry[0]
    return memoryview(entry)[1 + (0 if size == _UNKNOWN else size):]


class _Unpacked(Mapping[str, dict[str, Any]]):
    """A packed store's former content, each object decoded when it is read."""

    def __init__(self, entries: dict[str, bytes], packer: Packer):
        self._entries, self._packer = entries, packer

    def __getitem__(self, key: str) -> dict[str, Any]:
        return self._packer.unpack(_packed_part(self._entries[key]))

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


class Store:
    def __init__(self, indexers: dict[str, IndexFunc] | None = None, packed: bool = False):
        self._lock = threading.RLock()
        self._items: dict[str, Any] = {}  # key -> the object, or its packed form
        self._indexers = dict(indexers or {})
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}
        self._packer = Packer() if packed else None

    @property
    def packed(self) -> bool:
        """Whether reads return private copies (a caller may modify them)."""
        return self._packer is not None

    def _in(self, obj: dict[str, Any]) -> Any:
        if self._packer is None:
            return obj
        return _versioned(str(obj["metadata"].get("resourceVersion") or ""), self._packer.pack(obj))

    def _out(self, entry: Any) -> dict[str, Any]:
        return entry if self._packer is None else self._packer.unpack(_packed_part(entry))

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
                for key, entry in self._items.items():
                    for value in func(self._out(entry)):
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
        _index_into(self._indices, self._indexers, key, obj)

    def upsert(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """Store `obj`; returns the previous version, if any."""
        key = object_key(obj)
        entry = self._in(obj)
        with self._lock:
            old = self._items.get(key)
            if old is not None:
                old = self._out(old)
                self._unindex(key, old)
            self._items[key] = entry
            self._index(key, obj)
            return old

    def remove(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        key = object_key(obj)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                old = self._out(old)
                self._unindex(key, old)
            return old

    def replace(self, objects: Iterable[dict[str, Any]]) -> Mapping[str, dict[str, Any]]:
        """Replace the whole content (after a relist); returns the previous content by key.

        `objects` may be a generator reading pages from the API server: the new content is built outside the
        lock (readers see the old content until it is complete) and a packed store packs each object as it
        comes, so a list of 40,000 apps never holds them all decoded. The previous content is decoded one
        object at a time, when asked for.
        """
        with self._lock:
            indexers = dict(self._indexers)
        items: dict[str, Any] = {}
        indices: dict[str, dict[str, set[str]]] = {name: {} for name in indexers}
        for obj in objects:
            key = object_key(obj)
            items[key] = self._in(obj)
            _index_into(indices, indexers, key, obj)
        with self._lock:
            for name, func in self._indexers.items():  # an index added while the list ran
                if name not in indices:
                    indices[name] = {}
                    for key, entry in items.items():
                        _index_into(indices, {name: func}, key, self._out(entry))
            previous, self._items, self._indices = self._items, items, indices
        return previous if self._packer is None else _Unpacked(previous, self._packer)

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            entry = self._items.get(key)
        return None if entry is None else self._out(entry)

    def version(self, key: str) -> str | None:
        """The cached object's resourceVersion ("" if it has none), None when absent; a packed store reads it
        without decoding the object."""
        with self._lock:
            entry = self._items.get(key)
        if entry is None:
            return None
        if self._packer is not None and entry[0] != _UNKNOWN:
            return bytes(entry[1:1 + entry[0]]).decode()
        return str(self._out(entry)["metadata"].get("resourceVersion") or "")

    def version_by(self, namespace: str | None, name: str) -> str | None:
        return self.version(f"{namespace}/{name}" if namespace else name)

    def __contains__(self, key: str) -> bool:
        with self._lock:
            return key in self._items

    def get_by(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.get(f"{namespace}/{name}" if namespace else name)

    def list(self) -> list[dict[str, Any]]:
        with self._lock:
            entries = list(self._items.values())
        return entries if self._packer is None else [self._out(e) for e in entries]

    def each(self) -> Iterator[dict[str, Any]]:
        """Every object, decoded one at a time (a packed store never holds them all decoded at once)."""
        with self._lock:
            entries = list(self._items.values())
        return iter(entries) if self._packer is None else map(self._out, entries)

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._items)

    def by_index(self, index: str, value: str) -> list[dict[str, Any]]:
        with self._lock:
            if index not in self._indices:
                raise KeyError(f"no indexer named {index!r}")
            entries = [self._items[k] for k in sorted(self._indices[index].get(value, ()))]
        return entries if self._packer is None else [self._out(e) for e in entries]

    def indexed(self, index: str, value: str, key: str) -> bool:
        """Whether the object at `key` is indexed under `value` (no object decoded)."""
        with self._lock:
            return key in self._indices[index].get(value, ())

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
