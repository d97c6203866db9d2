"""The Application reconcile, step by step: finalize or claim, parse the workflow, render, record a revision,
run the workflow (the pass's ResourceKeeper records and dispatches, its HealthReader reads health), collect
garbage, write status.

Level-based: each reconcile reads the app and the world and converges, whatever event woke it. Outcomes
follow kube/controller.py's model: a Result when done, Retry or Terminal when not.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timezone
from typing import Any, Callable

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.core import status as app_status
from velashard.core.apply import Applier
from velashard.core.authors import AuthConfig, author_of, refusal, unrecorded_author
from velashard.core.context import ReconcileContext, noting_refusals
from velashard.core.echoes import OwnWrites
from velashard.core.events import record_event, timestamp
from velashard.core.health import HealthReader
from velashard.core.keeper import ResourceKeeper, refs_of
from velashard.core.policies import policy_problem, unsupported_policies, with_overrides
from velashard.core.refobjects import resolve_ref_objects
from velashard.core.definitions import Definitions
from velashard.core.rendered import RenderedApp, RenderError
from velashard.core.rendering import render_app, render_component, render_policies
from velashard.core.revisions import Revisions, app_hash, revision_name
from velashard.core.tracker import Trackers, ref_key
from velashard.core.usage import used_definitions
from velashard.core import appworkflow as aw
from velashard.core import settled
from velashard.core.runworkflow import WorkflowRunner
from velashard.kube import errors
from velashard.kube.client import KubeClient, requests_sent, writes_sent
from velashard.kube.controller import DONE, Result, Retry, Terminal, requeue_after
from velashard.kube.discovery import Discovery
from velashard.kube.events import record
from velashard.observability import SETTLED_PASSES, fields
from velashard.patch.copying import copy_json
from velashard.workflow import phases as ph
from velashard.workflow.executor import WorkflowEngine
from velashard.workflow.spec import Workflow, parse_workflow
from velashard.workflow.templates import Lookup

log = logging.getLogger("velashard.core.reconciler")

FINALIZER = labels.RESOURCE_TRACKER_FINALIZER


class ApplicationReconciler:
    def __init__(self, client: KubeClient, discovery: Discovery, lookup: Callable[[str], dict[str, Any] | None],
                 definitions: Callable[[str], Definitions], revisions: Revisions, trackers: Trackers,
                 applier: Applier, state_keep_interval: float, waiting_requeue: float, auth: AuthConfig = AuthConfig(),
                 step_definition: Lookup = lambda _type, _namespace: None, engine: WorkflowEngine | None = None,
                 finalizer_writes: OwnWrites | None = None):
        self.client, self.discovery, self.lookup, self.definitions = client, discovery, lookup, definitions
        self.finalizer_writes = finalizer_writes  # the app's finalizer patch, whose event then wakes no one
        self.revisions, self.trackers, self.applier = revisions, trackers, applier
        self.engine = engine or WorkflowEngine()
        self.workflows = WorkflowRunner(discovery, self.engine, step_definition)
        self.state_keep_interval, self.waiting_requeue = state_keep_interval, waiting_requeue
        self.auth = auth
        self.workflow_deadline = 0.0  # --workflow-deadline: a run unfinished longer gets WorkflowDeadline=False

    def context(self, app: dict[str, Any]) -> ReconcileContext:
        """The reconcile's state, with the client that acts as the app's author (with authentication off: as
        the controller itself) and hears every refusal."""
        ctx = ReconcileContext(app, self.definitions(app["metadata"].get("namespace") or "default"), self.client)
        ctx.author = self.client.acting_as(author_of(app, self.auth) if self.auth.enabled else None,
                                           noting_refusals(ctx.forbidden))
        return ctx

    def __call__(self, key: str) -> Result:
        app = self.lookup(key)  # a private copy (controller.private_reads)
        if app is None:
            return DONE
        ctx = self.context(app)
        try:
            if app["metadata"].get("deletionTimestamp"):
                return self.finalize(ctx)
            if FINALIZER not in (app["metadata"].get("finalizers") or []):
                # The reconcile goes on with the patched app: waiting for the patch's own event would send a new
                # app through the work queue twice before anything of it is applied.
                app = self.client.patch(APPLICATIONS, app["metadata"]["name"], {"metadata": {
                    "finalizers": list(app["metadata"].get("finalizers") or []) + [FINALIZER],
                    "resourceVersion": app["metadata"]["resourceVersion"]}}, app["metadata"]["namespace"])
                if self.finalizer_writes is not None:
                    self.finalizer_writes.wrote(app)
                ctx = self.context(app)
                self.placed_at_admission(app)
            problem = refusal(app, self.auth)
            if problem:
                self.write_status(ctx, copy_json(app.get("status") or {}), "rendering", [app_status.condition(
                    "Authorized", False, "ServiceAccountRefused", problem, timestamp())])
                raise Terminal(problem)
            used = used_definitions(app.get("spec") or {}, ctx.definitions)
            digest = app_hash(app.get("spec") or {}, used)
            requeue = settled.unchanged(app, digest + self.settings(), self.trackers, self.applier)
            if requeue is not None:  # nothing it read changed since a pass that changed nothing
                SETTLED_PASSES.inc()
                return requeue_after(requeue)
            return self.converge(ctx, used, digest)
        except errors.Forbidden as err:
            # Refused where no step reports it (garbage collection, deletion): the status says so all the same.
            status = copy_json(app.get("status") or {})
            kept = [c for c in status.get("conditions") or [] if c.get("type") != "Authorized"]
            self.write_status(ctx, status, status.get("status") or "rendering", kept)
            raise Retry(f"the author was refused: {err.message}") from err

    def placed_at_admission(self, app: dict[str, Any]) -> None:
        """The Scheduled Event of an app the master's webhook placed, recorded by its shard at its first reconcile
        (the webhook cannot: the app does not exist yet while it is admitted). One request per new app; the
        scheduler records its own placements and moves (sharding/move.py)."""
        meta = app["metadata"]
        shard = (meta.get("labels") or {}).get(labels.SCHEDULED_SHARD_ID)
        if shard and (meta.get("annotations") or {}).get(labels.ASSIGNED_BY_WEBHOOK) == shard:
            record(self.client, app, APPLICATIONS, "Normal", "Scheduled", f"scheduled to shard {shard} at admission",
                   "velashard-webhook", {labels.EVENT_TO_SHARD: shard, labels.EVENT_MOVE_REASON: "admission"})

    def finalize(self, ctx: ReconcileContext) -> Result:
        """Delete what the app owns (as its author), then its trackers and revisions, then drop the finalizer."""
        app = ctx.app
        meta = app["metadata"]
        if FINALIZER not in (meta.get("finalizers") or []):
            return DONE
        ResourceKeeper(ctx, self.trackers, self.applier).delete_all()
        workflow = (app.get("status") or {}).get("workflow") or {}
        self.engine.delete_context(ctx.author, workflow)  # its owner reference would have it collected too
        self.engine.forget(app, workflow)
        self.revisions.delete_all(app)
        remaining = [f for f in meta["finalizers"] if f != FINALIZER]
        self.client.patch(APPLICATIONS, meta["name"], {"metadata": {"finalizers": remaining or None,
                                                                    "resourceVersion": meta["resourceVersion"]}},
                          meta["namespace"])
        log.info("application deleted", extra=fields(key=f'{meta["namespace"]}/{meta["name"]}'))
        return DONE

    def converge(self, ctx: ReconcileContext, used: dict[str, Any], digest: str) -> Result:
        """A pass over the app whose definitions in use are `used`, hashed with its spec into `digest`."""
        app, defs = ctx.app, ctx.definitions
        spec = app.get("spec") or {}
        status: dict[str, Any] = copy_json(app.get("status") or {})
        conditions: list[dict[str, Any]] = []
        moment = datetime.now(timezone.utc)  # one "now" for the whole pass: conditions, steps, restarts
        now = timestamp(moment)
        hashed = digest
        sent, wrote = requests_sent(), writes_sent()
        latest = status.get("latestRevision") or {}
        if latest.get("revisionHash") not in (None, digest) and self.revisions.still_current(app, latest.get(
                "name", ""), defs):
            digest = latest["revisionHash"]  # recorded by an earlier version of velashard, and nothing changed
        revision = latest.get("revision", 0) if latest.get("revisionHash") == digest else \
            self.revisions.number(app, digest)
        unsupported = unsupported_policies(spec)
        if unsupported:
            conditions.append(app_status.condition(
                "PoliciesSupported", False, "UnsupportedPolicy",
                f'policies of type {", ".join(unsupported)} are kept but not supported (no multi-cluster; '
                'topology only with clusters ["local"]); they have no effect', now))
        try:
            workflow = self.parse(spec)
            rendered, problems = self.render(ctx, workflow, revision)
        except RenderError as err:
            conditions.append(app_status.condition("Rendered", False, err.reason, str(err), now))
            self.write_status(ctx, status, "rendering", conditions)
            raise Terminal(f"render failed: {err.reason}: {err}") from err
        except errors.KubeError as err:
            conditions.append(app_status.condition("Rendered", False, "RefObjectsFailed", err.message, now))
            self.write_status(ctx, status, "rendering", conditions)
            # A refusal is retried with backoff (the author may be granted the right), anything else soon.
            raise Retry(f"reading referenced objects failed: {err.message}",
                        after=None if ctx.forbidden else self.waiting_requeue) from err
        notes = [n for c in rendered.components for n in c.notes]
        if problems:  # a workflow with steps goes on: the step that applies such a component fails, saying why
            conditions.append(app_status.condition("Rendered", False, problems[0].reason,
                                                   "; ".join(str(p) for p in problems), now))
        else:
            conditions.append(app_status.condition("Rendered", True, "Rendered", "; ".join(notes), now))
        if latest.get("revisionHash") != digest:
            self.revisions.record(app, revision, digest, used)
            status["latestRevision"] = {"name": revision_name(ctx.name, revision), "revision": revision,
                                        "revisionHash": digest}
        run = aw.run_revision(app, revision_name(ctx.name, revision))
        due, take_off = self.restart_requested(ctx, status, moment)
        if (status.get("workflow") or {}).get("appRevision") != run or due == 0:
            # a new revision (or publishVersion), or a restart: the workflow runs anew
            for key in ("workflow", "services", "appliedResources"):
                status.pop(key, None)
        result = self.run_workflow(ctx, workflow, status, rendered, conditions, moment, run, revision, due)
        if take_off:
            self.take_restart_off(ctx)
        elif workflow.default and result.requeue_after == self.state_keep_interval:
            if requests_sent() == sent and (app.get("status") or {}).get("status") in app_status.SETTLED_PHASES:
                # settled, and nothing read past the caches or written: the next pass over the same versions is
                # this one
                reads = settled.reads_of(list(ctx.objects.values()), ctx.absent)
                settled.remember(app, hashed + self.settings(), reads, self.trackers.version(app),
                                 result.requeue_after)
            elif writes_sent() != wrote and settled.confirm_soon(ctx.key):
                return requeue_after(settled.CONFIRM_AFTER)  # settled by what it wrote: confirmed by a quiet pass
        return result

    def settings(self) -> str:
        """What of this process's configuration a pass's answer depends on, and the API server's version."""
        version = (self.discovery.server_version() or {}).get("gitVersion", "")
        return f"|{self.auth!r}|{self.state_keep_interval}|{self.waiting_requeue}|{self.workflow_deadline}|{version}"

    @staticmethod
    def restart_requested(ctx: ReconcileContext, status: dict[str, Any],
                          moment: datetime) -> tuple[float | None, bool]:
        """(0 when app.oam.dev/restart-workflow asks for a restart now, seconds until it will, else None;
        whether to take the one-time request off the app once the restart is written)."""
        annotations = ctx.app["metadata"].get("annotations") or {}
        restart, remove, due_in = aw.restart_due(annotations.get(aw.RESTART), status.get("workflow") or {},
                                                 moment)
        return (0 if restart else due_in), remove

    def take_restart_off(self, ctx: ReconcileContext) -> None:
        """The one-time restart request is done: off the app (as the controller, which owns that bookkeeping)."""
        try:
            self.client.patch(APPLICATIONS, ctx.name, {"metadata": {"annotations": {aw.RESTART: None}}},
                              ctx.namespace)
        except errors.NotFound:
            return
        log.info("workflow restarted on request", extra=fields(key=ctx.key))

    @staticmethod
    def parse(spec: dict[str, Any]) -> Workflow:
        """The app's workflow, parsed once per reconcile; a malformed one is a render error."""
        try:
            return parse_workflow(spec)
        except ValueError as err:
            raise RenderError("InvalidParameter", str(err), "-", field="workflow.steps") from None

    def render(self, ctx: ReconcileContext, workflow: Workflow,
               revision: int) -> tuple[RenderedApp, list[RenderError]]:
        """What the app renders to. A component that does not render stops the default workflow (RenderError);
        in a workflow with steps it is left out, as KubeVela renders a component when a step applies it: the
        problems are returned beside what did render."""
        problem = policy_problem(ctx.app.get("spec") or {})
        if problem:
            raise RenderError("InvalidParameter", problem, "-", field="policies")
        effective = with_overrides(ctx.app)
        problems: list[RenderError] = []
        try:
            rendered = render_app(effective, ctx.definitions, revision)
        except RenderError as err:
            if workflow.default or err.component == "-":
                raise
            components = []
            for spec in (effective.get("spec") or {}).get("components") or []:
                try:
                    components.append(render_component(effective, spec, ctx.definitions, revision))
                except RenderError as failed:
                    problems.append(failed)
            rendered = RenderedApp(components, render_policies(effective, ctx.definitions, revision))
        resolve_ref_objects(ctx.author, self.discovery, effective, rendered, ctx.definitions, revision)
        return rendered, problems

    def run_workflow(self, ctx: ReconcileContext, workflow: Workflow, status: dict[str, Any], rendered: RenderedApp,
                     conditions: list[dict[str, Any]], moment: datetime, run: str, revision: int,
                     restart_in: float | None) -> Result:
        app = ctx.app
        now = timestamp(moment)
        spec = app.get("spec") or {}
        keeper = ResourceKeeper(ctx, self.trackers, self.applier)
        health = HealthReader(ctx.key, ctx.name, ctx.definitions, keeper.live)
        rendered_objects = [o for c in rendered.components for o in c.objects] + rendered.policy_objects
        # the kinds of what the app renders and of what its workflow applied before (kept cached meanwhile)
        keeper.use_kinds(rendered_objects)
        # what steps applied beside components stays until the app is deleted
        desired_refs = {k: r for k, r in keeper.previous.items() if not r.get("component")}
        # the default workflow deploys everything rendered: recorded before it is applied; a workflow with steps
        # records what each step applies as it applies it
        desired_refs.update(refs_of(rendered_objects if workflow.default else rendered.policy_objects))
        keeper.keep(desired_refs)
        try:
            keeper.dispatch_policy_objects(rendered.policy_objects)
        except Terminal as problem:
            conditions.append(app_status.condition("PoliciesApplied", False, "ApplyFailed", str(problem), now))
            self.write_status(ctx, status, "runningWorkflow", conditions)
            if ctx.forbidden:
                raise Retry(str(problem)) from problem
            raise
        previous = status.get("workflow") or {"appRevision": run}
        if workflow.default:
            result = self.workflows.deploy_all(ctx, rendered, previous, run, keeper, health, desired_refs, moment)
        else:
            try:
                result = self.workflows.run_steps(ctx, workflow, rendered, previous, run, keeper, health,
                                                  desired_refs, revision, moment)
            except errors.KubeError as err:
                raise Retry(f"workflow: {err.message}", after=None if ctx.forbidden else self.waiting_requeue) \
                    from err
        desired_refs = result.desired
        if result.state == ph.WF_SUCCEEDED:
            keeper.collect_garbage(desired_refs)
        phase = aw.app_phase(result.state, all(h for h, _ in result.health.values()))
        status["workflow"] = result.workflow
        status["services"] = result.services
        status["appliedResources"] = app_status.applied_resources(sorted(desired_refs.values(), key=ref_key))
        status["policy"] = app_status.policy_status(spec)
        conditions.extend(app_status.workflow_conditions(result.workflow, result.health, now))
        overdue = aw.deadline(result.workflow, (app["metadata"].get("annotations") or {}).get(
            labels.WORKFLOW_DEADLINE), self.workflow_deadline, moment)
        if overdue is not None:
            ok, reason, message, due_in = overdue
            conditions.append(app_status.condition("WorkflowDeadline", ok, reason, message, now))
            if due_in is not None:  # come back when it is due, to say so
                restart_in = min(restart_in, due_in) if restart_in else due_in
        if not result.ran and not ctx.forbidden:
            # no step ran (the run settled, or waits out its backoff): a refusal a step met stays said
            refusal = next((c for c in (app.get("status") or {}).get("conditions") or []
                            if c.get("type") == "Authorized" and c.get("status") == "False"), None)
            if refusal is not None:
                conditions.append(refusal)
        if not self.write_status(ctx, status, phase, conditions):
            return DONE
        if ctx.forbidden:  # the status says who was refused what; try again with backoff
            raise Retry(f"the author was refused: {ctx.forbidden[0]}")
        # Settled apps come back as a safety net (every re-sync period with caches, whose events bring drift and
        # health at once; every state-keep interval without); others sooner, to see progress. A workflow with
        # steps comes back when its backoff says (no sooner: a waiting step is not polled faster than that).
        settled = phase in app_status.SETTLED_PHASES
        wait = self.state_keep_interval if settled else self.waiting_requeue
        if not workflow.default and result.state == ph.EXECUTING and result.requeue_after is not None:
            wait = result.requeue_after
        elif result.requeue_after is not None:
            wait = min(wait, result.requeue_after)
        if restart_in:
            wait = min(wait, restart_in)
        return requeue_after(max(wait, 0.05))

    def write_status(self, ctx: ReconcileContext, status: dict[str, Any], phase: str,
                     conditions: list[dict[str, Any]]) -> bool:
        """Write the status if it changed (with the Authorized condition: whom the app acts as, or what its author
        was refused, which a Warning Event also says once); False when the app is gone."""
        stored = ctx.app.get("status") or {}
        authorized = next((c for c in conditions if c["type"] == "Authorized"), None)
        if authorized is None:
            authorized = self.authorized(ctx)
            conditions = conditions + [authorized]
        status = app_status.with_phase(stored, status, phase, ctx.app["metadata"].get("generation"), conditions)
        if authorized["status"] == "False" and not any(
                c.get("type") == "Authorized" and c.get("status") == "False" and c.get("message") == authorized["message"]
                for c in stored.get("conditions") or []):
            # Recorded once, when the refusal first shows in the status: a failure that may pass fails this pass.
            record_event(self.client, ctx.app, "Warning", authorized["reason"], authorized["message"],
                         must_record=True)
        if status == stored:
            return True
        try:
            written = self.client.update_status(APPLICATIONS, dict(ctx.app, status=status))
        except errors.Conflict as err:
            raise Retry("the application changed meanwhile; converging again") from err
        except errors.NotFound:
            return False
        self.await_cached(ctx.key, written["metadata"]["resourceVersion"])
        return True

    def authorized(self, ctx: ReconcileContext) -> dict[str, Any]:
        """Condition Authorized: False naming every refusal this reconcile met, else whom the app acts as."""
        now = timestamp()
        if ctx.forbidden:
            why = unrecorded_author(ctx.app, self.auth)
            message = "; ".join(ctx.forbidden) + (f" ({why})" if why else "")
            return app_status.condition("Authorized", False, "Forbidden", message, now)
        who = ctx.author.identity
        message = f"acts as {who}" if who is not None else "acts as the controller (authentication is off)"
        return app_status.condition("Authorized", True, "Authorized", message, now)

    def await_cached(self, key: str, resource_version: str, timeout: float = 1.0) -> None:
        """Hold the worker until the cache shows our write (usually milliseconds): events queued meanwhile (the
        resources just applied) would otherwise reconcile the stale app and repeat its writes, to lose a race."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            cached = self.lookup(key)
            if cached is None or cached["metadata"].get("resourceVersion") == resource_version:
                return
            time.sleep(0.005)
