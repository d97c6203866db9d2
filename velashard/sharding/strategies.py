"""The strategies' building blocks: their names, what consistent hashing hashes, the ring, namespace pins.

The decision itself is `sharding.placement.place`."""

from __future__ import annotations

import bisect
import hashlib
from typing import Any, Mapping, Sequence

from velashard.apis import labels

STRATEGIES = ("round-robin", "random", "consistent-hash", "least-loaded")


def app_identity(app: Mapping[str, Any]) -> str:
    """What consistent hashing hashes: apiVersion, kind, namespace and name."""
    meta = app.get("metadata") or {}
    return f'{app.get("apiVersion", "core.oam.dev/v1beta1")}/{app.get("kind", "Application")}/' \
           f'{meta.get("namespace", "")}/{meta.get("name", "")}'


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


class Ring:
    """A consistent-hash ring with virtual nodes, built from the shard ids alone (replicas agree)."""

    def __init__(self, shards: Sequence[str], vnodes: int = 200):
        points = sorted((_hash(f"{shard}#{i}"), shard) for shard in set(shards) for i in range(vnodes))
        self._keys = [p for p, _ in points]
        self._owners = [s for _, s in points]

    def lookup(self, key: str) -> str | None:
        if not self._keys:
            return None
        idx = bisect.bisect(self._keys, _hash(key)) % len(self._keys)
        return self._owners[idx]


def pinned_shard(namespace: Mapping[str, Any] | None) -> str | None:
    """A namespace labelled with a shard id sends its apps there (tenant isolation)."""
    return ((namespace or {}).get("metadata", {}).get("labels") or {}).get(labels.SHARD_ID)
