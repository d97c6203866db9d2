"""Results a shard keeps one of per app part (a component's rendering, a health verdict): each slot holds the
digest of the inputs its result was computed from, and the result.

A cache keyed by the inputs' digest alone keeps a dead entry for every version an app went through (each
rollout step, each update) until it is evicted, and a fixed-size one thrashes once a shard holds more live
entries than it has room for (a re-sync of thousands of apps then evaluates everything again). Here a new
digest replaces its slot's entry, so the cache holds what is live, and its bound only guards against slots of
apps long gone. Slots and digests are 16-byte digests; packed results are compressed JSON (kube/packing.py).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

from velashard.kube.packing import Packer


def digest(*parts: str) -> bytes:
    return hashlib.blake2b("\x00".join(parts).encode(), digest_size=16).digest()


class SlotCache:
    def __init__(self, maxsize: int, packed: bool = False):
        self.maxsize = maxsize
        self._entries: OrderedDict[bytes, tuple[bytes, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self._packer = Packer() if packed else None

    def get(self, slot: bytes, inputs: bytes) -> Any | None:
        """The result computed from `inputs` for `slot` (a private copy when packed), or None."""
        with self._lock:
            entry = self._entries.get(slot)
            if entry is None or entry[0] != inputs:
                return None
            self._entries.move_to_end(slot)
            value = entry[1]
        return self._packer.unpack(value) if self._packer is not None else value

    def put(self, slot: bytes, inputs: bytes, value: Any) -> None:
        stored = self._packer.pack(value) if self._packer is not None else value
        with self._lock:
            self._entries[slot] = (inputs, stored)
            self._entries.move_to_end(slot)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
