"""The Application reconcile, step by step: finalize or claim, render, record a revision, run the workflow
(apply, wait for health), collect garbage, write status.

Level-based: each reconcile reads the app and the world and converges, whatever event woke it. Outcomes
follow kube/controller.py's model: a Result when done, Retry or Terminal when not.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any, Callable

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.core import status as app_status
from velashard.core.apply import Applier
from velashard.core.authors import AuthConfig, author_of, refusal
from velashard.core.context import ReconcileContext
from velashard.core.events import record_event, timestamp
from velashard.core.health import component_health, definition_status, resource_health
from velashard.core.policies import policy_problem, unsupported_policies, with_overrides
from velashard.core.refobjects import resolve_ref_objects
from velashard.core.resourcepolicies import gc_strategy
from velashard.core.rendering import Definitions, RenderedApp, RenderedComponent, RenderError, render_app
from velashard.core.revisions import Revisions, app_hash, revision_name
from velashard.core.tracker import Trackers, managed_refs, ref_key, ref_of
from velashard.core.stepactions import StepActions, WorkflowVariables
from velashard.core.workflow import evaluate, now_utc, workflow_phase
from velashard.core.workflow_spec import parse_steps, uses_variables
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.controller import DONE, Result, Retry, Terminal, requeue_after
from velashard.kube.discovery import Discovery
from velashard.observability import fields

log = logging.getLogger("velashard.core.reconciler")

FINALIZER = labels.RESOURCE_TRACKER_FINALIZER


class ApplicationReconciler:
    def __init__(self, client: KubeClient, discovery: Discovery, lookup: Callable[[str], dict[str, Any] | None],
                 definitions: Callable[[], Definitions], component_definition: Callable[[str], dict[str, Any] | None],
                 revisions: Revisions, trackers: Trackers, applier: Applier, state_keep_interval: float,
                 waiting_requeue: float, auth: AuthConfig = AuthConfig()):
        self.client, self.discovery, self.lookup, self.definitions = client, discovery, lookup, definitions
        self.component_definition = component_definition
        self.revisions, self.trackers, self.applier = revisions, trackers, applier
        self.variables = WorkflowVariables()
        self.state_keep_interval, self.waiting_requeue = state_keep_interval, waiting_requeue
        self.auth = auth

    def context(self, app: dict[str, Any]) -> ReconcileContext:
        """The reconcile's state, with the client that acts as the app's author (with authentication off: as
        the controller itself) and hears every refusal."""
        ctx = ReconcileContext(app, self.definitions(), self.client)
        ctx.author = self.client.acting_as(author_of(app, self.auth) if self.auth.enabled else None, ctx.refused)
        return ctx

    def __call__(self, key: str) -> Result:
        app = self.lookup(key)
        if app is None:
            return DONE
        app = copy.deepcopy(app)
        ctx = self.context(app)
        try:
            if app["metadata"].get("deletionTimestamp"):
                return self.finalize(ctx)
            if FINALIZER not in (app["metadata"].get("finalizers") or []):
                self.client.patch(APPLICATIONS, app["metadata"]["name"], {"metadata": {
                    "finalizers": list(app["metadata"].get("finalizers") or []) + [FINALIZER],
                    "resourceVersion": app["metadata"]["resourceVersion"]}}, app["metadata"]["namespace"])
                return DONE  # the update event brings the app back
            problem = refusal(app, self.auth)
            if problem:
                self.write_status(ctx, copy.deepcopy(app.get("status") or {}), "rendering", [app_status.condition(
                    "Authorized", False, "ServiceAccountRefused", problem, timestamp())])
                raise Terminal(problem)
            return self.converge(ctx)
        except errors.Forbidden as err:
            # Refused where no step reports it (garbage collection, deletion): the status says so all the same.
            status = copy.deepcopy(app.get("status") or {})
            kept = [c for c in status.get("conditions") or [] if c.get("type") != "Authorized"]
            self.write_status(ctx, status, status.get("status") or "rendering", kept)
            raise Retry(f"the author was refused: {err.message}") from err

    def finalize(self, ctx: ReconcileContext) -> Result:
        """Delete what the app owns (as its author), then its trackers and revisions, then drop the finalizer."""
        app = ctx.app
        meta = app["metadata"]
        if FINALIZER not in (meta.get("finalizers") or []):
            return DONE
        tracker = self.trackers.get(app)
        for ref in self.applier.deletion_order(app, list(managed_refs(tracker).values())):
            if gc_strategy(app.get("spec") or {}, self.applier.info_of(app, ref)) != "never":
                self.applier.delete_managed(app, ref, ctx.author)
        if self._keeps_variables(app):
            self.variables.delete(ctx.author, app)
        self.trackers.delete(tracker)
        self.revisions.delete_all(app)
        remaining = [f for f in meta["finalizers"] if f != FINALIZER]
        self.client.patch(APPLICATIONS, meta["name"], {"metadata": {"finalizers": remaining or None,
                                                                    "resourceVersion": meta["resourceVersion"]}},
                          meta["namespace"])
        log.info("application deleted", extra=fields(key=f'{meta["namespace"]}/{meta["name"]}'))
        return DONE

    def converge(self, ctx: ReconcileContext) -> Result:
        app, defs = ctx.app, ctx.definitions
        spec = app.get("spec") or {}
        status: dict[str, Any] = copy.deepcopy(app.get("status") or {})
        conditions: list[dict[str, Any]] = []
        now = timestamp()
        digest = app_hash(spec, defs.fingerprint())
        latest = status.get("latestRevision") or {}
        revision = latest.get("revision", 0) if latest.get("revisionHash") == digest else \
            self.revisions.number(app, digest)
        unsupported = unsupported_policies(spec)
        if unsupported:
            conditions.append(app_status.condition(
                "PoliciesSupported", False, "UnsupportedPolicy",
                f'policies of type {", ".join(unsupported)} are kept but not supported (no multi-cluster; '
                'topology only with clusters ["local"]); they have no effect', now))
        try:
            rendered = self.render(ctx, revision)
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
        conditions.append(app_status.condition("Rendered", True, "Rendered", "; ".join(notes), now))
        if latest.get("revisionHash") != digest:
            self.revisions.record(app, revision, digest, defs.fingerprint())
            status["latestRevision"] = {"name": revision_name(ctx.name, revision), "revision": revision,
                                        "revisionHash": digest}
            status.pop("workflow", None)  # a new revision runs its workflow anew
        return self.run_workflow(ctx, status, rendered, conditions, now)

    def render(self, ctx: ReconcileContext, revision: int) -> RenderedApp:
        try:
            parse_steps(ctx.app.get("spec") or {})
        except ValueError as err:
            raise RenderError("InvalidParameter", str(err), "-", field="workflow.steps") from None
        problem = policy_problem(ctx.app.get("spec") or {})
        if problem:
            raise RenderError("InvalidParameter", problem, "-", field="policies")
        effective = with_overrides(ctx.app)
        rendered = render_app(effective, ctx.definitions, revision)
        resolve_ref_objects(ctx.author, self.discovery, effective, rendered, ctx.definitions, revision)
        return rendered

    def run_workflow(self, ctx: ReconcileContext, status: dict[str, Any], rendered: RenderedApp,
                     conditions: list[dict[str, Any]], now: str) -> Result:
        app = ctx.app
        spec = app.get("spec") or {}
        rendered_objects = [o for c in rendered.components for o in c.objects] + rendered.policy_objects
        self.applier.use_kinds(ctx, rendered_objects)
        tracker = self.trackers.get(app)
        previous_refs = managed_refs(tracker)
        desired_refs = {ref_key(ref_of(o)): ref_of(o) for o in rendered_objects}
        # what workflow steps applied (no component) stays until the app is deleted
        desired_refs.update({k: r for k, r in previous_refs.items() if not r.get("component")})
        tracker = self.trackers.save(app, tracker, {**previous_refs, **desired_refs})
        try:
            self.applier.apply_policy_objects(ctx, rendered.policy_objects)
        except Terminal as problem:
            conditions.append(app_status.condition("PoliciesApplied", False, "ApplyFailed", str(problem), now))
            self.write_status(ctx, status, "runningWorkflow", conditions)
            if ctx.forbidden:
                raise Retry(str(problem)) from problem
            raise
        actions = StepActions(ctx, self.discovery, self.applier, rendered.components,
                              lambda comp: self.health(ctx, comp))
        previous = status.get("workflow") or {}
        steps = parse_steps(spec)
        # Most workflows pass no values between steps: they cost no ConfigMap read.
        variables = self.variables.read(ctx.author, app) if uses_variables(steps) else {}
        evaluation = evaluate(app, steps, previous, variables, now_utc(), actions,
                              (status.get("latestRevision") or {}).get("name", ""))
        workflow = evaluation.status
        if evaluation.variables != variables:
            self.variables.write(ctx.author, app, evaluation.variables)
        for obj in actions.applied_objects:
            desired_refs[ref_key(ref_of(obj))] = ref_of(obj)
        if actions.applied_objects:
            tracker = self.trackers.save(app, tracker, {**previous_refs, **desired_refs})
        if workflow["finished"] and not any(s["phase"] == "failed" for s in workflow["steps"]):
            kept = self.applier.collect_garbage(ctx, previous_refs, desired_refs)
            self.trackers.save(app, tracker, {**kept, **desired_refs})
        health: app_status.Health = {c.name: actions.health_of(c.name) for c in rendered.components}
        traits = {(c.name, t): self.trait_health(ctx, c, t) for c in rendered.components for t in c.traits}
        phase = workflow_phase(workflow, all(h for h, _ in health.values()))
        status["workflow"] = workflow
        status["services"] = app_status.services(rendered.components, health, traits, ctx.namespace)
        status["appliedResources"] = app_status.applied_resources(sorted(desired_refs.values(), key=ref_key))
        status["policy"] = app_status.policy_status(spec)
        conditions.extend(app_status.workflow_conditions(workflow, health, now))
        if not self.write_status(ctx, status, phase, conditions):
            return DONE
        if ctx.forbidden:  # the status says who was refused what; try again with backoff
            raise Retry(f"the author was refused: {ctx.forbidden[0]}")
        # Settled apps come back as a safety net (every re-sync period with caches, whose events bring drift and
        # health at once; every state-keep interval without); others sooner, to see progress.
        settled = phase in app_status.SETTLED_PHASES
        wait = self.state_keep_interval if settled else self.waiting_requeue
        if evaluation.requeue_after is not None:
            wait = min(wait, max(evaluation.requeue_after, 0.05))
        return requeue_after(wait)

    @staticmethod
    def _keeps_variables(app: dict[str, Any]) -> bool:
        try:
            return uses_variables(parse_steps(app.get("spec") or {}))
        except ValueError:
            return True  # an invalid workflow may once have been valid: look

    def trait_health(self, ctx: ReconcileContext, comp: RenderedComponent, trait: str) -> tuple[bool, str]:
        """A trait is healthy by its definition's health policy over its outputs when it has one, else when
        every object it produced is (by the built-in rules)."""
        outputs = [o for o in comp.outputs if ((o["metadata"].get("labels") or {}).get(labels.TRAIT_TYPE) == trait)]
        live = [self.applier.live_of(ctx, o) for o in outputs]
        definition = ctx.definitions.traits.get(trait) or {}
        healthy, message = definition_status(
            (definition.get("spec") or {}).get("status"), self._names(ctx, comp),
            self.applier.live_of(ctx, comp.workload),
            {(o["metadata"].get("labels") or {}).get(labels.TRAIT_RESOURCE, ""): obj for o, obj in zip(outputs, live)},
            comp.trait_properties.get(trait) or {})
        if healthy is not None:
            return healthy, message or ""
        bad = [f'{o["kind"]} {o["metadata"]["name"]}: {m}' for o, (ok, m) in
               zip(outputs, map(resource_health, live)) if not ok]
        return not bad, message or "; ".join(bad)

    @staticmethod
    def _names(ctx: ReconcileContext, comp: RenderedComponent) -> dict[str, str]:
        return {"name": comp.name, "appName": ctx.name,
                "appRevision": (comp.workload["metadata"].get("labels") or {}).get(labels.APP_REVISION, "")}

    def health(self, ctx: ReconcileContext, comp: RenderedComponent) -> tuple[bool, str]:
        definition = self.component_definition(comp.type) or {}
        return component_health(comp.objects, comp.workload, [self.applier.live_of(ctx, o) for o in comp.objects],
                                (definition.get("spec") or {}).get("status"), self._names(ctx, comp),
                                comp.properties)

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
            record_event(self.client, ctx.app, "Warning", authorized["reason"], authorized["message"])
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
            return app_status.condition("Authorized", False, "Forbidden", "; ".join(ctx.forbidden), now)
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
