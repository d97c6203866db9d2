"""Shard discovery: which shards may get apps, and which shards' apps may move (sharding/membership.py).

The master follows the shard pods and the shard Leases in its namespace with two informers and applies
the membership rule to them on every change and whenever asked (lease expiry is a matter of time).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Iterable

from velashard.apis import labels
from velashard.kube.informer import EventHandler
from velashard.kube.manager import Manager
from velashard.kube.resources import LEASES, PODS
from velashard.observability import SHARDS_AVAILABLE, fields
from velashard.sharding.loads import LEASE_LABEL, parse_loads
from velashard.sharding.membership import (AVAILABLE, DEAD, RESTARTING, SUSPECT, LeaseSeen, Member, membership,
                                          observe, pod_ready)

log = logging.getLogger("velashard.sharding.discovery")

POD_SELECTOR = f"{labels.POD_NAME_LABEL}={labels.POD_NAME_VALUE},{labels.SHARD_ID}"

__all__ = ["POD_SELECTOR", "ShardDiscovery", "pod_ready", "ready_pods_by_shard", "schedulable"]


def ready_pods_by_shard(pods: Iterable[dict[str, Any]]) -> dict[str, int]:
    """shard id -> number of Ready pods (shards with none are listed with 0)."""
    counts: dict[str, int] = {}
    for pod in pods:
        shard = ((pod.get("metadata") or {}).get("labels") or {}).get(labels.SHARD_ID)
        if shard:
            counts[shard] = counts.get(shard, 0) + (1 if pod_ready(pod) else 0)
    return counts


def schedulable(counts: dict[str, int], static: list[str] | None) -> list[str]:
    """Shards with a Ready pod (or the static list if given), never the master: the webhook's view."""
    if static is not None:
        return sorted(set(static))
    return sorted(s for s, n in counts.items() if n > 0 and s != labels.MASTER_SHARD_ID)


def available_shards(members: dict[str, Member]) -> list[str]:
    return sorted(s for s, m in members.items() if m.status == AVAILABLE and s != labels.MASTER_SHARD_ID)


class ShardDiscovery:
    def __init__(self, manager: Manager, namespace: str, static: list[str] | None = None,
                 resync_period: float = 300.0):
        self.namespace = namespace
        self.static = static
        self._lock = threading.Lock()
        self._available: list[str] = schedulable({}, static)
        self._listeners: list[Callable[[list[str]], None]] = []
        self._member_listeners: list[Callable[[], None]] = []
        self._statuses: dict[str, tuple[str, bool]] = {}
        self._seen: dict[str, LeaseSeen] = {}
        self._last_available: dict[str, float] = {}
        self.informer = None
        # The shard Leases carry the load reports, and with the pods they make membership.
        self.leases = manager.informer(LEASES, namespace, label_selector=LEASE_LABEL)
        if static is None:
            refresh = EventHandler(lambda _o: self.refresh(), lambda _o, _n: self.refresh(),
                                   lambda _o: self.refresh())
            self.informer = manager.informer(PODS, namespace, label_selector=POD_SELECTOR,
                                             resync_period=resync_period)
            self.informer.add_handler(refresh)
            self.leases.add_handler(refresh)
        SHARDS_AVAILABLE.set(len(self._available))

    def available(self) -> list[str]:
        with self._lock:
            return list(self._available)

    def members(self, now: float | None = None) -> dict[str, Member]:
        """Every shard's membership now (empty with a static list: its shards are taken as available)."""
        if self.informer is None:
            return {}
        now = time.monotonic() if now is None else now
        leases = self.leases.store.list()
        with self._lock:
            self._seen = observe(self._seen, leases, now)
            seen = dict(self._seen)
        return membership(self.informer.store.list(), leases, seen, now)

    def last_available(self) -> dict[str, float]:
        """shard id -> when (monotonic) a refresh last found it available: every pod and lease event refreshes, so
        a shard back only for a moment is seen back."""
        with self._lock:
            return dict(self._last_available)

    def loads(self) -> dict[str, int]:
        """shard id -> the app count it last published, from the cached Leases."""
        return parse_loads(self.leases.store.list())

    def on_change(self, listener: Callable[[list[str]], None]) -> None:
        """Told the available shards whenever they change."""
        self._listeners.append(listener)

    def on_members_change(self, listener: Callable[[], None]) -> None:
        """Told whenever a shard's status or lease expiry changes (a lease released, a pod gone), also among
        shards that stay unavailable: what decides when their apps may move."""
        self._member_listeners.append(listener)

    def refresh(self) -> dict[str, Member]:
        """Recompute; tell listeners if the available shards changed. Returns the members."""
        if self.informer is None:
            return {}
        seen_at = time.monotonic()
        members = self.members(seen_at)
        now = available_shards(members)
        statuses = {shard: (m.status, m.lease_expired) for shard, m in members.items()}
        with self._lock:
            for shard in now:
                self._last_available[shard] = max(seen_at, self._last_available.get(shard, seen_at))
            changed = now != self._available
            self._available = now
            members_changed = statuses != self._statuses
            self._statuses = statuses
        if members_changed:
            for member_listener in self._member_listeners:
                member_listener()
        if changed:
            SHARDS_AVAILABLE.set(len(now))
            log.info("available shards changed", extra=fields(
                shards=",".join(now) or "-",
                **{status: ",".join(sorted(s for s, m in members.items() if m.status == status)) or "-"
                   for status in (RESTARTING, SUSPECT, DEAD)}))
            for listener in self._listeners:
                listener(now)
        return members
