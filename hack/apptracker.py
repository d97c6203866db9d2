"""What a benchmark sees of its apps, from one watch instead of repeated lists: when each app first ran, and
how long after an update its status showed the new generation running.

At 12,000 apps a full list of Applications every half second (as `Cluster.wait_running` does) costs the API
server and the benchmark more CPU than the controllers under test; an informer costs one event per write.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from velashard.apis.labels import SCHEDULED_SHARD_ID  # noqa: E402
from velashard.apis.oam import APPLICATIONS  # noqa: E402
from velashard.kube.client import KubeClient  # noqa: E402
from velashard.kube.informer import EventHandler, Informer  # noqa: E402


def _slim(obj: dict[str, Any]) -> dict[str, Any]:
    """Only what the tracker reads: keeps the benchmark's own memory and CPU small."""
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    shard = (meta.get("labels") or {}).get(SCHEDULED_SHARD_ID)
    return {"metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"),
                         "resourceVersion": meta.get("resourceVersion"), "generation": meta.get("generation"),
                         **({"labels": {SCHEDULED_SHARD_ID: shard}} if shard else {})},
            "status": {"status": status.get("status"), "observedGeneration": status.get("observedGeneration")}}


def running_generation(obj: dict[str, Any]) -> int | None:
    """The generation the app's status shows running, if it is running."""
    status = obj.get("status") or {}
    if status.get("status") != "running":
        return None
    return status.get("observedGeneration")


class AppTracker:
    """Follows the apps of one namespace. `first_running[name]` is the monotonic time it first ran;
    `expect(name, generation)` starts a clock that stops when the app runs that generation or a later one."""

    def __init__(self, client: KubeClient, namespace: str):
        self.first_running: dict[str, float] = {}
        self.latencies: dict[tuple[str, int], float] = {}
        self._expected: dict[str, tuple[int, float]] = {}
        self._lock = threading.Lock()
        self._informer = Informer(client, APPLICATIONS, namespace, transform=_slim, watch_timeout=3600)
        self._informer.add_handler(EventHandler(self._seen, lambda _old, new: self._seen(new), None))

    def start(self) -> "AppTracker":
        self._informer.start()
        self._informer.wait_for_sync(60)
        return self

    def stop(self) -> None:
        self._informer.stop()

    def count(self) -> int:
        return len(self._informer.store)

    def count_on(self, shard: str) -> int:
        """How many apps are labelled for `shard`."""
        return sum(1 for app in self._informer.store.list()
                   if (app["metadata"].get("labels") or {}).get(SCHEDULED_SHARD_ID) == shard)

    def running(self) -> int:
        with self._lock:
            return len(self.first_running)

    def expect(self, name: str, generation: int, since: float) -> None:
        with self._lock:
            self._expected[name] = (generation, since)
        cached = self._informer.store.get_by(self._informer.namespace, name)
        if cached is not None:
            self._seen(cached)  # already there (its status may have been written before we asked)

    def pending(self) -> int:
        with self._lock:
            return len(self._expected)

    def _seen(self, obj: dict[str, Any]) -> None:
        now = time.monotonic()
        generation = running_generation(obj)
        if generation is None:
            return
        name = obj["metadata"]["name"]
        with self._lock:
            self.first_running.setdefault(name, now)
            expected = self._expected.get(name)
            if expected is not None and generation >= expected[0]:
                del self._expected[name]
                self.latencies[(name, expected[0])] = now - expected[1]

    def wait(self, check: Any, timeout: float, interval: float = 0.5) -> bool:
        return wait_until(check, timeout, interval)


def wait_until(check: Any, timeout: float, interval: float = 0.5) -> bool:
    """Poll `check` until it is true or `timeout` seconds passed; its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval)
    return bool(check())
