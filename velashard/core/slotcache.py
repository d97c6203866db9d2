"""Results a shard keeps one of per app part (a component's rendering, a health verdict): each slot holds the
digest of the inputs its result was computed from, and the result. Slots belong to an owner, the app.

A cache keyed by the inputs' digest alone keeps a dead entry for every version an app went through (each
rollout step, each update) until it is evicted, and a fixed-size one thrashes once a shard holds more live
entries than it has room for (a re-sync of thousands of apps then evaluates everything again: with 65,536
slots, a shard of 40,000 load-test apps had 80,000 renderings to keep). Here a new digest replaces its slot's
entry, so the cache holds what is live, and an app that leaves the process (deleted or moved) takes its slots
along (`forget`); the bound, in owners, is far above any shard's app count and only guards against an owner
never forgotten. Slots and digests are 16-byte digests; packed results are compressed JSON (kube/packing.py).

Slots restored from a snapshot (core/cachesnapshot.py, a restarted process's) are held apart until their owner
is asked for, and dropped together once the process has had time to ask for each app it still holds
(`drop_restored`): the apps that left meanwhile take nothing along.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any, Iterable

from velashard.kube.packing import Packer

MAX_OWNERS = 1 << 20

Entry = tuple[str, bytes, bytes, Any]  # owner, slot, inputs, the stored result (packed bytes when packed)


def digest(*parts: str) -> bytes:
    return hashlib.blake2b("\x00".join(parts).encode(), digest_size=16).digest()


class SlotCache:
    def __init__(self, maxsize: int = MAX_OWNERS, packed: bool = False):
        self.maxsize = maxsize  # owners
        self._owners: OrderedDict[str, dict[bytes, tuple[bytes, Any]]] = OrderedDict()
        self._restored: dict[str, dict[bytes, tuple[bytes, Any]]] = {}
        self._lock = threading.Lock()
        self._packer = Packer() if packed else None
        self.changes = 0  # counts puts and forgets, so that a snapshot is written only when something changed

    @property
    def packed(self) -> bool:
        return self._packer is not None

    def _claim(self, owner: str) -> dict[bytes, tuple[bytes, Any]] | None:
        """The owner's live slots, with what a snapshot restored of it moved in (under the lock)."""
        slots = self._owners.get(owner)
        restored = self._restored.pop(owner, None) if self._restored else None
        if restored:
            if slots is None:
                slots = self._owners[owner] = {}
            for slot, entry in restored.items():
                slots.setdefault(slot, entry)
        return slots

    def get(self, owner: str, slot: bytes, inputs: bytes) -> Any | None:
        """The result computed from `inputs` for `owner`'s `slot` (a private copy when packed), or None."""
        with self._lock:
            entry = (self._claim(owner) or {}).get(slot)
            if entry is None or entry[0] != inputs:
                return None
            self._owners.move_to_end(owner)
            value = entry[1]
        return self._packer.unpack(value) if self._packer is not None else value

    def put(self, owner: str, slot: bytes, inputs: bytes, value: Any) -> None:
        stored = self._packer.pack(value) if self._packer is not None else value
        with self._lock:
            slots = self._claim(owner)
            if slots is None:
                slots = self._owners[owner] = {}
            slots[slot] = (inputs, stored)
            self._owners.move_to_end(owner)
            while len(self._owners) > self.maxsize:
                self._owners.popitem(last=False)
            self.changes += 1

    def forget(self, owner: str) -> None:
        """The owner is gone from this process: so are its slots."""
        with self._lock:
            self._owners.pop(owner, None)
            self._restored.pop(owner, None)
            self.changes += 1

    def entries(self) -> tuple[bytes | None, list[Entry]]:
        """For a snapshot: the packer's dictionary (None when not packed or nothing was packed yet) and every slot,
        live or restored and not yet asked for."""
        with self._lock:
            found = [(owner, slot, inputs, value) for owners in (self._restored, self._owners)
                     for owner, slots in owners.items() for slot, (inputs, value) in slots.items()]
            dictionary = self._packer.dictionary if self._packer is not None else None
        return dictionary, found

    def restore(self, dictionary: bytes | None, entries: Iterable[Entry]) -> int:
        """Take a snapshot's slots (see `entries`), held apart until their owner is asked for; a slot the process
        has already computed stays as it is. Packed results are kept as they are when this cache's packer can take
        the snapshot's dictionary (at start, before anything is packed), else packed again. Returns the count."""
        transcode = None
        if self._packer is not None:
            if dictionary is None:
                return 0
            if not self._packer.adopt(dictionary):
                theirs = Packer()
                theirs.adopt(dictionary)
                transcode = theirs
        count = 0
        with self._lock:
            for owner, slot, inputs, value in entries:
                if owner in self._owners:
                    continue
                if transcode is not None and self._packer is not None:
                    value = self._packer.pack(transcode.unpack(value))
                self._restored.setdefault(owner, {})[slot] = (inputs, value)
                count += 1
        return count

    def drop_restored(self) -> int:
        """Forget what a snapshot restored and no one asked for (apps that left this process meanwhile)."""
        with self._lock:
            dropped = sum(len(slots) for slots in self._restored.values())
            self._restored = {}
            return dropped

    def __contains__(self, owner: str) -> bool:
        with self._lock:
            return owner in self._owners or owner in self._restored

    def __len__(self) -> int:
        """Slots held."""
        with self._lock:
            return sum(len(slots) for owners in (self._owners, self._restored) for slots in owners.values())
