"""A step of any type but step-group: its template (templates.py) evaluated with the step's properties as
`parameter` and KubeVela's workflow `context`, its actions run (actions.py), and the outcome as the step's
status."""

from __future__ import annotations

import logging
from typing import Any, Callable

from velashard.cue import CueError
from velashard.kube.client import KubeClient
from velashard.workflow import phases as ph
from velashard.workflow.actions import Planned, TemplateFailure, run_actions
from velashard.workflow.context import MAX_CONTEXT_BYTES, bounded
from velashard.workflow.delivery import Delivery
from velashard.workflow.egress import EgressPolicy
from velashard.workflow.outbound import Outbound
from velashard.workflow.engine import Session, StepResult
from velashard.workflow.providers.base import Action, Runtime
from velashard.workflow.spec import StepSpec
from velashard.workflow.templates import Lookup, compile_step, template_of

log = logging.getLogger("velashard.workflow")


class CueTasks:
    """The engine's TaskRunner for steps whose work is a CUE template."""

    def __init__(self, app: dict[str, Any], lookup: Lookup, basic: dict[str, Any], author: KubeClient | None,
                 delivery: Delivery | None, dry_run: bool = False, outbound: Outbound | None = None,
                 egress: EgressPolicy = EgressPolicy()):
        self.app, self.lookup, self.basic = app, lookup, basic
        self.author, self.delivery, self.dry_run = author, delivery, dry_run
        self.outbound, self.egress = outbound, egress
        self.planned: dict[str, list[Planned]] = {}

    def depends_on(self, step: StepSpec) -> list[str]:
        return []

    def context_of(self, step: StepSpec, session: Session) -> dict[str, Any]:
        # velashard adds when the step first ran (stable across its re-runs): a template's clock
        started = ph.parse_timestamp(session.previous.get("firstExecuteTime")) or session.now
        context = {**self.basic, "stepName": step.name, "stepSessionID": session.step_id,
                   "spanID": session.step_id, "stepStartTime": ph.timestamp(started),
                   "stepStartTimestamp": int(started.timestamp())}
        if session.group:
            context["stepGroupName"] = session.group
        return context

    def run(self, step: StepSpec, properties: dict[str, Any], session: Session) -> StepResult:
        """The step's outcome, bounded: its message at MAX_MESSAGE characters, and what it put in the run's
        context undone (the step failing) when the context would outgrow what its ConfigMap can hold. A step
        whose call to the outside is still running is not evaluated again: it goes on waiting."""
        meta = self.app["metadata"]
        if self.outbound is not None and self.outbound.pending(str(meta.get("uid") or meta["name"]), session.step_id):
            return StepResult(ph.RUNNING, ph.WAIT, str(session.previous.get("message") or ""), wait=True)
        before = session.context.state()
        result = self._run(step, properties, session)
        size = session.context.size()
        if size > MAX_CONTEXT_BYTES:
            session.context.restore(before)
            result = StepResult(ph.FAILED, ph.EXECUTE, f'step "{step.name}": the run\'s context would hold {size} '
                                                       f"bytes, more than {MAX_CONTEXT_BYTES}: what the step stored "
                                                       "was dropped", wait=True)
        result.message = bounded(result.message)
        return result

    def _run(self, step: StepSpec, properties: dict[str, Any], session: Session) -> StepResult:
        namespace = self.app["metadata"].get("namespace", "default")
        text = template_of(step.type, namespace, self.lookup)
        if text is None:
            return StepResult(ph.FAILED, ph.EXECUTE, f'step "{step.name}": no WorkflowStepDefinition "{step.type}" '
                                                     f"in namespace {namespace} or vela-system")
        try:
            program = compile_step(text, f"{step.type}.cue")
        except CueError as err:
            return StepResult(ph.FAILED, ph.RENDERING, f'step "{step.name}": the template of "{step.type}" does not '
                                                       f"compile: {err}")
        action = Action(previous_phase=str(session.previous.get("phase") or ""))
        data = {"parameter": properties, "context": self.context_of(step, session)}

        def runtime(label: str, tags: Callable[[tuple], Any], where: str) -> Runtime:
            return Runtime(self.app, step.name, session.step_id, step.type, session.context, action, self.author,
                           self.delivery, session.now, session.group, label, tags, log, where, self.outbound,
                           self.egress)

        try:
            run = run_actions(program, data, runtime, self.dry_run)
        except TemplateFailure as err:
            return StepResult(ph.FAILED, ph.EXECUTE, f'step "{step.name}": {err}', wait=True)
        except CueError as err:
            return StepResult(ph.FAILED, ph.EXECUTE, f'step "{step.name}": {err}', wait=True)
        if self.dry_run:
            self.planned[step.name] = run.planned
        return StepResult(action.phase, action.reason, action.message, action.wait, action.suspend,
                          action.terminated, run.instance)
