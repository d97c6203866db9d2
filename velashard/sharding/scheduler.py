"""The master's background scheduler: schedule unscheduled apps, move apps off shards that are gone.

It follows label-selected subsets of Applications with informers, never all of them: those without a
shard label (new while the webhook was down, drained, or handed back by a shard for want of a valid
proof) and those whose shard label names no available shard (the selector follows membership). Their
events wake it; a periodic pass over the same caches is the safety net, so at steady state it sends no
request at all. Whether an orphan may move is the membership rule's (sharding/membership.py): after the
grace period, and once its lease expired if its process may still run. Every shard it sets carries a proof
signed with the master's key (sharding/proof.py).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Callable

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS, RESOURCE_TRACKERS
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.events import record, timestamp
from velashard.kube.fence import begin_work, end_work, work_started
from velashard.kube.informer import EventHandler, Informer
from velashard.kube.manager import Manager
from velashard.kube.resources import NAMESPACES, Resource
from velashard.observability import RESCHEDULE_TOTAL, SCHEDULE_TOTAL, Heartbeat, fields
from velashard.sharding.discovery import ShardDiscovery
from velashard.sharding.keys import SigningKey
from velashard.sharding.move import Found, set_shard, shard_dependents
from velashard.sharding.placement import (PlacementState, acted_on, due_in, due_orphans, misplaced, place_all,
                                          shard_of, track_unavailable, versions)
from velashard.sharding.proof import Signer
from velashard.sharding.strategies import pinned_shard

log = logging.getLogger("velashard.sharding.scheduler")

UNSCHEDULED = f"!{labels.SCHEDULED_SHARD_ID}"
RETRY_AFTER = 1.0  # a move that failed for another reason than a newer version is tried again this soon


def orphan_selector(available: list[str]) -> str:
    """Apps whose shard is neither available nor the master."""
    keep = ",".join(sorted(set(available) | {labels.MASTER_SHARD_ID}))
    return f"{labels.SCHEDULED_SHARD_ID},{labels.SCHEDULED_SHARD_ID} notin ({keep})"


class BackgroundScheduler:
    def __init__(self, manager: Manager, discovery: ShardDiscovery, strategy: str, namespace: str, keys: SigningKey,
                 period: float = 30.0, grace: float = 60.0, concurrency: int = 8, stuck_after: float = 600.0,
                 author: Callable[[dict], KubeClient] | None = None, resource: Resource = APPLICATIONS):
        self.manager = manager
        self.resource = resource  # what it places: Applications, or (a second scheduler) WorkflowRuns
        self.client = manager.client
        # The client acting as an app's author, which relabels the app's managed resources when it moves.
        self.author = author or (lambda _app: self.client)
        self.discovery = discovery
        self.strategy = strategy
        self._placement = PlacementState(strategy)  # what placement remembers from pass to pass
        self.namespace = namespace
        self.keys = keys
        self.period = period
        self.grace = grace
        self.concurrency = max(1, concurrency)
        self._wake = threading.Event()
        self._stop = threading.Event()
        wake = EventHandler(lambda _obj: self._wake.set(), lambda _old, _new: self._wake.set())
        self.unscheduled = manager.informer(resource, label_selector=UNSCHEDULED)
        self.unscheduled.add_handler(wake)
        self.orphans: Informer | None = None  # started once shards are known, replaced when they change
        self._gone_since: dict[str, float] = {}
        self._acted: dict[str, str] = {}  # uid -> the resourceVersion a move started from
        self._due_in: float | None = None  # until an unavailable shard's apps may move, as last seen
        self._retry = False
        self._thread: threading.Thread | None = None
        # A new leader looks for misplaced apps once: the shards may have changed while no master led, or with
        # the master itself (a chart upgrade that adds a shard to --schedulable-shards restarts the master).
        self._rebalance = strategy == "consistent-hash"
        self.name = "background-scheduler" + ("" if resource is APPLICATIONS else f"-{resource.plural}")
        self.heartbeat = Heartbeat(self.name, stuck_after)  # busy during a pass
        discovery.on_change(self._shards_changed)
        discovery.on_members_change(self._wake.set)  # e.g. a lease expired: a suspect's apps may move now
        keys.on_ready(self._wake.set)

    def _shards_changed(self, _shards: list[str]) -> None:
        if self.strategy == "consistent-hash":
            self._rebalance = True  # apps whose ring position moved go through the drain handshake
        self._wake.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.heartbeat.attach(self._thread)
        self._thread.start()

    def stop(self) -> None:
        self.heartbeat.stop()
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            begin_work()  # a pass that outlives a fence trip moves nothing more (kube/fence.py)
            try:
                with self.heartbeat.busy():
                    self.run_once()
            except errors.KubeError as err:
                log.warning("scheduling pass failed", extra=fields(error=str(err)))
                self._retry = True
            finally:
                end_work()
            wait = self.period if self._due_in is None else min(self.period, self._due_in + 0.01)
            self._wake.wait(min(wait, RETRY_AFTER) if self._retry else wait)
            self._wake.clear()

    def run_once(self, now: float | None = None) -> int:
        """One pass over the caches; returns how many apps were (re)scheduled."""
        now = time.monotonic() if now is None else now
        members = self.discovery.refresh()
        available = self.discovery.available()
        signer = self.keys.signer
        self._retry = False
        if not available or signer is None:
            return 0  # a shard's or the key's arrival wakes the scheduler
        orphans = self._follow_orphans(available)
        unscheduled = self.unscheduled.store.list()
        plans = [(app, "unscheduled") for app in unscheduled]
        gone = orphans.store.list() if orphans.has_synced() else []
        if orphans.has_synced():
            self._gone_since = track_unavailable(self._gone_since, {shard_of(a) for a in gone}, now,
                                                 self.discovery.last_available())
            plans += [(app, "orphaned") for app in due_orphans(gone, self._gone_since, now, self.grace, members)]
        cached = versions(unscheduled + gone)
        self._acted = {uid: rv for uid, rv in self._acted.items() if cached.get(uid) == rv}
        plans = [(app, reason) for app, reason in plans if not acted_on(app, self._acted)]
        moved = self._schedule_all(plans, available, signer) if plans else 0
        self._due_in = due_in(self._gone_since, now, self.grace, members)
        if self._rebalance:
            self._rebalance = False
            self.drain_misplaced(available)
        return moved

    def _follow_orphans(self, available: list[str]) -> Informer:
        """The informer of apps on no available shard, for the shards available now. Only membership changes
        replace it (the new one lists the apps of the shards gone; at steady state it only watches)."""
        selector = orphan_selector(available)
        if self.orphans is None or self.orphans.label_selector != selector:
            previous = self.orphans
            self.orphans = self.manager.start_informer(self.resource, label_selector=selector)
            self.orphans.add_handler(EventHandler(lambda _obj: self._wake.set()))
            if previous is not None:
                self.manager.stop_informer(previous)
        return self.orphans

    def drain_misplaced(self, available: list[str]) -> int:
        """Ask owning shards to let go of apps the ring now places elsewhere (only after membership changes)."""
        asked = 0
        namespaces: dict[str, dict | None] = {}
        for shard in available:
            owned, _ = self.client.list_all(self.resource, label_selector=f"{labels.SCHEDULED_SHARD_ID}={shard},"
                                                                          f"!{labels.DRAIN}")
            for app, target in misplaced(owned, available, self._pins(owned, namespaces), self._placement):
                try:
                    self.client.patch(self.resource, app["metadata"]["name"], {"metadata": {
                        "labels": {labels.DRAIN: target}, "resourceVersion": app["metadata"]["resourceVersion"]}},
                        app["metadata"]["namespace"])
                    asked += 1
                except (errors.Conflict, errors.NotFound):
                    continue
                record(self.client, app, self.resource, "Normal", "Draining",
                       f"asked shard {shard} to let go, for shard {target}: rebalanced onto a new shard",
                       "velashard-scheduler", {labels.EVENT_FROM_SHARD: shard, labels.EVENT_TO_SHARD: target,
                                               labels.EVENT_MOVE_REASON: "rebalance"})
        if asked:
            log.info("asked shards to drain applications for rebalancing", extra=fields(apps=asked))
            RESCHEDULE_TOTAL.labels(reason="rebalance").inc(asked)
        return asked

    def _schedule_all(self, plans: list[tuple[dict, str]], available: list[str], signer: Signer) -> int:
        """Pick shards one by one (strategies keep state), then move the apps side by side: a failed shard's
        apps are each a few requests, and one after the other they would make failover slow."""
        apps = [app for app, _ in plans]
        placed, self._placement = place_all(apps, available, self.discovery.loads() if self.strategy == "least-loaded" else {},
                                            self._pins(apps, {}), self._placement)
        picked: list[tuple[dict, str, str]] = []
        for (app, shard), (_, reason) in zip(placed, plans):
            if shard is None:
                SCHEDULE_TOTAL.labels(strategy=self.strategy, result="no-shard").inc()
                continue
            picked.append((app, shard, reason))
        found = self._orphans_dependents(picked)
        started = work_started()

        def move(plan: tuple[dict, str, str]) -> bool:
            begin_work(at=started)  # the pass's start, for the fence
            try:
                return self._move(*plan, signer=signer, found=found)
            finally:
                end_work()
        if len(picked) <= 1:
            results = [self._move(*p, signer=signer, found=found) for p in picked]
        else:
            with ThreadPoolExecutor(max_workers=min(self.concurrency, len(picked)),
                                    thread_name_prefix="schedule") as pool:
                results = list(pool.map(move, picked))
        for (app, _, _), moved in zip(picked, results):
            if moved:
                self._acted[app["metadata"].get("uid", "")] = app["metadata"]["resourceVersion"]
        return sum(results)

    def _pins(self, apps: list[dict], namespaces: dict[str, dict | None]) -> dict[str, str]:
        """The shard each of these apps' namespaces is pinned to; `namespaces` caches reads within a pass."""
        pins = {}
        for ns in {app["metadata"]["namespace"] for app in apps}:
            if ns not in namespaces:
                try:
                    namespaces[ns] = self.client.get(NAMESPACES, ns)
                except errors.NotFound:
                    namespaces[ns] = None
            pin = pinned_shard(namespaces[ns])
            if pin:
                pins[ns] = pin
        return pins

    def _orphans_dependents(self, picked: list[tuple[dict, str, str]]) -> dict[tuple[str, str], Found]:
        """The revisions and trackers of the orphans' former shards, listed once per shard, by app."""
        found: dict[tuple[str, str], Found] = {}
        if self.resource is not APPLICATIONS:
            return found  # a WorkflowRun moves alone
        for gone in sorted({shard_of(app) for app, _, reason in picked if reason == "orphaned"} - {None}):
            found.update(shard_dependents(self.client, gone))
        return found

    def _lost_at(self, app: dict, reason: str) -> str | None:
        """When the shard an orphan leaves was first seen unavailable, as wall-clock time for its Event."""
        since = self._gone_since.get(shard_of(app) or "") if reason == "orphaned" else None
        if since is None:
            return None
        return timestamp(datetime.now(timezone.utc) - timedelta(seconds=max(0.0, time.monotonic() - since)))

    def _move(self, app: dict, shard: str, reason: str, signer: Signer,
              found: dict[tuple[str, str], Found] | None = None) -> bool:
        meta = app["metadata"]
        mine = (found or {}).get((meta["namespace"], meta["name"]))
        # Without a tracker among them (a new app, or dependents labelled otherwise) the app's own lists decide.
        if mine is not None and not any(res is RESOURCE_TRACKERS for res, _ in mine):
            mine = None
        try:
            set_shard(self.client, app, shard, reason, signer, mine, self.author(app),
                      lost_at=self._lost_at(app, reason), resource=self.resource)
        except (errors.Conflict, errors.NotFound):
            SCHEDULE_TOTAL.labels(strategy=self.strategy, result="conflict").inc()
            return False  # changed meanwhile: its new version's event brings it back
        except errors.KubeError as err:
            SCHEDULE_TOTAL.labels(strategy=self.strategy, result="error").inc()
            log.warning("could not schedule application", extra=fields(
                key=f'{app["metadata"]["namespace"]}/{app["metadata"]["name"]}', shard=shard, error=str(err)))
            self._retry = True
            return False
        SCHEDULE_TOTAL.labels(strategy=self.strategy, result="scheduled").inc()
        if reason == "orphaned":
            RESCHEDULE_TOTAL.labels(reason=reason).inc()
        return True
