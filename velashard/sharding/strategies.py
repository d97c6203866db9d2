"""Scheduling strategies: which available shard an application goes to. Pure, deterministic given inputs."""

from __future__ import annotations

import bisect
import hashlib
import random
import threading
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


class Scheduler:
    """Picks a shard for an app; keeps the little state round-robin needs."""

    def __init__(self, strategy: str = "round-robin", seed: int | None = None):
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
        self.strategy = strategy
        self._lock = threading.Lock()
        self._next = 0
        self._random = random.Random(seed)
        self._ring: tuple[tuple[str, ...], Ring] | None = None

    def pick(self, app: Mapping[str, Any], available: Sequence[str], loads: Mapping[str, int] | None = None,
             pinned: str | None = None) -> str | None:
        """The shard for `app`, or None when no shard is available. A namespace pin wins while its shard is up."""
        shards = sorted(set(available))
        if not shards:
            return None
        if pinned and pinned in shards:
            return pinned
        if self.strategy == "consistent-hash":
            return self._ring_for(shards).lookup(app_identity(app))
        with self._lock:
            if self.strategy == "random":
                return self._random.choice(shards)
            if self.strategy == "least-loaded":
                counts = dict(loads or {})
                choice = min(shards, key=lambda s: (counts.get(s, 0), s))
                if loads is not None:
                    # Count the choice at once, so a burst of apps spreads before loads are republished.
                    loads[choice] = counts.get(choice, 0) + 1  # type: ignore[index]
                return choice
            choice = shards[self._next % len(shards)]
            self._next += 1
            return choice

    def _ring_for(self, shards: list[str]) -> Ring:
        key = tuple(shards)
        if self._ring is None or self._ring[0] != key:
            self._ring = (key, Ring(shards))
        return self._ring[1]


def pinned_shard(namespace: Mapping[str, Any] | None) -> str | None:
    """A namespace labelled with a shard id sends its apps there (tenant isolation)."""
    return ((namespace or {}).get("metadata", {}).get("labels") or {}).get(labels.SHARD_ID)
