"""Shard discovery: a shard id is available while one of its controller pods is Ready."""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Iterable

from velashard.apis import labels
from velashard.kube.informer import EventHandler
from velashard.kube.manager import Manager
from velashard.kube.resources import PODS
from velashard.observability import SHARDS_AVAILABLE, fields

log = logging.getLogger("velashard.sharding.discovery")

POD_SELECTOR = f"{labels.POD_NAME_LABEL}={labels.POD_NAME_VALUE},{labels.SHARD_ID}"


def pod_ready(pod: dict[str, Any]) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def ready_pods_by_shard(pods: Iterable[dict[str, Any]]) -> dict[str, int]:
    """shard id -> number of Ready pods (shards with none are listed with 0)."""
    counts: dict[str, int] = {}
    for pod in pods:
        shard = ((pod.get("metadata") or {}).get("labels") or {}).get(labels.SHARD_ID)
        if shard:
            counts[shard] = counts.get(shard, 0) + (1 if pod_ready(pod) else 0)
    return counts


def schedulable(counts: dict[str, int], static: list[str] | None) -> list[str]:
    """Available shards: the static list if given, else discovered shards with a Ready pod, never the master."""
    if static is not None:
        return sorted(set(static))
    return sorted(s for s, n in counts.items() if n > 0 and s != labels.MASTER_SHARD_ID)


class ShardDiscovery:
    def __init__(self, manager: Manager, namespace: str, static: list[str] | None = None,
                 resync_period: float = 300.0):
        self.namespace = namespace
        self.static = static
        self._lock = threading.Lock()
        self._available: list[str] = schedulable({}, static)
        self._listeners: list[Callable[[list[str]], None]] = []
        self.informer = None
        if static is None:
            self.informer = manager.informer(PODS, namespace, label_selector=POD_SELECTOR,
                                             resync_period=resync_period)
            self.informer.add_handler(EventHandler(lambda _o: self._refresh(), lambda _o, _n: self._refresh(),
                                                   lambda _o: self._refresh()))
        SHARDS_AVAILABLE.set(len(self._available))

    def available(self) -> list[str]:
        with self._lock:
            return list(self._available)

    def on_change(self, listener: Callable[[list[str]], None]) -> None:
        self._listeners.append(listener)

    def _refresh(self) -> None:
        assert self.informer is not None
        now = schedulable(ready_pods_by_shard(self.informer.store.list()), None)
        with self._lock:
            changed = now != self._available
            self._available = now
        if changed:
            SHARDS_AVAILABLE.set(len(now))
            log.info("available shards changed", extra=fields(shards=",".join(now) or "-"))
            for listener in self._listeners:
                listener(now)
