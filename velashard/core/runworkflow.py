"""One reconcile's workflow pass for an app, and what it leaves in the tracker and the status.

The default workflow (no steps written) is the controller's own: every component is applied, in dependsOn order,
each once what it depends on is healthy; what the app renders is tracked before it is applied, and garbage
collected once everything is deployed. It reads nothing beyond what it applies and costs what it always did.
A workflow with steps is run by velashard.workflow: its steps apply components (and objects) through a
StepDelivery, which tracks each with the run it belongs to; status.services are the components the run
deployed, and once the run succeeds, what earlier runs applied and this one did not is collected."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

from velashard.core import appworkflow as aw
from velashard.core import status as app_status
from velashard.core.apply import Applier
from velashard.core.context import ReconcileContext
from velashard.core.health import resource_health
from velashard.core.rendered import RenderedApp, RenderedComponent
from velashard.core.stepdelivery import StepDelivery
from velashard.core.templates import app_context
from velashard.core.tracker import Ref, RefKey, Trackers, ref_key, ref_of
from velashard.kube.controller import Terminal
from velashard.kube.discovery import Discovery
from velashard.observability import fields
from velashard.workflow import phases as ph
from velashard.workflow.engine import run_key
from velashard.workflow.executor import WorkflowEngine
from velashard.workflow.spec import Workflow
from velashard.workflow.templates import Lookup

log = logging.getLogger("velashard.core.workflow")

Health = Callable[[ReconcileContext, RenderedComponent], tuple[bool, str]]
TraitHealth = Callable[[ReconcileContext, RenderedComponent, str], tuple[bool, str]]


@dataclass
class Pass:
    """What a workflow pass leaves for the status."""
    workflow: dict[str, Any]
    state: str
    health: dict[str, tuple[bool, str]]
    services: list[dict[str, Any]]
    desired: dict[RefKey, Ref]
    requeue_after: float | None = None
    tracker: dict[str, Any] = field(default_factory=dict)
    ran: bool = True  # whether anything ran (a workflow with steps backing off or settled runs nothing)


@dataclass
class WorkflowRunner:
    discovery: Discovery
    applier: Applier
    trackers: Trackers
    engine: WorkflowEngine
    lookup: Lookup
    health: Health
    trait_health: TraitHealth

    # --- the default workflow ------------------------------------------------------------------------------

    def deploy_all(self, ctx: ReconcileContext, rendered: RenderedApp, previous: dict[str, Any], run: str,
                   tracker: dict[str, Any], desired: dict[RefKey, Ref], now: datetime) -> Pass:
        seen: dict[str, tuple[bool, str]] = {}

        def health_of(comp: RenderedComponent) -> tuple[bool, str]:
            if comp.name not in seen:
                seen[comp.name] = self.health(ctx, comp)
            return seen[comp.name]

        state_now = aw.state_of(previous) if previous.get("steps") else ph.EXECUTING
        if previous.get("suspend") or (previous.get("terminated") and state_now != ph.WF_FAILED):
            # suspended or terminated by hand (velashard workflow suspend|terminate): nothing runs
            state = ph.WF_SUSPENDING if previous.get("suspend") else ph.WF_TERMINATED
            workflow = dict(previous, status=state)
        else:
            by_name = {c.name: c for c in rendered.components}
            waiting = []
            outcome: tuple[str, str, str]
            try:
                for comp in rendered.components:
                    blocked = [d for d in comp.depends_on if d in by_name and not health_of(by_name[d])[0]]
                    if blocked:
                        waiting.append(f'{comp.name} waits for {", ".join(blocked)}')
                        continue
                    self.applier.apply_component(ctx, comp)
                    seen.pop(comp.name, None)
                    healthy, message = health_of(comp)
                    if not healthy:
                        waiting.append(f"{comp.name}: {message}")
                outcome = (ph.RUNNING, "; ".join(waiting), "") if waiting else (ph.SUCCEEDED, "", "")
            except Terminal as problem:
                outcome = (ph.FAILED, str(problem), "ApplyFailed")
            workflow = aw.default_status(previous, run, outcome, now)
            state = workflow["status"]
        health = {c.name: health_of(c) for c in rendered.components}
        traits = {(c.name, t): self.trait_health(ctx, c, t) for c in rendered.components for t in c.traits}
        services = app_status.services(rendered.components, health, traits, ctx.namespace)
        return Pass(workflow, state, health, services, desired, tracker=tracker)

    # --- a workflow with steps --------------------------------------------------------------------------------

    def run_steps(self, ctx: ReconcileContext, workflow: Workflow, rendered: RenderedApp, previous: dict[str, Any],
                  run: str, tracker: dict[str, Any], tracked: dict[RefKey, Ref], desired: dict[RefKey, Ref],
                  revision: int, now: datetime) -> Pass:
        """`tracked`: the tracker's refs (updated as steps apply); `desired`: what stays whatever the run does.
        Everything the steps do in the cluster goes through `ctx.author`, the client acting as the app's author."""
        previous = dict(previous, appRevision=run)
        previous.setdefault("startTime", ph.timestamp(now))
        run_id = hashlib.sha256(run_key(previous).encode()).hexdigest()[:10]
        holder = {"tracker": tracker}

        def track(refs: dict[RefKey, Ref]) -> None:
            new = {k: r for k, r in refs.items() if tracked.get(k) != r}
            if new:
                tracked.update(new)
                holder["tracker"] = self.trackers.save(ctx.app, holder["tracker"], tracked)

        delivery = StepDelivery(ctx, self.discovery, self.applier, rendered, lambda comp: self.health(ctx, comp),
                                track, run_id, revision,
                                [{"apiVersion": r["apiVersion"], "kind": r["kind"]} for r in tracked.values()])
        basic = {**app_context(ctx.app, revision, ctx.definitions.cluster_version), "name": ctx.name}
        outcome = self.engine.execute(ctx.app, workflow, previous, basic, ctx.author, delivery, self.lookup, now)
        deployed = {k: r for k, r in tracked.items() if r.get("run") == run_id}
        desired = {**desired, **{k: r for k, r in tracked.items() if not r.get("component") or r.get("run") == run_id}}
        health, services = self._services(ctx, delivery, deployed)
        if outcome.state != ph.EXECUTING:
            log.info("workflow run settled", extra=fields(key=ctx.key, state=outcome.state, run=run))
        return Pass(outcome.status, outcome.state, health, services, desired, outcome.requeue_after,
                    holder["tracker"], outcome.ran)

    def _services(self, ctx: ReconcileContext, delivery: StepDelivery,
                  deployed: dict[RefKey, Ref]) -> tuple[dict[str, tuple[bool, str]], list[dict[str, Any]]]:
        """One entry per component and namespace the run deployed (a replicated component's copies together): fresh
        where a step applied it in this pass, else by the component as written (with its replicaKey, in the app's
        namespace) or the live objects' own health."""
        groups: dict[tuple[str, str, str], list[Ref]] = {}
        for ref in deployed.values():
            groups.setdefault((ref["component"], ref.get("namespace", ""), ref.get("replicaKey", "")), []).append(ref)
        applied = {(i.component.name, i.namespace, i.replica_key): i for i in delivery.instances}
        health: dict[str, tuple[bool, str]] = {}
        entries: dict[tuple[str, str], tuple[RenderedComponent | None, tuple[bool, str] | None]] = {}
        for (name, namespace, replica), refs in sorted(groups.items()):
            instance = applied.get((name, namespace, replica))
            comp = instance.component if instance is not None else delivery.as_written(name, replica)
            if instance is not None:
                result = (instance.healthy, instance.message)
            elif comp is not None and namespace == ctx.namespace:
                result = self.health(ctx, comp)
            else:
                result = _objects_health(ctx, self.applier, refs)
            health[name] = _combine(health.get(name), result)
            kept, earlier = entries.get((name, namespace), (None, None))
            entries[(name, namespace)] = (kept or comp, _combine(earlier, result))
        services = []
        for (name, namespace), (comp, combined) in sorted(entries.items()):
            result = combined or (True, "")
            if comp is not None:
                traits = {(comp.name, t): self.trait_health(ctx, comp, t) for t in comp.traits}
                services.append(app_status.service(comp, namespace, result, traits))
            else:
                services.append({"name": name, "namespace": namespace, "cluster": "local", "healthy": result[0],
                                 "message": result[1], "traits": []})
        return health, services


def _combine(before: tuple[bool, str] | None, result: tuple[bool, str]) -> tuple[bool, str]:
    """Health of several parts: healthy when all are, their messages joined."""
    if before is None:
        return result
    return before[0] and result[0], "; ".join(m for m in (before[1], result[1]) if m)


def _objects_health(ctx: ReconcileContext, applier: Applier, refs: list[Ref]) -> tuple[bool, str]:
    bad = []
    for ref in refs:
        obj = {"apiVersion": ref["apiVersion"], "kind": ref["kind"],
               "metadata": {"name": ref["name"], **({"namespace": ref["namespace"]} if ref.get("namespace") else {})}}
        ok, message = resource_health(applier.live_of(ctx, obj))
        if not ok:
            bad.append(f'{ref["kind"]} {ref["name"]}: {message}')
    return not bad, "; ".join(bad)


def tracked_objects(objects: list[dict[str, Any]]) -> dict[RefKey, Ref]:
    return {ref_key(ref_of(o)): ref_of(o) for o in objects}
