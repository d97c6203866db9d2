"""Per-shard application metrics (KubeVela users ask for per-app phase metrics, kubevela #6857; Argo CD users
for app metrics across shards): how many of a shard's apps are in each phase, and how many have not converged
for longer than a threshold. Kept from the app informer's events (no request, no pass over the cache per
scrape) and counted when /metrics is read; no label per app, so the series stay few."""

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Any, Callable, Iterator

from prometheus_client.core import GaugeMetricFamily

from velashard.core.status import SETTLED_PHASES
from velashard.observability import REGISTRY


def unconverged_since(app: dict[str, Any]) -> float | None:
    """Since when (epoch seconds) the app has not converged: its phase is not settled or a component is
    unhealthy, since the earliest of its False conditions (else since it was created); None when it has."""
    status = app.get("status") or {}
    healthy = all(s.get("healthy") for s in status.get("services") or [])
    if status.get("status") in SETTLED_PHASES and healthy:
        return None
    stamps = [c.get("lastTransitionTime") for c in status.get("conditions") or []
              if isinstance(c, dict) and c.get("status") == "False" and c.get("lastTransitionTime")]
    stamp = min(stamps) if stamps else (app.get("metadata") or {}).get("creationTimestamp")
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()


class PhaseBook:
    """(shard, app key) -> phase, with the counts per (shard, phase) kept as apps change and the apps not converged
    apart: a scrape costs the phases and the unconverged apps, not a walk over every app (a shard of 40,000
    settled apps read every half second spent a tenth of its restart doing that)."""

    def __init__(self, clock: Callable[[], float] = time.time):
        self._lock = threading.Lock()
        self._apps: dict[tuple[str, str], str] = {}
        self._counts: dict[tuple[str, str], int] = {}
        self._unconverged: dict[tuple[str, str], float] = {}  # not converged since
        self._thresholds: dict[str, float] = {}
        self.clock = clock

    def threshold(self, shard: str, seconds: float) -> None:
        with self._lock:
            self._thresholds[shard] = seconds

    def _drop(self, key: tuple[str, str]) -> None:
        phase = self._apps.pop(key, None)
        if phase is not None:
            count = self._counts[(key[0], phase)] - 1
            if count:
                self._counts[(key[0], phase)] = count
            else:
                del self._counts[(key[0], phase)]
        self._unconverged.pop(key, None)

    def observe(self, shard: str, app: dict[str, Any]) -> None:
        meta = app["metadata"]
        key = (shard, f'{meta.get("namespace", "")}/{meta["name"]}')
        phase, since = (app.get("status") or {}).get("status") or "starting", unconverged_since(app)
        with self._lock:
            self._drop(key)
            self._apps[key] = phase
            self._counts[(shard, phase)] = self._counts.get((shard, phase), 0) + 1
            if since is not None:
                self._unconverged[key] = since

    def forget(self, shard: str, app: dict[str, Any]) -> None:
        meta = app["metadata"]
        with self._lock:
            self._drop((shard, f'{meta.get("namespace", "")}/{meta["name"]}'))

    def collect(self) -> Iterator[GaugeMetricFamily]:
        phases = GaugeMetricFamily("velashard_application_phase", "Applications of this shard by phase",
                                   labels=["shard", "phase"])
        stuck = GaugeMetricFamily("velashard_applications_not_converged",
                                  "Applications of this shard not converged for longer than --unconverged-threshold",
                                  labels=["shard"])
        now = self.clock()
        with self._lock:
            counts = dict(self._counts)
            late: dict[str, int] = {shard: 0 for shard in self._thresholds}
            for (shard, _), since in self._unconverged.items():
                if now - since > self._thresholds.get(shard, 600.0):
                    late[shard] = late.get(shard, 0) + 1
        for (shard, phase), n in sorted(counts.items()):
            phases.add_metric([shard, phase], n)
        for shard, n in sorted(late.items()):
            stuck.add_metric([shard], n)
        yield phases
        yield stuck


PHASES = PhaseBook()
REGISTRY.register(PHASES)
