"""The Application controller: render, revision, apply, track, garbage-collect, check health, report.

Level-based: each reconcile reads the app and the world and converges, whatever event woke it.
Decisions live in the pure modules beside this one (rendering, workflow, health, revision,
ownership); this module does the reads and writes.
"""

from __future__ import annotations

import copy
import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from velashard.apis import labels
from velashard.apis.oam import (API_VERSION, APPLICATION_REVISIONS, APPLICATIONS, COMPONENT_DEFINITIONS,
                                RESOURCE_TRACKERS, SYSTEM_NAMESPACE, TRAIT_DEFINITIONS)
from velashard.core import ownership
from velashard.core.health import policy_health, resource_health
from velashard.core.rendering import (REF_OBJECTS, Definitions, RenderedApp, RenderedComponent, RenderError,
                                      complete_ref_objects, render_app)
from velashard.core.revision import app_hash, revision_name, revisions_to_prune
from velashard.core.workflow import StepStatus, WorkflowState, app_phase, validate_steps, workflow_steps
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.controller import DONE, Controller, Result, requeue_after
from velashard.kube.discovery import Discovery
from velashard.kube.manager import Manager
from velashard.kube.resources import DEPLOYMENTS, JOBS, SERVICES, STATEFULSETS, Resource
from velashard.kube.store import label_index
from velashard.observability import APPS_RECONCILED, fields

log = logging.getLogger("velashard.core.controller")

FINALIZER = "app.oam.dev/resource-tracker-finalizer"
MANAGED_KINDS = (DEPLOYMENTS, STATEFULSETS, JOBS, SERVICES)
POLICY_TYPES_SUPPORTED = ("topology", "override")


@dataclass
class Options:
    workers: int = 4
    revision_limit: int = 10
    state_keep_interval: float = 60.0
    waiting_requeue: float = 5.0
    shard_selector: str | None = None  # label selector restricting apps, revisions and trackers
    # Watching managed kinds caches every app's resources in every process, which defeats sharding;
    # without it live objects are read from the API and waiting apps are polled.
    cache_managed: bool = True
    resync_period: float = 300.0  # --application-re-sync-period: every app is reconciled at least this often


class MovedAway(Exception):
    """The app's dependents were relabelled for another shard: this shard must stop acting on it."""


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def tracker_name(app: dict[str, Any]) -> str:
    return f'{app["metadata"]["name"]}-{app["metadata"]["namespace"]}'


def _ref(obj: dict[str, Any]) -> dict[str, str]:
    meta = obj["metadata"]
    ref = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"]}
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    component = (meta.get("labels") or {}).get(labels.APP_COMPONENT)
    if component:
        ref["component"] = component
    return ref


def _ref_key(ref: dict[str, Any]) -> tuple[str, str, str, str]:
    return (ref["apiVersion"], ref["kind"], ref.get("namespace", ""), ref["name"])


def _app_changed(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Skip the events of our own status writes; resyncs (old is new) and everything else pass."""
    if old is None or old is new:
        return True
    strip = ("resourceVersion", "managedFields")
    old_meta = {k: v for k, v in old["metadata"].items() if k not in strip}
    new_meta = {k: v for k, v in new["metadata"].items() if k not in strip}
    resumed = ((old.get("status") or {}).get("workflow") or {}).get("suspend") != (
        (new.get("status") or {}).get("workflow") or {}).get("suspend")
    return old_meta != new_meta or old.get("spec") != new.get("spec") or resumed


def _app_key(obj: dict[str, Any]) -> list[str]:
    lbls = obj["metadata"].get("labels") or {}
    if labels.APP_NAME in lbls:
        return [f'{lbls.get(labels.APP_NAMESPACE) or obj["metadata"].get("namespace", "")}/{lbls[labels.APP_NAME]}']
    return []


class ApplicationController:
    def __init__(self, manager: Manager, options: Options):
        self.client: KubeClient = manager.client
        self.options = options
        self.discovery = Discovery(self.client)
        sel = options.shard_selector
        self.apps = manager.informer(APPLICATIONS, label_selector=sel)
        self.revisions = manager.informer(APPLICATION_REVISIONS, label_selector=sel,
                                          indexers={"app": label_index(labels.APP_NAME)})
        self.trackers = manager.informer(RESOURCE_TRACKERS, label_selector=sel)
        self.component_defs = manager.informer(COMPONENT_DEFINITIONS)
        self.trait_defs = manager.informer(TRAIT_DEFINITIONS)
        self.controller = Controller("application", self.reconcile, options.workers)
        self.controller.watch(self.apps, predicate=_app_changed)
        self.controller.watch(self.revisions, to_keys=_app_key, predicate=lambda old, new: old is None)
        self.managed: dict[Resource, Any] = {}
        for res in MANAGED_KINDS if options.cache_managed else ():
            informer = manager.informer(res, label_selector=labels.APP_NAME)
            self.managed[res] = informer
            self.controller.watch(informer, to_keys=lambda obj: self._own_app_keys(obj))
        for informer in (self.component_defs, self.trait_defs):
            self.controller.watch(informer, to_keys=lambda _obj: self.apps.store.keys())
        manager.add_controller(self.controller)
        self._reconciled: set[str] = set()
        self._reconciled_lock = threading.Lock()
        self._read = threading.local()  # live objects read or written during this thread's reconcile

    def _own_app_keys(self, obj: dict[str, Any]) -> list[str]:
        """Only apps this shard caches react to their resources' events."""
        return [k for k in _app_key(obj) if self.apps.store.get(k) is not None]

    def definitions(self) -> Definitions:
        return Definitions.from_objects(self.component_defs.store.list(), self.trait_defs.store.list())

    # --- reconcile -------------------------------------------------------------------------------

    def reconcile(self, key: str) -> Result:
        self._read.objects = {}
        try:
            result = self._reconcile(key)
        except MovedAway as err:
            log.info("application is moving to another shard; letting go", extra=fields(key=key, why=str(err)))
            self._count_reconciled(key, False)
            return DONE
        app = self.apps.store.get(key)
        self._count_reconciled(key, app is not None and labels.DRAIN not in (app["metadata"].get("labels") or {}))
        return result

    def _count_reconciled(self, key: str, held: bool) -> None:
        """Keeps the gauge of apps this shard holds and has reconciled: how a takeover shows it is complete."""
        with self._reconciled_lock:
            if held:
                self._reconciled.add(key)
            else:
                self._reconciled.discard(key)
            APPS_RECONCILED.set(len(self._reconciled))

    def _reconcile(self, key: str) -> Result:
        app = self.apps.store.get(key)
        if app is None:
            return DONE
        app = copy.deepcopy(app)
        if app["metadata"].get("deletionTimestamp"):
            return self._finalize(app)
        if self.options.shard_selector and labels.DRAIN in (app["metadata"].get("labels") or {}):
            return self._let_go(app)
        if FINALIZER not in (app["metadata"].get("finalizers") or []):
            self.client.patch(APPLICATIONS, app["metadata"]["name"], {"metadata": {
                "finalizers": list(app["metadata"].get("finalizers") or []) + [FINALIZER],
                "resourceVersion": app["metadata"]["resourceVersion"]}}, app["metadata"]["namespace"])
            return DONE  # the update event brings the app back
        return self._converge(app)

    def _let_go(self, app: dict[str, Any]) -> Result:
        """Drain handshake: nothing of this app is in flight here (one key, one worker), so acknowledge by
        removing our shard id and the drain label; the master schedules it anew."""
        meta = app["metadata"]
        try:
            self.client.patch(APPLICATIONS, meta["name"], {"metadata": {
                "labels": {labels.SCHEDULED_SHARD_ID: None, labels.DRAIN: None},
                "resourceVersion": meta["resourceVersion"]}}, meta["namespace"])
        except errors.NotFound:
            return DONE
        log.info("drained application", extra=fields(key=f'{meta["namespace"]}/{meta["name"]}',
                                                      to=meta["labels"][labels.DRAIN]))
        return DONE

    def _converge(self, app: dict[str, Any]) -> Result:
        meta, spec = app["metadata"], app.get("spec") or {}
        status: dict[str, Any] = copy.deepcopy(app.get("status") or {})
        conditions: list[dict[str, Any]] = []
        defs = self.definitions()
        digest = app_hash(spec, defs.fingerprint())
        latest = status.get("latestRevision") or {}
        revision = latest.get("revision", 0) if latest.get("revisionHash") == digest else \
            self._revision_number(app, digest)
        unsupported = [p.get("type") for p in spec.get("policies") or []
                       if p.get("type") not in POLICY_TYPES_SUPPORTED or p.get("type") == "topology"
                       and (p.get("properties") or {}).get("clusters", ["local"]) != ["local"]]
        if unsupported:
            conditions.append(_condition("PoliciesSupported", False, "UnsupportedPolicy",
                                         f'policies of type {", ".join(sorted(map(str, unsupported)))} are kept but '
                                         'not supported (no multi-cluster; topology only with clusters ["local"]); '
                                         "they have no effect"))
        step_problem = validate_steps(spec)
        try:
            if step_problem:
                raise RenderError("InvalidParameter", step_problem, "-", field="workflow.steps")
            effective = _with_overrides(app)
            rendered = render_app(effective, defs, revision)
            self._resolve_ref_objects(effective, rendered, defs, revision)
        except RenderError as err:
            log.warning("render failed", extra=fields(key=f'{meta["namespace"]}/{meta["name"]}', reason=err.reason,
                                                       error=str(err)))
            conditions.append(_condition("Rendered", False, err.reason, str(err)))
            return self._write_status(app, status, "rendering", conditions, DONE)
        except errors.KubeError as err:
            conditions.append(_condition("Rendered", False, "RefObjectsFailed", err.message))
            return self._write_status(app, status, "rendering", conditions,
                                      requeue_after(self.options.waiting_requeue))
        conditions.append(_condition("Rendered", True, "Rendered", ""))
        if latest.get("revisionHash") != digest:
            self._record_revision(app, revision, digest, defs.fingerprint())
            status["latestRevision"] = {"name": revision_name(meta["name"], revision), "revision": revision,
                                        "revisionHash": digest}
            status.pop("workflow", None)  # a new revision runs its workflow anew
        return self._run_workflow(app, status, rendered, conditions)

    def _run_workflow(self, app: dict[str, Any], status: dict[str, Any], rendered: RenderedApp,
                      conditions: list[dict[str, Any]]) -> Result:
        by_name = {c.name: c for c in rendered.components}
        previous_steps = {s["name"]: s for s in (status.get("workflow") or {}).get("steps") or []}
        resumed = (status.get("workflow") or {}).get("suspend") is False
        tracker = self._tracker(app)
        previous_refs = {_ref_key(r): r for r in (tracker.get("spec") or {}).get("managedResources") or []}
        desired_refs = {_ref_key(_ref(o)): _ref(o) for c in rendered.components for o in c.objects}
        tracker = self._save_tracker(app, tracker, {**previous_refs, **desired_refs})
        state = WorkflowState()
        health: dict[str, tuple[bool, str]] = {}
        applied: set[str] = set()
        for step in workflow_steps(app.get("spec") or {}):
            if state.failed or state.suspended or (state.steps and state.steps[-1].phase != "succeeded"):
                state.steps.append(StepStatus(step.name, step.type, "pending"))
                continue
            if step.type == "suspend":
                done = previous_steps.get(step.name, {}).get("phase") == "succeeded" or (
                    resumed and previous_steps.get(step.name, {}).get("phase") == "suspending")
                phase = "succeeded" if done else "suspending"
                state.suspended = not done
                state.steps.append(StepStatus(step.name, step.type, phase))
                continue
            waiting = []
            for name in step.components:
                comp = by_name[name]
                blocked = [d for d in comp.depends_on if not health.get(d, self._health(by_name[d]))[0]]
                if blocked:
                    waiting.append(f'{name} waits for {", ".join(blocked)}')
                    continue
                problem = self._apply_component(app, comp)
                if problem:
                    state.failed = True
                    state.message = problem
                    break
                applied.add(name)
                health[name] = self._health(comp)
                if not health[name][0]:
                    waiting.append(f"{name}: {health[name][1]}")
            if state.failed:
                state.steps.append(StepStatus(step.name, step.type, "failed", state.message))
            elif waiting:
                state.steps.append(StepStatus(step.name, step.type, "running", "; ".join(waiting)))
            else:
                state.steps.append(StepStatus(step.name, step.type, "succeeded"))
        state.finished = bool(state.steps) and all(s.phase == "succeeded" for s in state.steps)
        if state.finished:
            self._collect_garbage(app, previous_refs, desired_refs)
            self._save_tracker(app, tracker, desired_refs)
        for comp in rendered.components:
            if comp.name not in health:
                health[comp.name] = self._health(comp)
        all_healthy = all(h for h, _ in health.values())
        phase = app_phase(state, all_healthy)
        status["workflow"] = {"steps": [s.as_dict() for s in state.steps], "finished": state.finished,
                              "suspend": state.suspended, "message": state.message}
        status["services"] = [{"name": c.name, "type": c.type, "healthy": health[c.name][0],
                               "message": health[c.name][1], "traits": [{"type": t} for t in c.traits]}
                              for c in rendered.components]
        status["appliedResources"] = sorted(desired_refs.values(), key=lambda r: _ref_key(r))
        conditions.append(_condition("WorkflowFinished", state.finished, "Failed" if state.failed else
                                     ("Suspended" if state.suspended else ("Finished" if state.finished
                                                                           else "Running")), state.message))
        conditions.append(_condition("Healthy", all_healthy, "Healthy" if all_healthy else "Unhealthy",
                                     "; ".join(f"{n}: {m}" for n, (h, m) in sorted(health.items()) if not h)))
        # Settled apps come back every state-keep interval to undo drift; others sooner, to see progress.
        settled = phase in ("running", "workflowSuspending", "workflowFailed")
        result = requeue_after(self.options.state_keep_interval if settled else self.options.waiting_requeue)
        return self._write_status(app, status, phase, conditions, result)

    # --- pieces ----------------------------------------------------------------------------------

    def _revision_number(self, app: dict[str, Any], digest: str) -> int:
        """The revision recorded for `digest` (a status write may have failed after recording it), else the next."""
        existing = [r for r in self.revisions.store.by_index("app", app["metadata"]["name"])
                    if r["metadata"].get("namespace") == app["metadata"]["namespace"]]
        for rev in existing:
            if (rev.get("spec") or {}).get("hash") == digest:
                return int(rev["spec"]["revision"])
        latest = (app.get("status") or {}).get("latestRevision", {}).get("revision", 0)
        return max([latest] + [(r.get("spec") or {}).get("revision", 0) for r in existing]) + 1

    def _record_revision(self, app: dict[str, Any], revision: int, digest: str, fingerprint: str) -> None:
        meta = app["metadata"]
        name = revision_name(meta["name"], revision)
        body = {"apiVersion": API_VERSION, "kind": "ApplicationRevision",
                "metadata": {"name": name, "namespace": meta["namespace"], "labels": self._labels_for(app),
                             "ownerReferences": [{"apiVersion": API_VERSION, "kind": "Application",
                                                  "name": meta["name"], "uid": meta["uid"], "controller": True,
                                                  "blockOwnerDeletion": True}]},
                "spec": {"revision": revision, "hash": digest, "definitions": fingerprint,
                         "application": {"metadata": {"name": meta["name"], "namespace": meta["namespace"],
                                                      "labels": meta.get("labels") or {},
                                                      "annotations": meta.get("annotations") or {}},
                                         "spec": app.get("spec") or {}}}}
        try:
            self.client.create(APPLICATION_REVISIONS, body)
        except errors.AlreadyExists:
            pass  # written by an earlier attempt of this same reconcile
        existing = {r["metadata"]["name"]: r for r in self.revisions.store.by_index("app", meta["name"])
                    if r["metadata"].get("namespace") == meta["namespace"]}
        existing[name] = body  # the cache may or may not have seen it yet
        for old in revisions_to_prune(list(existing.values()), self.options.revision_limit, keep=name):
            try:
                self.client.delete(APPLICATION_REVISIONS, old, meta["namespace"])
            except errors.NotFound:
                pass

    def _labels_for(self, app: dict[str, Any]) -> dict[str, str]:
        """Labels for the app's revisions and trackers: its name, namespace and shard."""
        out = {labels.APP_NAME: app["metadata"]["name"], labels.APP_NAMESPACE: app["metadata"]["namespace"]}
        shard = (app["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID)
        if shard:
            out[labels.SCHEDULED_SHARD_ID] = shard
        return out

    def _tracker(self, app: dict[str, Any]) -> dict[str, Any]:
        name = tracker_name(app)
        cached = self.trackers.store.get(name)
        if cached is not None:
            return copy.deepcopy(cached)
        try:
            tracker = self.client.get(RESOURCE_TRACKERS, name)
        except errors.NotFound:
            return {"apiVersion": API_VERSION, "kind": "ResourceTracker",
                    "metadata": {"name": name, "labels": self._labels_for(app)}, "spec": {"managedResources": []}}
        mine = (app["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID)
        theirs = (tracker["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID)
        if self.options.shard_selector and theirs != mine:
            # Not in our label-selected cache and labelled for another shard: the app is moving there.
            raise MovedAway(f"tracker {name} belongs to shard {theirs}")
        return tracker

    def _save_tracker(self, app: dict[str, Any], tracker: dict[str, Any],
                      refs: dict[tuple[str, str, str, str], dict[str, Any]]) -> dict[str, Any]:
        wanted = sorted(refs.values(), key=_ref_key)
        if (tracker.get("spec") or {}).get("managedResources") == wanted and "resourceVersion" in tracker["metadata"] \
                and tracker["metadata"].get("labels") == self._labels_for(app):
            return tracker
        tracker = dict(tracker, spec={"managedResources": wanted})
        tracker["metadata"] = dict(tracker["metadata"], labels=self._labels_for(app))
        if "resourceVersion" in tracker["metadata"]:
            return self.client.update(RESOURCE_TRACKERS, tracker)
        return self.client.create(RESOURCE_TRACKERS, tracker)

    def _live(self, res: Resource, name: str, namespace: str | None) -> dict[str, Any] | None:
        """The live object: from the cache for managed kinds we watch, else what this reconcile already read
        or wrote, else from the API."""
        informer = self.managed.get(res)
        if informer is not None and informer.has_synced():
            cached = informer.store.get_by(namespace, name)
            if cached is not None:
                return cached
        seen = getattr(self._read, "objects", {})
        key = (res.plural, res.group, namespace, name)
        if key in seen:
            return seen[key]
        try:
            live = self.client.get(res, name, namespace)
        except errors.NotFound:
            return None
        seen[key] = live
        return live

    def _wrote(self, res: Resource, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        getattr(self._read, "objects", {})[(res.plural, res.group, meta.get("namespace"), meta["name"])] = obj

    def _resource(self, obj: dict[str, Any]) -> Resource:
        return self.discovery.for_kind(obj["apiVersion"], obj["kind"])

    def _apply_component(self, app: dict[str, Any], comp: RenderedComponent) -> str | None:
        """Apply a component's objects; returns a problem message instead of raising for user errors."""
        for desired in comp.objects:
            try:
                res = self._resource(desired)
            except errors.NotFound:
                return f'component "{comp.name}": the server has no resource for {desired["apiVersion"]} ' \
                       f'{desired["kind"]}'
            meta = desired["metadata"]
            namespace = meta.get("namespace") if res.namespaced else None
            if not res.namespaced:
                meta.pop("namespace", None)
            live = self._live(res, meta["name"], namespace)
            other = ownership.conflicting_owner(live, app["metadata"]["namespace"], app["metadata"]["name"])
            if other is not None:
                message = (f'component "{comp.name}": {desired["kind"]} {meta.get("namespace", "")}/{meta["name"]} '
                           f"is owned by application {other[0]}/{other[1]}; not adopting it")
                self._event(app, "Warning", "ResourceConflict", message)
                return message
            try:
                if live is None:
                    try:
                        self._wrote(res, self.client.create(res, ownership.with_last_applied(desired)))
                        continue
                    except errors.AlreadyExists:
                        live = self.client.get(res, meta["name"], namespace)  # the cache lagged behind
                        other = ownership.conflicting_owner(live, app["metadata"]["namespace"],
                                                            app["metadata"]["name"])
                        if other is not None:
                            return (f'component "{comp.name}": {desired["kind"]} {meta["name"]} is owned by '
                                    f"application {other[0]}/{other[1]}; not adopting it")
                if live is not None:
                    merged = ownership.merged_for_update(desired, live)
                    if ownership.needs_update(merged, live):
                        self._wrote(res, self.client.update(res, merged))
            except errors.Invalid as err:
                return f'component "{comp.name}": {desired["kind"]} {meta["name"]} is invalid: {err.message}'
            except (errors.Conflict, errors.AlreadyExists):
                raise  # a race with another writer: retry the reconcile
            except errors.BadRequest as err:
                return f'component "{comp.name}": {desired["kind"]} {meta["name"]}: {err.message}'
        return None

    def _health(self, comp: RenderedComponent) -> tuple[bool, str]:
        messages = []
        healthy = True
        policy = ((self.component_defs.store.get_by(SYSTEM_NAMESPACE, comp.type) or {}).get("spec") or {}).get(
            "status", {}).get("healthPolicy")
        for obj in comp.objects:
            try:
                res = self._resource(obj)
                live = self._live(res, obj["metadata"]["name"], obj["metadata"].get("namespace")
                                  if res.namespaced else None)
            except errors.NotFound:
                live = None
            if obj is comp.workload and policy and live is not None:
                ok, message = policy_health(policy, live)
            else:
                ok, message = resource_health(live)
            healthy = healthy and ok
            if obj is comp.workload or not ok:
                messages.append(message)
        return healthy, "; ".join(messages)

    def _collect_garbage(self, app: dict[str, Any], previous: dict[tuple, dict[str, Any]],
                         desired: dict[tuple, dict[str, Any]]) -> None:
        for key, ref in previous.items():
            if key not in desired:
                self._delete_managed(app, ref)

    def _delete_managed(self, app: dict[str, Any], ref: dict[str, Any]) -> None:
        """Delete what we recorded, unless it now belongs to another app (never delete others' resources)."""
        try:
            res = self.discovery.for_kind(ref["apiVersion"], ref["kind"])
            live = self.client.get(res, ref["name"], ref.get("namespace"))
        except errors.NotFound:
            return
        if ownership.conflicting_owner(live, app["metadata"]["namespace"], app["metadata"]["name"]):
            return
        try:
            self.client.delete(res, ref["name"], ref.get("namespace"), propagation_policy="Background",
                               preconditions={"uid": live["metadata"]["uid"]})
            log.info("garbage-collected resource", extra=fields(
                key=f'{app["metadata"]["namespace"]}/{app["metadata"]["name"]}',
                resource=f'{ref["kind"]}/{ref.get("namespace", "")}/{ref["name"]}'))
        except (errors.NotFound, errors.Conflict):
            pass

    def _finalize(self, app: dict[str, Any]) -> Result:
        """Delete what the app owns, then its trackers and revisions, then drop the finalizer."""
        meta = app["metadata"]
        if FINALIZER not in (meta.get("finalizers") or []):
            return DONE
        tracker = self._tracker(app)
        for ref in (tracker.get("spec") or {}).get("managedResources") or []:
            self._delete_managed(app, ref)
        if "resourceVersion" in tracker["metadata"]:
            try:
                self.client.delete(RESOURCE_TRACKERS, tracker["metadata"]["name"])
            except errors.NotFound:
                pass
        for rev in self.revisions.store.by_index("app", meta["name"]):
            if rev["metadata"].get("namespace") == meta["namespace"]:
                try:
                    self.client.delete(APPLICATION_REVISIONS, rev["metadata"]["name"], meta["namespace"])
                except errors.NotFound:
                    pass
        remaining = [f for f in meta["finalizers"] if f != FINALIZER]
        self.client.patch(APPLICATIONS, meta["name"], {"metadata": {"finalizers": remaining or None,
                                                                    "resourceVersion": meta["resourceVersion"]}},
                          meta["namespace"])
        log.info("application deleted", extra=fields(key=f'{meta["namespace"]}/{meta["name"]}'))
        return DONE

    def _resolve_ref_objects(self, app: dict[str, Any], rendered: RenderedApp, defs: Definitions,
                             revision: int) -> None:
        """Read what ref-objects components reference, then finish them with their traits."""
        for i, comp in enumerate(rendered.components):
            spec = comp.workload.get(REF_OBJECTS)
            if spec is None:
                continue
            copies = []
            for ref in spec.get("objects") or []:
                copies.extend(self._fetch_refs(ref, app["metadata"]["namespace"], comp.name))
            if not copies:
                raise RenderError("InvalidParameter", "ref-objects selected no object", comp.name, field="objects")
            rendered.components[i] = complete_ref_objects(app, comp, copies, defs, revision)

    def _fetch_refs(self, ref: dict[str, Any], namespace: str, component: str) -> list[dict[str, Any]]:
        if ref.get("resource"):
            res = self.discovery.for_resource(ref.get("group", ""), ref["resource"])
        elif ref.get("kind"):
            res = self.discovery.for_kind(ref.get("apiVersion", "v1"), ref["kind"])
        else:
            raise RenderError("InvalidParameter", "each object needs resource (and group) or apiVersion and kind",
                              component, field="objects")
        ns = ref.get("namespace") or namespace
        if ref.get("name"):
            found = [self.client.get(res, ref["name"], ns if res.namespaced else None)]
        else:
            selector = ",".join(f"{k}={v}" for k, v in sorted((ref.get("labelSelector") or {}).items()))
            found = self.client.list_all(res, ns if res.namespaced else None, label_selector=selector or None)[0]
        return [_copy_of(obj) for obj in found]

    def _event(self, app: dict[str, Any], etype: str, reason: str, message: str) -> None:
        meta = app["metadata"]
        try:
            self.client.create(Resource("", "v1", "events", "Event"), {
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"generateName": f'{meta["name"]}.', "namespace": meta["namespace"]},
                "involvedObject": {"apiVersion": API_VERSION, "kind": "Application", "name": meta["name"],
                                   "namespace": meta["namespace"], "uid": meta["uid"]},
                "type": etype, "reason": reason, "message": message[:1000],
                "source": {"component": "velashard"}, "firstTimestamp": _now(), "lastTimestamp": _now(), "count": 1})
        except errors.KubeError as err:
            log.warning("could not record event", extra=fields(reason=reason, error=str(err)))

    def _write_status(self, app: dict[str, Any], status: dict[str, Any], phase: str,
                      conditions: list[dict[str, Any]], result: Result) -> Result:
        previous = {c["type"]: c for c in (app.get("status") or {}).get("conditions") or []}
        for cond in conditions:
            old = previous.get(cond["type"])
            if old and old.get("status") == cond["status"]:
                cond["lastTransitionTime"] = old.get("lastTransitionTime", cond["lastTransitionTime"])
        status.update(status=phase, observedGeneration=app["metadata"].get("generation"), conditions=conditions)
        if status != (app.get("status") or {}):
            body = dict(app, status=status)
            try:
                self.client.update_status(APPLICATIONS, body)
            except errors.Conflict:
                return Result(requeue=True)  # the app changed meanwhile; converge again
            except errors.NotFound:
                return DONE
        return result


def _condition(ctype: str, ok: bool, reason: str, message: str) -> dict[str, Any]:
    return {"type": ctype, "status": "True" if ok else "False", "reason": reason, "message": message,
            "lastTransitionTime": _now()}


def _copy_of(obj: dict[str, Any]) -> dict[str, Any]:
    """A reference object as a template: identity, server-set fields and status dropped."""
    meta = obj["metadata"]
    clean = {k: v for k, v in obj.items() if k not in ("status", "metadata")}
    clean["metadata"] = {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if k in meta}
    annotations = clean["metadata"].get("annotations") or {}
    annotations.pop(ownership.LAST_APPLIED, None)
    annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    return clean


def _with_overrides(app: dict[str, Any]) -> dict[str, Any]:
    """Apply `override` policies: per-component property and trait overrides, merged into the spec."""
    overrides = [p for p in (app.get("spec") or {}).get("policies") or [] if p.get("type") == "override"]
    if not overrides:
        return app
    app = copy.deepcopy(app)
    for policy in overrides:
        for item in (policy.get("properties") or {}).get("components") or []:
            for comp in app["spec"].get("components") or []:
                if item.get("name") not in (None, comp.get("name")) or item.get("type") not in (None, comp.get("type")):
                    continue
                comp["properties"] = {**(comp.get("properties") or {}), **(item.get("properties") or {})}
                for trait in item.get("traits") or []:
                    existing = next((t for t in comp.setdefault("traits", []) if t.get("type") == trait.get("type")),
                                    None)
                    if existing is None:
                        comp["traits"].append(copy.deepcopy(trait))
                    else:
                        existing["properties"] = {**(existing.get("properties") or {}),
                                                  **(trait.get("properties") or {})}
    return app
