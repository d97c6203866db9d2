"""Shard load reports: each shard publishes how many apps it caches on a Lease the master reads."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.leaderelection import micro_time
from velashard.kube.resources import LEASES
from velashard.observability import Heartbeat, fields

log = logging.getLogger("velashard.sharding.loads")

LOAD_LABEL = "velashard.io/shard-load"
APPS_ANNOTATION = "velashard.io/applications"


def lease_name(shard: str) -> str:
    return f"velashard-load-{shard}"


def parse_loads(leases: list[dict[str, Any]]) -> dict[str, int]:
    """shard id -> app count from load leases (malformed counts are ignored)."""
    out: dict[str, int] = {}
    for lease in leases:
        meta = lease.get("metadata") or {}
        shard = (meta.get("labels") or {}).get(LOAD_LABEL)
        try:
            out[shard] = int((meta.get("annotations") or {}).get(APPS_ANNOTATION, ""))
        except ValueError:
            continue
    return out


class LoadReporter:
    """Writes this shard's app count and a heartbeat every `period` seconds."""

    def __init__(self, client: KubeClient, namespace: str, shard: str, count: Callable[[], int],
                 period: float = 15.0):
        self.client, self.namespace, self.shard, self.count, self.period = client, namespace, shard, count, period
        self.heartbeat = Heartbeat("load-reporter", max(60.0, period * 4))  # busy while it writes
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="load-reporter", daemon=True)
        self.heartbeat.attach(self._thread)
        self._thread.start()

    def stop(self) -> None:
        self.heartbeat.stop()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def report(self) -> None:
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": lease_name(self.shard), "namespace": self.namespace,
                             "labels": {LOAD_LABEL: self.shard},
                             "annotations": {APPS_ANNOTATION: str(self.count())}},
                "spec": {"holderIdentity": self.shard, "renewTime": micro_time(time.time()),
                         "leaseDurationSeconds": int(self.period * 3)}}
        try:
            self.client.patch(LEASES, body["metadata"]["name"], body, self.namespace)
        except errors.NotFound:
            self.client.create(LEASES, body)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with self.heartbeat.busy():
                    self.report()
            except errors.KubeError as err:
                log.warning("publishing load failed", extra=fields(shard=self.shard, error=str(err)))
            self._stop.wait(self.period)
