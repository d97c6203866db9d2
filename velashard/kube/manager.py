"""The manager owns lifecycles: shared informers, controllers, leader election, metrics and probes."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from velashard.kube.client import KubeClient
from velashard.kube.controller import Controller
from velashard.kube.fence import Fence
from velashard.kube.informer import Informer, Obj, strip_unread_fields
from velashard.kube.leaderelection import LeaderElector
from velashard.kube.resources import Resource
from velashard.kube.store import IndexFunc
from velashard.observability import Heartbeat, ProbeServer, fields, health_server, liveness_problems, metrics_server

log = logging.getLogger("velashard.kube.manager")

CRDS_MISSING = "CRDs are not installed: run `velashard install` or install the chart"


@dataclass
class LeaderElectionConfig:
    name: str
    namespace: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    labels: dict[str, str] = field(default_factory=dict)


class Manager:
    def __init__(self, client: KubeClient, shard_id: str, leader_election: LeaderElectionConfig | None = None,
                 metrics_addr: str | None = None, health_addr: str | None = None, sync_timeout: float = 120.0):
        self.client = client
        self.shard_id = shard_id
        self._informers: dict[tuple, Informer] = {}
        # Started at runtime for kinds that appear later (and stopped when unused); not part of readiness.
        self._on_demand: dict[tuple, Informer] = {}
        self._controllers: list[Controller] = []
        self._runnables: list[tuple[Callable[[], None], Callable[[], None]]] = []
        # Run on every replica, a standby too, from run() to the end of shutdown (as controller-runtime's webhook
        # server, which needs no leader); each may say why this replica is not ready.
        self._always: list[tuple[Callable[[], None], Callable[[], None]]] = []
        self._readiness_checks: list[Callable[[], list[str]]] = []
        self._caches_gate_readiness = True
        self._heartbeats: list[Heartbeat] = []
        self._said_crds_missing = False
        self._started = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.lost_leadership = False
        self.failed = False
        self._controllers_started = False
        self._sync_timeout = sync_timeout
        self._elector = None
        self.fence: Fence | None = None
        self.lease_annotations: Callable[[], dict[str, str]] = dict
        self._fence_tripped = threading.Event()
        if leader_election is not None:
            le = leader_election
            # Every write of this process but the lease's own passes the fence (kube/fence.py).
            self.fence = Fence(le.renew_deadline)
            self.fence.on_trip(self._on_fence_trip)
            client.set_fence(self.fence, le.namespace, le.name)
            self._elector = LeaderElector(client, le.name, le.namespace, le.identity, self.start_controllers,
                                          self._leadership_lost, le.lease_duration, le.renew_deadline,
                                          le.retry_period, fence=self.fence, labels=le.labels,
                                          annotations=lambda: self.lease_annotations())
        # Bound now (so a taken port fails at once), served from run().
        self.metrics_server = metrics_server(metrics_addr) if metrics_addr else None
        self.health_server = health_server(health_addr, self.liveness, self.readiness) if health_addr else None
        self._probes: list[ProbeServer] = [p for p in (self.metrics_server, self.health_server) if p is not None]

    # --- wiring ----------------------------------------------------------------------------------

    def informer(self, resource: Resource, namespace: str | None = None, label_selector: str | None = None,
                 field_selector: str | None = None, indexers: dict[str, IndexFunc] | None = None,
                 resync_period: float = 0.0, transform: Callable[[Obj], Obj] = strip_unread_fields,
                 packed: bool = False) -> Informer:
        """A shared informer per (resource, namespace, selectors); created on first use, started with the manager.

        A later caller's indexers are added to the shared cache, and the shortest resync period asked for wins;
        the first caller's transform and packing hold.
        """
        key = (resource, namespace, label_selector, field_selector)
        with self._lock:
            informer = self._informers.get(key)
            if informer is None:
                informer = Informer(self.client, resource, namespace, label_selector, field_selector,
                                    resync_period=resync_period, indexers=indexers, transform=transform,
                                    packed=packed)
                self._informers[key] = informer
                if self._started:
                    informer.start()
                return informer
            if indexers:
                informer.store.add_indexers(indexers)
            if resync_period and not self._started:
                informer.resync_period = min(p for p in (informer.resync_period, resync_period) if p)
            return informer

    def start_informer(self, resource: Resource, label_selector: str | None = None,
                       transform: Callable[[Obj], Obj] = strip_unread_fields, packed: bool = False) -> Informer:
        """An informer added at runtime (a kind an app began to manage): started at once if the manager runs,
        else with it. It does not count for readiness, as the process was ready before the kind was needed;
        callers wait for its sync before trusting its cache. Shared per (resource, selector) like the others."""
        key = (resource, None, label_selector, None)
        with self._lock:
            informer = self._informers.get(key) or self._on_demand.get(key)
            if informer is None:
                informer = Informer(self.client, resource, label_selector=label_selector, transform=transform,
                                    packed=packed)
                self._on_demand[key] = informer
                if self._started and not self._stop.is_set():
                    informer.start()
                log.info("informer started on demand", extra=fields(shard=self.shard_id, informer=informer.name))
            return informer

    def stop_informer(self, informer: Informer) -> None:
        """Stop an informer started on demand once nothing uses its kind; those started with the manager stay."""
        with self._lock:
            key = next((k for k, i in self._on_demand.items() if i is informer), None)
            if key is None:
                return
            del self._on_demand[key]
        informer.stop(timeout=2.0)
        log.info("informer stopped, kind no longer used", extra=fields(shard=self.shard_id, informer=informer.name))

    def add_controller(self, controller: Controller) -> None:
        self._controllers.append(controller)

    def add_runnable(self, start: Callable[[], None], stop: Callable[[], None],
                     heartbeat: Heartbeat | None = None, leader_only: bool = True) -> None:
        """Something else that runs while this process leads (e.g. a scheduler loop), or with `leader_only=False`
        on every replica from the start (e.g. a webhook server); its thread's heartbeat, if given, counts for
        /healthz once started."""
        (self._runnables if leader_only else self._always).append((start, stop))
        if heartbeat is not None:
            self._heartbeats.append(heartbeat)

    def add_readiness_check(self, check: Callable[[], list[str]], instead_of_caches: bool = False) -> None:
        """Why this replica is not ready besides its caches, on a standby too (e.g. its webhook is not serving).
        `instead_of_caches`: the check alone says whether this replica is ready, leader or not: its readiness means
        that it serves what every replica serves (the master's webhook, which a Service routes to every Ready
        replica), so a leader re-listing its caches or fenced still is."""
        self._readiness_checks.append(check)
        if instead_of_caches:
            self._caches_gate_readiness = False

    @property
    def informers(self) -> list[Informer]:
        with self._lock:
            return list(self._informers.values()) + list(self._on_demand.values())

    def ready(self) -> bool:
        return not self.readiness()

    def readiness(self) -> list[str]:
        """Why this process is not ready: ready once every informer has synced; a standby replica waiting for the
        lease is ready too; a fenced process is not, and says why; and on any replica what its readiness checks
        say (a webhook that does not serve yet)."""
        if self._stop.is_set():
            return ["stopping"]
        problems = [problem for check in self._readiness_checks for problem in check()]
        if not self._caches_gate_readiness or (self._elector is not None and not self._elector.is_leader):
            return problems
        return problems + self._leader_readiness()

    def _leader_readiness(self) -> list[str]:
        if not self._started:
            return ["starting"]
        if self.fence is not None and self._controllers_started and not self.fence.is_open:
            return [f"fenced: {self.fence.reason}"]
        informers = list(self._informers.values())
        missing = [i.name for i in informers if i.resource_missing]
        if missing:
            return [f"{CRDS_MISSING} ({', '.join(missing)} not served)"]
        return [f"informer {i.name} has not synced" for i in informers if not i.has_synced()]

    def liveness(self) -> list[str]:
        """Threads that died or are stuck past their deadline: informers, controller workers, runnables."""
        if self._stop.is_set():
            return []  # threads end on purpose while stopping
        beats = [i.heartbeat for i in self.informers]  # a copy taken under the lock, safe against adds
        for controller in self._controllers:
            beats.extend(controller.heartbeats)
        return liveness_problems(beats + self._heartbeats)

    # --- lifecycle -------------------------------------------------------------------------------

    def start_controllers(self) -> None:
        """Start informers, wait for their caches, then start controllers and runnables (once leading)."""
        with self._lock:
            self._started = True
            informers = list(self._informers.values())
            for informer in self._on_demand.values():  # asked for before the start
                informer.start()
        for informer in informers:
            informer.start()
        deadline = time.monotonic() + self._sync_timeout
        for informer in informers:
            while not informer.wait_for_sync(0.2):  # short waits so that a stop is never held up
                if self._stop.is_set():
                    return
                missing = [i.name for i in informers if i.resource_missing]
                if missing and not self._said_crds_missing:
                    self._said_crds_missing = True
                    log.error(CRDS_MISSING, extra=fields(not_served=",".join(missing)))
                if time.monotonic() > deadline:
                    unsynced = [i.name for i in informers if not i.has_synced()]
                    log.error("caches did not sync; is every CRD installed? stopping", extra=fields(
                        informers=",".join(unsynced), timeout=self._sync_timeout))
                    self.failed = True
                    self._stop.set()  # acting on a partial cache could delete what is merely not yet seen
                    return
        if not self._open_fence():
            return
        with self._lock:
            if self._stop.is_set():
                return
            for controller in self._controllers:
                controller.start()
            for start, _ in self._runnables:
                start()
            self._controllers_started = True
            if self.fence is not None:
                threading.Thread(target=self._guard_fence, name="fence-guard", daemon=True).start()
        log.info("controllers started", extra=fields(controllers=",".join(c.name for c in self._controllers),
                                                      informers=len(informers)))

    # --- fencing -------------------------------------------------------------------------------------

    def _open_fence(self) -> bool:
        """Wait until the lease is fresh and open the fence; False if stopping meanwhile."""
        if self.fence is None:
            return True
        while not self.fence.reopen():
            if self._stop.wait(0.05):
                return False
        return True

    def _on_fence_trip(self, reason: str) -> None:
        log.error("fenced: stopping work until the lease is held again and caches are re-listed",
                  extra=fields(shard=self.shard_id, reason=reason))
        self._fence_tripped.set()

    def _guard_fence(self) -> None:
        """Trip the fence as soon as its deadline passes (a pause is seen on waking, by the monotonic clock, not
        only when a write is tried), then stop the workers and resume only after re-acquiring and re-listing."""
        assert self.fence is not None and self._elector is not None
        period = min(0.1, self._elector.retry_period / 4)
        while not self._stop.wait(period):
            if self.fence.check() and not self._fence_tripped.is_set():
                continue
            self._fence_tripped.clear()
            self._recover()

    def _recover(self) -> None:
        assert self.fence is not None
        started = time.monotonic()
        for controller in self._controllers:
            controller.queue.shutdown()  # queued work is dropped: it was decided on a cache that may be stale
        for controller in self._controllers:
            controller.stop(timeout=1.0)  # in-flight reconciles end at their next write, which the fence refuses
        while not (self.fence.fresh() and self._elector is not None and self._elector.is_leader):
            if self._stop.wait(0.05):
                return
        informers = self.informers  # the on-demand ones too: every cache is re-listed
        for informer in informers:
            informer.restart(timeout=2.0)
        for informer in informers:
            while not informer.wait_for_sync(0.2):
                if self._stop.is_set():
                    return
        with self._lock:
            if self._stop.is_set() or not self._open_fence():
                return
            for controller in self._controllers:
                controller.queue.reopen()
                controller.start()
        for informer in informers:
            informer.replay()
        log.info("fence lifted: lease held and caches re-listed", extra=fields(
            shard=self.shard_id, fenced_for=round(time.monotonic() - started, 3)))

    def _leadership_lost(self) -> None:
        if self._stop.is_set():
            return
        self.lost_leadership = True
        self._stop.set()  # another replica leads now; stop at once and let the process restart

    def run(self, stop: threading.Event) -> int:
        """Run until `stop` is set (SIGTERM), leadership is lost or caches fail to sync; returns the exit code."""
        for probe in self._probes:
            probe.start()
        for start, _ in self._always:
            start()
        starter = None
        if self._elector is not None:
            self._elector.start()
        else:
            # In a thread, so that a stop during a long cache sync is acted on at once.
            starter = threading.Thread(target=self.start_controllers, name="manager-start", daemon=True)
            starter.start()
        while not stop.wait(0.2):
            if self._stop.is_set():
                break
        self._stop.set()
        if starter is not None:
            starter.join()
        self.shutdown()
        return 1 if self.lost_leadership or self.failed else 0

    def shutdown(self, timeout: float = 8.0) -> None:
        """Stop intake, finish in-flight reconciles, stop informers, release the lease, close probes.

        Every step shares one deadline so that the whole stop fits a pod's termination grace period.
        """
        self._stop.set()
        deadline = time.monotonic() + timeout
        with self._lock:  # no controller starts after this point
            controllers_started = self._controllers_started
        for controller in self._controllers:
            controller.queue.shutdown()  # stop intake everywhere first, then wait for in-flight work
        for controller in self._controllers:
            if not controller.stop(timeout=max(0.0, deadline - time.monotonic() - 2.0)):
                log.warning("in-flight reconciles still running at shutdown", extra=fields(
                    controller=controller.name))
        for heartbeat in self._heartbeats:
            heartbeat.stop()
        if controllers_started:
            for _, stop in self._runnables:
                stop()
        for informer in self.informers:
            informer.stop(timeout=0)  # signal all, then wait for all
        for informer in self.informers:
            informer.stop(timeout=max(0.1, deadline - time.monotonic()))
        if self._elector is not None:
            self._elector.stop(release=not self.lost_leadership)
        for _, stop in self._always:  # last: a webhook serves while the rest stops, and the lease is released
            stop()
        for probe in self._probes:
            probe.stop()
        log.info("manager stopped", extra=fields(shard=self.shard_id))
