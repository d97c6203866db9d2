"""Results a shard keeps one of per app part (a component's rendering, a health verdict): each slot holds the
digest of the inputs its result was computed from, and the result. Slots belong to an owner, the app.

A cache keyed by the inputs' digest alone keeps a dead entry for every version an app went through (each
rollout step, each update) until it is evicted, and a fixed-size one thrashes once a shard holds more live
entries than it has room for (a re-sync of thousands of apps then evaluates everything again: with 65,536
slots, a shard of 40,000 load-test apps had 80,000 renderings to keep). Here a new digest replaces its slot's
entry, so the cache holds what is live, and an app that leaves the process (deleted or moved) takes its slots
along (`forget`); the bound, in owners, is far above any shard's app count and only guards against an owner
never forgotten. Slots and digests are 16-byte digests; packed results are compressed JSON (kube/packing.py).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

from velashard.kube.packing import Packer

MAX_OWNERS = 1 << 20


def digest(*parts: str) -> bytes:
    return hashlib.blake2b("\x00".join(parts).encode(), digest_size=16).digest()


class SlotCache:
    def __init__(self, maxsize: int = MAX_OWNERS, packed: bool = False):
        self.maxsize = maxsize  # owners
        self._owners: OrderedDict[str, dict[bytes, tuple[bytes, Any]]] = OrderedDict()
        self._lock = threading.Lock()
        self._packer = Packer() if packed else None

    def get(self, owner: str, slot: bytes, inputs: bytes) -> Any | None:
        """The result computed from `inputs` for `owner`'s `slot` (a private copy when packed), or None."""
        with self._lock:
            entry = (self._owners.get(owner) or {}).get(slot)
            if entry is None or entry[0] != inputs:
                return None
            self._owners.move_to_end(owner)
            value = entry[1]
        return self._packer.unpack(value) if self._packer is not None else value

    def put(self, owner: str, slot: bytes, inputs: bytes, value: Any) -> None:
        stored = self._packer.pack(value) if self._packer is not None else value
        with self._lock:
            slots = self._owners.get(owner)
            if slots is None:
                slots = self._owners[owner] = {}
            slots[slot] = (inputs, stored)
            self._owners.move_to_end(owner)
            while len(self._owners) > self.maxsize:
                self._owners.popitem(last=False)

    def forget(self, owner: str) -> None:
        """The owner is gone from this process: so are its slots."""
        with self._lock:
            self._owners.pop(owner, None)

    def __contains__(self, owner: str) -> bool:
        with self._lock:
            return owner in self._owners

    def __len__(self) -> int:
        """Slots held."""
        with self._lock:
            return sum(len(slots) for slots in self._owners.values())
