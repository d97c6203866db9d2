"""One reconcile's workflow pass for an app, and what it leaves for the status.

The default workflow (no steps written) is the controller's own: every component is dispatched, in dependsOn
order, each once what it depends on is healthy; what the app renders was recorded by the ResourceKeeper before
(core/keeper.py). It reads nothing beyond what it applies and costs what it always did. A workflow with steps is
run by velashard.workflow: its steps apply components (and objects) through a StepDelivery, which has the keeper
record each with the run it belongs to; status.services are the components the run deployed. Health is read by
the pass's HealthReader, as the status reads it."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from velashard.core import appworkflow as aw
from velashard.core import status as app_status
from velashard.core.context import ReconcileContext
from velashard.core.health import HealthReader
from velashard.core.keeper import ResourceKeeper
from velashard.core.rendered import RenderedApp, RenderedComponent
from velashard.core.stepdelivery import StepDelivery
from velashard.core.templates import app_context
from velashard.core.tracker import Ref, RefKey
from velashard.kube.controller import Terminal
from velashard.kube.discovery import Discovery
from velashard.observability import fields
from velashard.workflow import phases as ph
from velashard.workflow.engine import run_key
from velashard.workflow.executor import WorkflowEngine
from velashard.workflow.spec import Workflow
from velashard.workflow.templates import Lookup

log = logging.getLogger("velashard.core.workflow")


@dataclass
class Pass:
    """What a workflow pass leaves for the status."""
    workflow: dict[str, Any]
    state: str
    health: dict[str, tuple[bool, str]]
    services: list[dict[str, Any]]
    desired: dict[RefKey, Ref]
    requeue_after: float | None = None
    ran: bool = True  # whether anything ran (a workflow with steps backing off or settled runs nothing)


@dataclass
class WorkflowRunner:
    discovery: Discovery
    engine: WorkflowEngine
    lookup: Lookup

    # --- the default workflow ------------------------------------------------------------------------------

    @staticmethod
    def deploy_all(ctx: ReconcileContext, rendered: RenderedApp, previous: dict[str, Any], run: str,
                   keeper: ResourceKeeper, health: HealthReader, desired: dict[RefKey, Ref], now: datetime) -> Pass:
        seen: dict[str, tuple[bool, str]] = {}

        def health_of(comp: RenderedComponent) -> tuple[bool, str]:
            if comp.name not in seen:
                seen[comp.name] = health.component(comp)
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
                    keeper.dispatch(comp)
                    seen.pop(comp.name, None)
                    healthy, message = health_of(comp)
                    if not healthy:
                        waiting.append(f"{comp.name}: {message}")
                outcome = (ph.RUNNING, "; ".join(waiting), "") if waiting else (ph.SUCCEEDED, "", "")
            except Terminal as problem:
                outcome = (ph.FAILED, str(problem), "ApplyFailed")
            workflow = aw.default_status(previous, run, outcome, now)
            state = workflow["status"]
        healthy = {c.name: health_of(c) for c in rendered.components}
        traits = {(c.name, t): health.trait(c, t) for c in rendered.components for t in c.traits}
        services = app_status.services(rendered.components, healthy, traits, ctx.namespace)
        return Pass(workflow, state, healthy, services, desired)

    # --- a workflow with steps --------------------------------------------------------------------------------

    def run_steps(self, ctx: ReconcileContext, workflow: Workflow, rendered: RenderedApp, previous: dict[str, Any],
                  run: str, keeper: ResourceKeeper, health: HealthReader, desired: dict[RefKey, Ref],
                  revision: int, now: datetime) -> Pass:
        """`desired`: what stays whatever the run does; the keeper records what the steps apply as they do.
        Everything the steps do in the cluster goes through `ctx.author`, the client acting as the app's author."""
        previous = dict(previous, appRevision=run)
        previous.setdefault("startTime", ph.timestamp(now))
        run_id = hashlib.sha256(run_key(previous).encode()).hexdigest()[:10]
        delivery = StepDelivery(ctx, self.discovery, keeper, health, rendered, run_id, revision)
        basic = {**app_context(ctx.app, revision, ctx.definitions.cluster_version), "name": ctx.name}
        outcome = self.engine.execute(ctx.app, workflow, previous, basic, ctx.author, delivery, self.lookup, now)
        tracked = keeper.recorded
        deployed = {k: r for k, r in tracked.items() if r.get("run") == run_id}
        desired = {**desired, **{k: r for k, r in tracked.items() if not r.get("component") or r.get("run") == run_id}}
        healthy, services = self._services(ctx, delivery, health, deployed)
        if outcome.state != ph.EXECUTING:
            log.info("workflow run settled", extra=fields(key=ctx.key, state=outcome.state, run=run))
        return Pass(outcome.status, outcome.state, healthy, services, desired, outcome.requeue_after, outcome.ran)

    @staticmethod
    def _services(ctx: ReconcileContext, delivery: StepDelivery, health: HealthReader,
                  deployed: dict[RefKey, Ref]) -> tuple[dict[str, tuple[bool, str]], list[dict[str, Any]]]:
        """One entry per component and namespace the run deployed (a replicated component's copies together): fresh
        where a step applied it in this pass, else by the component as written (with its replicaKey, in the app's
        namespace) or the live objects' own health."""
        groups: dict[tuple[str, str, str], list[Ref]] = {}
        for ref in deployed.values():
            groups.setdefault((ref["component"], ref.get("namespace", ""), ref.get("replicaKey", "")), []).append(ref)
        applied = {(i.component.name, i.namespace, i.replica_key): i for i in delivery.instances}
        healthy: dict[str, tuple[bool, str]] = {}
        entries: dict[tuple[str, str], tuple[RenderedComponent | None, tuple[bool, str] | None]] = {}
        for (name, namespace, replica), refs in sorted(groups.items()):
            instance = applied.get((name, namespace, replica))
            comp = instance.component if instance is not None else delivery.as_written(name, replica)
            if instance is not None:
                result = (instance.healthy, instance.message)
            elif comp is not None and namespace == ctx.namespace:
                result = health.component(comp)
            else:
                result = health.objects(refs)
            healthy[name] = _combine(healthy.get(name), result)
            kept, earlier = entries.get((name, namespace), (None, None))
            entries[(name, namespace)] = (kept or comp, _combine(earlier, result))
        services = []
        for (name, namespace), (comp, combined) in sorted(entries.items()):
            result = combined or (True, "")
            if comp is not None:
                traits = {(comp.name, t): health.trait(comp, t) for t in comp.traits}
                services.append(app_status.service(comp, namespace, result, traits))
            else:
                services.append({"name": name, "namespace": namespace, "cluster": "local", "healthy": result[0],
                                 "message": result[1], "traits": []})
        return healthy, services


def _combine(before: tuple[bool, str] | None, result: tuple[bool, str]) -> tuple[bool, str]:
    """Health of several parts: healthy when all are, their messages joined."""
    if before is None:
        return result
    return before[0] and result[0], "; ".join(m for m in (before[1], result[1]) if m)
