"""The Application controller's wiring: informers, the events that wake an app, and the reconciler they feed
(one chain, built in `_chain`: the shard's ownership check when this process serves one shard, then the count
of apps held, then the reconcile). What a reconcile does is in reconciler.py."""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass
from typing import Any, Callable

from velashard.apis import labels
from velashard.apis.oam import (APPLICATION_REVISIONS, APPLICATIONS, COMPONENT_DEFINITIONS, POLICY_DEFINITIONS,
                                RESOURCE_TRACKERS, SYSTEM_NAMESPACE, TRAIT_DEFINITIONS, WORKFLOW_STEP_DEFINITIONS)
from velashard.core import health, ownership, proven, render_cache, settled
from velashard.core.apply import Applier
from velashard.core.appmetrics import PHASES
from velashard.core.authors import AuthConfig
from velashard.core.definitions import DefinitionSource
from velashard.core.echoes import OwnWrites
from velashard.core.events import record_event
from velashard.core.managed import ManagedCaches
from velashard.core.reconciler import ApplicationReconciler
from velashard.core.revisions import Revisions
from velashard.core.tracker import Trackers
from velashard.core.usage import COMPONENT, POLICY, STEP, TRAIT, UsageIndex
from velashard.kube.controller import Controller, Result, Retry, Terminal
from velashard.kube.discovery import Discovery
from velashard.kube.informer import EventHandler
from velashard.kube.manager import Manager
from velashard.kube.store import Store, label_index
from velashard.kube.transforms import without
from velashard.observability import APPS_RECONCILED
from velashard.sharding.keys import AssignmentCheck
from velashard.sharding.shard_reconciler import ShardReconciler, check_dependent
from velashard.workflow.backoff import Settings
from velashard.workflow.egress import EgressPolicy
from velashard.workflow.executor import WorkflowEngine


# Another controller writes an app's resources in bursts (the Deployment controller's annotation, then its status,
# for each Deployment; the Ingress's status): their events wake the app once, this long after the first.
MANAGED_EVENT_DELAY = 0.25


@dataclass
class Options:
    workers: int = 4
    revision_limit: int = 10
    state_keep_interval: float = 60.0  # drift checks by polling, only without managed-resource caches
    waiting_requeue: float = 5.0
    shard_selector: str | None = None  # label selector restricting apps, revisions, trackers and managed resources
    # Managed resources carry their app's shard label, so each shard caches only its own apps' resources and
    # their events wake the app (health and drift are event-driven). Without caches live objects are read from
    # the API and settled apps are polled every state-keep interval.
    cache_managed: bool = True
    resync_period: float = 300.0  # --application-re-sync-period: every app is reconciled at least this often
    # Sharded: the controller's namespace, where the master publishes the key that proves shard assignments; an
    # app whose assignment has no valid proof is handed back to the scheduler instead of run (None: no check).
    assignment_key_namespace: str | None = None
    # Who apps act as (KubeVela's AuthenticateApplication, on by default): their recorded authors.
    auth: AuthConfig = AuthConfig()
    # --max-workflow-wait-backoff-time, --max-workflow-failed-backoff-time, --max-workflow-step-error-retry-times
    workflow: Settings = Settings()
    # where steps may send requests (--workflow-http-block-loopback, --workflow-http-block-private, ...)
    egress: EgressPolicy = EgressPolicy()
    # --workflow-deadline: an app whose run has not finished this long after it started gets WorkflowDeadline=False
    # (its annotation velashard.io/workflow-deadline says otherwise for one app); 0: no deadline.
    workflow_deadline: float = 1800.0
    # --unconverged-threshold: apps not converged for longer count in velashard_applications_not_converged.
    unconverged_threshold: float = 600.0


def _operated(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether status.workflow changed the way `velashard workflow` operations change it (suspend, resume,
    terminate, restart); a run finishing, which our own writes do, is not one."""
    before, after = old.get("status") or {}, new.get("status") or {}
    was, now = before.get("workflow") or {}, after.get("workflow") or {}
    # bool(): a run's first status write sets suspend and terminated to false where they were absent
    return ("workflow" in before and "workflow" not in after) or bool(was.get("suspend")) != bool(now.get("suspend")) \
        or bool(was.get("terminated")) != bool(now.get("terminated")) or \
        (bool(was.get("finished")) and not now.get("finished"))


def app_changed(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Skip the events of our own status writes; resyncs (old is new), workflow operations and everything else
    pass."""
    if old is None or old is new:
        return True
    strip = ("resourceVersion", "managedFields")
    old_meta = {k: v for k, v in old["metadata"].items() if k not in strip}
    new_meta = {k: v for k, v in new["metadata"].items() if k not in strip}
    return old_meta != new_meta or old.get("spec") != new.get("spec") or _operated(old, new)


def app_event_wakes(old: dict[str, Any] | None, new: dict[str, Any], finalizer_writes: OwnWrites) -> bool:
    """Whether an app's event queues its reconcile: `app_changed`, and not the echo of our own finalizer patch
    (the reconcile that wrote it goes on). A replay or resync (old is new) always does: a record of our write
    made after its event had passed (the answer came later than the event) stays, and would take the replay
    after a fence trip, which stands in for the work the trip dropped, for that echo, losing the app."""
    return old is new or (app_changed(old, new) and not finalizer_writes.is_echo(new))


def private_reads(store: Store) -> Callable[[str], dict[str, Any] | None]:
    """Reads of a cache that the reader may change: a packed store decodes anew at each read, another's
    objects are shared and copied."""
    if store.packed:
        return store.get
    return lambda key: copy.deepcopy(store.get(key))


DRAINING = "draining"


def draining(app: dict[str, Any]) -> list[str]:
    """The apps index of those asked to drain (the label's value is the shard they go to): held, not counted."""
    return [DRAINING] if labels.DRAIN in (app["metadata"].get("labels") or {}) else []


def app_key(obj: dict[str, Any]) -> list[str]:
    """The key of the app an object belongs to, from its labels."""
    lbls = obj["metadata"].get("labels") or {}
    if labels.APP_NAME in lbls:
        return [f'{lbls.get(labels.APP_NAMESPACE) or obj["metadata"].get("namespace", "")}/{lbls[labels.APP_NAME]}']
    return []


class ReconciledApps:
    """The gauge of apps this process holds and has reconciled: how a takeover shows it is complete."""

    def __init__(self) -> None:
        self._keys: set[str] = set()
        self._lock = threading.Lock()

    def mark(self, key: str, held: bool) -> None:
        with self._lock:
            if held:
                self._keys.add(key)
            else:
                self._keys.discard(key)
            APPS_RECONCILED.set(len(self._keys))

    def count(self) -> int:
        with self._lock:
            return len(self._keys)


class ApplicationController:
    def __init__(self, manager: Manager, options: Options):
        self.client = manager.client
        self.options = options
        self.discovery = Discovery(self.client)
        sel = options.shard_selector
        # The caches that grow with apps keep their objects packed (kube/packing.py).
        self.apps = manager.informer(APPLICATIONS, label_selector=sel, packed=True, indexers={DRAINING: draining})
        # Reconciles read a revision's number and hash, never the app spec it records (the CLI reads that live).
        self.revisions = manager.informer(APPLICATION_REVISIONS, label_selector=sel,
                                          indexers={"app": label_index(labels.APP_NAME)},
                                          transform=without(("spec", "application")), packed=True)
        self.trackers = manager.informer(RESOURCE_TRACKERS, label_selector=sel, packed=True)
        # Definitions of every namespace, each app seeing its own namespace's, then vela-system's (KubeVela's order).
        self.component_defs = manager.informer(COMPONENT_DEFINITIONS)
        self.trait_defs = manager.informer(TRAIT_DEFINITIONS)
        self.policy_defs = manager.informer(POLICY_DEFINITIONS)
        self.step_defs = manager.informer(WORKFLOW_STEP_DEFINITIONS)
        # the definitions as an app in a namespace sees them, read from the caches as they are looked up
        self.definitions = DefinitionSource(self.component_defs.store.get_by, self.trait_defs.store.get_by,
                                            self.policy_defs.store.get_by, self.step_defs.store.get_by,
                                            self.discovery.server_version)
        self.step_definition = self.definitions.step
        self.usage = UsageIndex()  # which apps use which definitions, from the apps' events
        self.apps.add_handler(self.usage.handler())
        self.reconciled = ReconciledApps()
        self.controller = Controller("application", self._chain(manager, options), options.workers)
        self.own_writes = OwnWrites()
        # Apps' own finalizer patches, apart: the applier records the apps a workflow applies in own_writes, and
        # such an app's events must wake it.
        self.finalizer_writes = OwnWrites()
        self.managed: ManagedCaches | None = None
        if options.cache_managed:
            # Unsharded, the same caches select every app's resources.
            self.managed = ManagedCaches(manager, sel or labels.APP_NAME, lambda informer: self.controller.watch(
                informer, to_keys=self._own_app_keys, predicate=lambda _old, new: not self.own_writes.is_echo(new),
                delay=MANAGED_EVENT_DELAY))
        self.engine = WorkflowEngine(options.workflow, egress=options.egress)
        self.applier = Applier(self.client, self.discovery, self.managed, check_dependent if sel else None,
                               self.own_writes)
        self.reconciler = ApplicationReconciler(
            self.client, self.discovery, private_reads(self.apps.store), self.definitions,
            Revisions(self.client, self.revisions, options.revision_limit, self.own_writes),
            Trackers(self.client, self.trackers, check_dependent if sel else None),
            self.applier,
            options.resync_period if options.cache_managed else min(options.state_keep_interval,
                                                                     options.resync_period),
            options.waiting_requeue, options.auth, self.step_definition, self.engine, self.finalizer_writes)
        self.reconciler.workflow_deadline = options.workflow_deadline
        shard = manager.shard_id
        PHASES.threshold(shard, options.unconverged_threshold)
        self.apps.add_handler(EventHandler(lambda app: PHASES.observe(shard, app),
                                           lambda _old, app: PHASES.observe(shard, app),
                                           lambda app: PHASES.forget(shard, app)))
        # steps' calls to the outside run apart from the workers; the app is enqueued again when one ends
        self.engine.outbound.wake = self.controller.enqueue
        self.controller.watch(self.apps, predicate=lambda old, new: app_event_wakes(old, new, self.finalizer_writes))
        self.controller.watch(self.revisions, to_keys=app_key,
                              predicate=lambda old, new: old is None and not self.own_writes.is_echo(new))
        for kind, informer in ((COMPONENT, self.component_defs), (TRAIT, self.trait_defs),
                               (POLICY, self.policy_defs), (STEP, self.step_defs)):
            # A definition's change wakes the apps that use it, no other (their revisions do not cover it); its
            # status (its TemplateValid condition) changes nothing an app renders.
            self.controller.watch(informer, to_keys=lambda obj, kind=kind, informer=informer: self._users(
                kind, informer, obj), predicate=lambda old, new: old is None or old.get("spec") != new.get("spec"))
        manager.add_controller(self.controller)

    def _users(self, kind: str, informer: Any, definition: dict[str, Any]) -> list[str]:
        meta = definition["metadata"]
        return self.usage.users(kind, meta.get("namespace") or SYSTEM_NAMESPACE, meta["name"],
                                lambda ns: informer.store.get_by(ns, meta["name"]) is not None)

    def _chain(self, manager: Manager, options: Options) -> Callable[[str], Result | None]:
        """What a worker calls for a key: sharded, the ownership check (an app not provably this shard's is
        handed back, not run), then the count of apps held, then the reconcile."""
        if not options.shard_selector:
            return self._counted
        check = None
        if options.assignment_key_namespace is not None:
            check = AssignmentCheck(manager, options.assignment_key_namespace, proven.verdicts())
            check.on_first_key(self._enqueue_all)  # the apps that waited for the key
        return ShardReconciler(self._counted, self.client, APPLICATIONS, self.apps.store.get,
                               on_release=self._release, check=check,
                               event=lambda app, *event: record_event(self.client, app, *event, must_record=True))

    def reconcile(self, key: str) -> Result | None:
        return self.controller.reconcile(key)

    def _enqueue_all(self) -> None:
        for key in self.apps.store.keys():
            self.controller.enqueue(key)

    def _own_app_keys(self, obj: dict[str, Any]) -> list[str]:
        """Only apps this shard caches react to their resources' events."""
        return [k for k in app_key(obj) if k in self.apps.store]

    def _counted(self, key: str) -> Result | None:
        """Reconcile, then count the app as held unless it is gone or draining (a lost race counts: the app
        was reconciled and will converge)."""
        try:
            result = self.reconciler(key)
        except (Retry, Terminal):
            self._mark(key)
            raise
        self._mark(key)
        return result

    def _mark(self, key: str) -> None:
        store = self.apps.store
        if key not in store:
            self._release(key)
        else:
            self.reconciled.mark(key, not store.indexed(DRAINING, DRAINING, key))

    def _release(self, key: str) -> None:
        """The app is gone from this process (deleted, drained or moved away): so are the kinds only it used and
        what was cached of it."""
        self.reconciled.mark(key, False)
        render_cache.forget(key)
        health.forget(key)
        ownership.forget(key)
        settled.forget(key)
        proven.verdicts().forget(key)
        if self.managed is not None:
            self.managed.forget(key)
