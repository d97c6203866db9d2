"""The master's background scheduler: schedule unscheduled apps, move apps off shards that are gone.

It only ever lists label-selected subsets of Applications: those without a shard label, and those
whose shard label names no available shard. Whether such apps may move is the membership rule's
(sharding/membership.py): a dead shard's after the grace period, a suspect's once its lease expired.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS, RESOURCE_TRACKERS
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.fence import begin_work, end_work, work_started
from velashard.kube.resources import LEASES, NAMESPACES
from velashard.observability import RESCHEDULE_TOTAL, SCHEDULE_TOTAL, Heartbeat, fields
from velashard.sharding.discovery import ShardDiscovery
from velashard.sharding.loads import LEASE_LABEL, parse_loads
from velashard.sharding.membership import SUSPECT
from velashard.sharding.move import Found, set_shard, shard_dependents
from velashard.sharding.placement import PlacementState, due_orphans, misplaced, place_all, shard_of, track_unavailable
from velashard.sharding.strategies import pinned_shard

log = logging.getLogger("velashard.sharding.scheduler")

UNSCHEDULED = f"!{labels.SCHEDULED_SHARD_ID}"


def orphan_selector(available: list[str]) -> str:
    """Apps whose shard is neither available nor the master."""
    keep = ",".join(sorted(set(available) | {labels.MASTER_SHARD_ID}))
    return f"{labels.SCHEDULED_SHARD_ID},{labels.SCHEDULED_SHARD_ID} notin ({keep})"


class BackgroundScheduler:
    def __init__(self, client: KubeClient, discovery: ShardDiscovery, strategy: str, namespace: str,
                 period: float = 30.0, grace: float = 60.0, concurrency: int = 8, stuck_after: float = 600.0):
        self.client = client
        self.discovery = discovery
        self.strategy = strategy
        self._placement = PlacementState(strategy)  # what placement remembers from pass to pass
        self.namespace = namespace
        self.period = period
        self.grace = grace
        self.concurrency = max(1, concurrency)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._gone_since: dict[str, float] = {}
        self._lease_expires_in: float | None = None  # the soonest a suspect's lease expires, as last seen
        self._thread: threading.Thread | None = None
        self._rebalance = False
        self._draining = 0
        self.heartbeat = Heartbeat("background-scheduler", stuck_after)  # busy during a pass
        discovery.on_change(self._shards_changed)

    def _shards_changed(self, _shards: list[str]) -> None:
        if self.strategy == "consistent-hash":
            self._rebalance = True  # apps whose ring position moved go through the drain handshake
        self._wake.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="background-scheduler", daemon=True)
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
            finally:
                end_work()
            busy = self._gone_since or self._draining
            wait = min(self.period, max(self.grace / 4, 0.5)) if busy else self.period
            if self._lease_expires_in is not None:
                # A suspect's apps move as soon as its lease expires: look again right then.
                wait = min(wait, self._lease_expires_in + 0.01)
            self._wake.wait(wait)
            self._wake.clear()

    def loads(self) -> dict[str, int]:
        if self.strategy != "least-loaded":
            return {}
        leases = self.client.list(LEASES, self.namespace, label_selector=LEASE_LABEL).get("items") or []
        return parse_loads(leases)

    def run_once(self, now: float | None = None) -> int:
        """One pass; returns how many apps were (re)scheduled."""
        now = time.monotonic() if now is None else now
        members = self.discovery.refresh()
        available = self.discovery.available()
        if not available:
            return 0
        loads = self.loads()
        unscheduled, _ = self.client.list_all(APPLICATIONS, label_selector=UNSCHEDULED)
        plans = [(app, "unscheduled") for app in unscheduled]
        orphans, _ = self.client.list_all(APPLICATIONS, label_selector=orphan_selector(available))
        self._gone_since = track_unavailable(self._gone_since, {shard_of(a) for a in orphans}, now)
        self._lease_expires_in = min((members[s].expires_in for s in self._gone_since if s in members
                                      and members[s].status == SUSPECT and members[s].expires_in is not None),
                                     default=None)
        plans += [(app, "orphaned") for app in due_orphans(orphans, self._gone_since, now, self.grace, members)]
        moved = self._schedule_all(plans, available, loads)
        if self._rebalance:
            self._rebalance = False
            self._draining = self.drain_misplaced(available)
        elif self._draining:
            self._draining = len(self.client.list(APPLICATIONS, label_selector=labels.DRAIN).get("items") or [])
        return moved

    def drain_misplaced(self, available: list[str]) -> int:
        """Ask owning shards to let go of apps the ring now places elsewhere (only after membership changes)."""
        asked = 0
        namespaces: dict[str, dict | None] = {}
        for shard in available:
            owned, _ = self.client.list_all(APPLICATIONS, label_selector=f"{labels.SCHEDULED_SHARD_ID}={shard},"
                                                                         f"!{labels.DRAIN}")
            for app, target in misplaced(owned, available, self._pins(owned, namespaces), self._placement):
                try:
                    self.client.patch(APPLICATIONS, app["metadata"]["name"], {"metadata": {
                        "labels": {labels.DRAIN: target}, "resourceVersion": app["metadata"]["resourceVersion"]}},
                        app["metadata"]["namespace"])
                    asked += 1
                except (errors.Conflict, errors.NotFound):
                    continue
        if asked:
            log.info("asked shards to drain applications for rebalancing", extra=fields(apps=asked))
            RESCHEDULE_TOTAL.labels(reason="rebalance").inc(asked)
        return asked

    def _schedule_all(self, plans: list[tuple[dict, str]], available: list[str], loads: dict[str, int]) -> int:
        """Pick shards one by one (strategies keep state), then move the apps side by side: a failed shard's
        apps are each a few requests, and one after the other they would make failover slow."""
        apps = [app for app, _ in plans]
        placed, self._placement = place_all(apps, available, loads, self._pins(apps, {}), self._placement)
        picked: list[tuple[dict, str, str]] = []
        for (app, shard), (_, reason) in zip(placed, plans):
            if shard is None:
                SCHEDULE_TOTAL.labels(strategy=self.strategy, result="no-shard").inc()
                continue
            picked.append((app, shard, reason))
        found = self._orphans_dependents(picked)
        if len(picked) <= 1:
            return sum(self._move(*p, found=found) for p in picked)
        started = work_started()

        def move(plan: tuple[dict, str, str]) -> int:
            begin_work(at=started)  # the pass's start, for the fence
            try:
                return self._move(*plan, found=found)
            finally:
                end_work()
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(picked)),
                                thread_name_prefix="schedule") as pool:
            return sum(pool.map(move, picked))

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
        for gone in sorted({shard_of(app) for app, _, reason in picked if reason == "orphaned"} - {None}):
            found.update(shard_dependents(self.client, gone))
        return found

    def _move(self, app: dict, shard: str, reason: str, found: dict[tuple[str, str], Found] | None = None) -> int:
        meta = app["metadata"]
        mine = (found or {}).get((meta["namespace"], meta["name"]))
        # Without a tracker among them (a new app, or dependents labelled otherwise) the app's own lists decide.
        if mine is not None and not any(res is RESOURCE_TRACKERS for res, _ in mine):
            mine = None
        try:
            set_shard(self.client, app, shard, reason, mine)
        except (errors.Conflict, errors.NotFound):
            SCHEDULE_TOTAL.labels(strategy=self.strategy, result="conflict").inc()
            return 0  # changed meanwhile; the next pass sees its new state
        except errors.KubeError as err:
            SCHEDULE_TOTAL.labels(strategy=self.strategy, result="error").inc()
            log.warning("could not schedule application", extra=fields(
                key=f'{app["metadata"]["namespace"]}/{app["metadata"]["name"]}', shard=shard, error=str(err)))
            return 0
        SCHEDULE_TOTAL.labels(strategy=self.strategy, result="scheduled").inc()
        if reason == "orphaned":
            RESCHEDULE_TOTAL.labels(reason=reason).inc()
        return 1
