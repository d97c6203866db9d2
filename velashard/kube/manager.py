"""The manager owns lifecycles: shared informers, controllers, leader election, metrics and probes."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

from velashard.kube.client import KubeClient
from velashard.kube.controller import Controller
from velashard.kube.informer import Informer
from velashard.kube.leaderelection import LeaderElector
from velashard.kube.resources import Resource
from velashard.kube.store import IndexFunc
from velashard.observability import ProbeServer, fields, health_server, metrics_server

log = logging.getLogger("velashard.kube.manager")


@dataclass
class LeaderElectionConfig:
    name: str
    namespace: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


class Manager:
    def __init__(self, client: KubeClient, shard_id: str, leader_election: LeaderElectionConfig | None = None,
                 metrics_addr: str | None = None, health_addr: str | None = None, sync_timeout: float = 120.0):
        self.client = client
        self.shard_id = shard_id
        self._informers: dict[tuple, Informer] = {}
        self._controllers: list[Controller] = []
        self._runnables: list[tuple[Callable[[], None], Callable[[], None]]] = []
        self._started = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.lost_leadership = False
        self._sync_timeout = sync_timeout
        self._elector = None
        if leader_election is not None:
            le = leader_election
            self._elector = LeaderElector(client, le.name, le.namespace, le.identity, self.start_controllers,
                                          self._leadership_lost, le.lease_duration, le.renew_deadline,
                                          le.retry_period)
        self._probes: list[ProbeServer] = []
        if metrics_addr:
            self._probes.append(metrics_server(metrics_addr))
        if health_addr:
            self._probes.append(health_server(health_addr, lambda: True, self.ready))

    # --- wiring ----------------------------------------------------------------------------------

    def informer(self, resource: Resource, namespace: str | None = None, label_selector: str | None = None,
                 field_selector: str | None = None, indexers: dict[str, IndexFunc] | None = None,
                 resync_period: float = 0.0) -> Informer:
        """A shared informer per (resource, namespace, selectors); created on first use, started with the manager."""
        key = (resource, namespace, label_selector, field_selector)
        with self._lock:
            informer = self._informers.get(key)
            if informer is None:
                informer = Informer(self.client, resource, namespace, label_selector, field_selector,
                                    resync_period=resync_period, indexers=indexers)
                self._informers[key] = informer
                if self._started:
                    informer.start()
            return informer

    def add_controller(self, controller: Controller) -> None:
        self._controllers.append(controller)

    def add_runnable(self, start: Callable[[], None], stop: Callable[[], None]) -> None:
        """Something else that runs while this process leads (e.g. a scheduler loop)."""
        self._runnables.append((start, stop))

    @property
    def informers(self) -> list[Informer]:
        return list(self._informers.values())

    def ready(self) -> bool:
        """Ready once every informer has synced; a standby replica waiting for the lease is ready too."""
        if self._elector is not None and not self._elector.is_leader:
            return not self._stop.is_set()
        return self._started and all(i.has_synced() for i in self._informers.values())

    # --- lifecycle -------------------------------------------------------------------------------

    def start_controllers(self) -> None:
        with self._lock:
            self._started = True
            informers = list(self._informers.values())
        for informer in informers:
            informer.start()
        deadline = time.monotonic() + self._sync_timeout
        for informer in informers:
            while not informer.wait_for_sync(0.2):  # short waits so that SIGTERM is never held up
                if self._stop.is_set():
                    return
                if time.monotonic() > deadline:
                    log.error("informer did not sync; is its CRD installed?", extra=fields(resource=informer.name))
                    break
        if self._stop.is_set():
            return
        for controller in self._controllers:
            controller.start()
        for start, _ in self._runnables:
            start()
        log.info("controllers started", extra=fields(controllers=",".join(c.name for c in self._controllers),
                                                      informers=len(informers)))

    def _leadership_lost(self) -> None:
        if self._stop.is_set():
            return
        self.lost_leadership = True
        self._stop.set()  # another replica leads now; stop at once and let the process restart

    def run(self, stop: threading.Event) -> int:
        """Run until `stop` is set (SIGTERM) or leadership is lost; returns the process exit code."""
        for probe in self._probes:
            probe.start()
        if self._elector is not None:
            self._elector.start()
        else:
            self.start_controllers()
        while not stop.wait(0.2):
            if self._stop.is_set():
                break
        self._stop.set()
        self.shutdown()
        return 1 if self.lost_leadership else 0

    def shutdown(self) -> None:
        """Stop intake, finish in-flight reconciles, stop informers, release the lease, close probes."""
        for controller in self._controllers:
            if not controller.stop(timeout=6.0):
                log.warning("in-flight reconciles still running at shutdown", extra=fields(
                    controller=controller.name))
        for _, stop in self._runnables:
            stop()
        for informer in self._informers.values():
            informer.stop()
        if self._elector is not None:
            self._elector.stop(release=not self.lost_leadership)
        for probe in self._probes:
            probe.stop()
        log.info("manager stopped", extra=fields(shard=self.shard_id))
