"""What core/ calls to run an app's workflow once: load the run's context (store.py), run a pass (engine.py) with
the CUE task runner (task.py), store the context if a step changed it, and remember what was produced so that
the next pass waits out the backoff. One WorkflowEngine per controller process; its state is caches only."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from velashard.kube.client import KubeClient
from velashard.workflow import engine
from velashard.workflow import phases as ph
from velashard.workflow.backoff import DEFAULTS, Memories, Settings
from velashard.workflow.context import WorkflowContext
from velashard.workflow.delivery import Delivery
from velashard.workflow.egress import EgressPolicy
from velashard.workflow.engine import Outcome, Session, StepResult
from velashard.workflow.outbound import Outbound
from velashard.workflow.spec import Workflow
from velashard.workflow.store import ContextStore
from velashard.workflow.steptypes import convert, step_type
from velashard.workflow.task import CueTasks
from velashard.workflow.templates import Lookup


@dataclass
class WorkflowEngine:
    settings: Settings = DEFAULTS
    store: ContextStore = field(default_factory=ContextStore)
    memories: Memories = field(default_factory=Memories)
    # steps' calls to the outside run there (its `wake` re-enqueues their app), where the egress policy allows
    outbound: Outbound = field(default_factory=Outbound)
    egress: EgressPolicy = EgressPolicy()

    def execute(self, app: dict[str, Any], workflow: Workflow, previous: dict[str, Any], basic: dict[str, Any],
                author: KubeClient, delivery: Delivery, lookup: Lookup, now: datetime) -> Outcome:
        """One pass of an explicit workflow. `previous` is this run's status.workflow (with its appRevision);
        every request to the cluster goes through `author`, and components through `delivery`."""
        previous = dict(previous)
        previous.setdefault("startTime", ph.timestamp(now))
        backend = previous.get("contextBackend")
        context = self.store.load(author, backend)
        memory = self.memories.of(_run(app, previous))
        if self.outbound.has_results(str(app["metadata"].get("uid") or app["metadata"]["name"])):
            memory.next_execute = None  # a call ended: its step goes on now, whatever the backoff said
        tasks = CueTasks(app, lookup, basic, author, delivery, outbound=self.outbound, egress=self.egress)
        outcome = engine.run(convert(workflow, delivery.components()), previous, tasks, context, memory, now, basic,
                             self.settings)
        written = self.store.commit(author, app, backend, context)
        if written:
            outcome.status["contextBackend"] = written
        memory.produced = engine.status_digest(outcome.status)
        return outcome

    def forget(self, app: dict[str, Any], status: dict[str, Any]) -> None:
        """The app's run is over or gone: drop what this process keeps of it."""
        self.memories.forget(_run(app, status))
        self.store.forget(status.get("contextBackend"))

    def delete_context(self, author: KubeClient, status: dict[str, Any]) -> None:
        self.store.delete(author, status.get("contextBackend"))


def _run(app: dict[str, Any], status: dict[str, Any]) -> str:
    meta = app["metadata"]
    return f'{meta.get("namespace", "")}/{meta["name"]}/{meta.get("uid", "")}/{engine.run_key(status)}'


@dataclass
class PlannedStep:
    name: str
    type: str
    properties: dict[str, Any]
    actions: list[Any]
    problem: str = ""


def plan(app: dict[str, Any], workflow: Workflow, basic: dict[str, Any], lookup: Lookup,
         components: list[dict[str, Any]]) -> list[PlannedStep]:
    """What each step would do (a dry run): the actions its template would run, with their parameters as far as
    they are known before anything runs. Nothing touches a cluster."""
    tasks = CueTasks(app, lookup, basic, None, None, dry_run=True)
    out = []
    context = WorkflowContext()
    for step in [s for top in convert(workflow, components).steps for s in (top, *top.sub_steps)]:
        if step_type(step.type).sub_steps:
            out.append(PlannedStep(step.name, step.type, {}, [], "runs its sub-steps"))
            continue
        result: StepResult = tasks.run(step, step.properties, Session(engine.step_id("dry-run", step.name), {}, "",
                                                                       context, datetime.now().astimezone()))
        problem = result.message if result.phase == ph.FAILED else ""
        out.append(PlannedStep(step.name, step.type, step.properties, tasks.planned.get(step.name, []), problem))
    return out
