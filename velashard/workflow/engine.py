"""Running a workflow, KubeVela's executor: which steps run now, in what order, what their status becomes and when
the workflow comes back.

Steps run one after another (StepByStep) or as soon as what they depend on is done (DAG); sub-steps of a
step-group likewise by `mode.subSteps`. A step waits for its `dependsOn` and `inputs`; is skipped when an earlier
step did not succeed (unless its `if` says otherwise: `always` or a CUE expression); fails with reason Timeout
after its `timeout`. A step that is not done is run again on the next pass, which comes no sooner than the
backoff (backoff.py). One pass is `run(...)`: a function of the workflow, the previous status, the run's context
and memory, the time and the TaskRunner that does a step's work."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from velashard.workflow import phases as ph
from velashard.workflow.backoff import DEFAULTS, RunMemory, Settings, wait_interval
from velashard.workflow.context import WorkflowContext, bounded
from velashard.workflow.dataflow import condition_holds, input_value, inputs_view, set_outputs, with_inputs
from velashard.workflow.runstate import (all_done, group_status, settle, state_of, suspend_wait, suspended,
                                         with_state)
from velashard.workflow.spec import MODE_DAG, StepSpec, Workflow
from velashard.workflow.steptypes import step_type


MIN_TIMEOUT = 1  # seconds: a timeout closer than this is checked after this long


@dataclass
class StepResult:
    """What running a step's template came to (KubeVela's step status and operation)."""
    phase: str
    reason: str = ""
    message: str = ""
    wait: bool = False
    suspend: bool = False
    terminated: bool = False
    value: Any = None  # the step's evaluated value, for its outputs (dataflow.StepValue)


@dataclass
class Session:
    """A step's run: its id (context.stepSessionID), its status before this pass and its group."""
    step_id: str
    previous: dict[str, Any]
    group: str
    context: WorkflowContext
    now: datetime


class TaskRunner(Protocol):
    def run(self, step: StepSpec, properties: dict[str, Any], session: Session) -> StepResult: ...

    def depends_on(self, step: StepSpec) -> list[str]:
        """Steps this one waits for beside its own dependsOn (an apply-component step: its component's)."""


@dataclass
class Outcome:
    status: dict[str, Any]  # status.workflow
    state: str  # the run's state: executing, succeeded, failed, suspending, terminated
    requeue_after: float | None = None
    ran: bool = False  # whether this pass ran steps (not when the run was settled, suspended or backing off)


@dataclass
class _Operation:
    suspend: bool = False
    terminated: bool = False
    waiting: bool = False
    failed_after_retries: bool = False


def step_id(run: str, name: str) -> str:
    """A step's id in one run (KubeVela's are random; these are stable, so that a pass is repeatable)."""
    return hashlib.sha256(f"{run}/{name}".encode()).hexdigest()[:10]


def run_key(status: dict[str, Any]) -> str:
    return f'{status.get("appRevision", "")}@{status.get("startTime", "")}'


def status_digest(status: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(status, sort_keys=True, default=str).encode()).hexdigest()


def _skip_next(phase: str | None, depends_on: bool) -> bool:
    if depends_on:
        return phase != ph.SUCCEEDED
    return phase not in (ph.SUCCEEDED, ph.SKIPPED)


class _Pass:
    """One pass over the steps (mutable scratch state; the public entry is `run`)."""

    def __init__(self, workflow: Workflow, status: dict[str, Any], runner: TaskRunner, context: WorkflowContext,
                 memory: RunMemory, now: datetime, settings: Settings, basic: dict[str, Any]):
        self.workflow, self.status, self.runner, self.context = workflow, status, runner, context
        self.memory, self.now, self.settings, self.basic = memory, now, settings, basic
        self.run = run_key(status)
        self.parent = ""
        self.op = _Operation()
        self.timeouts: dict[str, float] = {}
        self.step_status: dict[str, dict[str, Any]] = {}
        for s in ph.iter_statuses(status.get("steps") or []):
            if s.get("name"):
                self.step_status[s["name"]] = s
        names = {step.name for step in workflow.all_steps()}
        # KubeVela also knows a step by its properties' name or component (dependsOn and `if` may use it)
        self.aliases = {step.additional_name: step.name for step in workflow.all_steps()
                        if step.additional_name and step.additional_name not in names}
        self.depends = {step.name: list(step.depends_on) + [d for d in runner.depends_on(step)
                                                             if d not in step.depends_on]
                        for step in workflow.all_steps()}

    def status_named(self, name: str) -> dict[str, Any] | None:
        found = self.step_status.get(name)
        if found is None and name in self.aliases:
            found = self.step_status.get(self.aliases[name])
        return found

    # --- status -------------------------------------------------------------------------------------------

    def id_of(self, name: str) -> str:
        return (self.step_status.get(name) or {}).get("id") or step_id(self.run, name)

    def update(self, status: dict[str, Any]) -> None:
        """Record a step's status (KubeVela's updateStepStatus), under its group when it is a sub-step."""
        now = ph.timestamp(self.now)
        self.memory.last_execute = self.now.timestamp()
        status = {k: v for k, v in status.items() if v not in ("", None)}
        steps = self.status.setdefault("steps", [])
        holder = self.parent or status["name"]
        entry = next((s for s in steps if s.get("name") == holder), None)
        if entry is not None and self.parent:
            subs = entry.setdefault("subSteps", [])
            old = next((s for s in subs if s.get("name") == status["name"]), None)
            if old is not None:
                self._stamp(status, old, now)
                subs[subs.index(old)] = status
            else:
                status["firstExecuteTime"] = status["lastExecuteTime"] = now
                subs.append(status)
        elif entry is not None:
            self._stamp(status, entry, now)
            subs = entry.get("subSteps")
            entry.clear()
            entry.update(status)
            if subs is not None:
                entry["subSteps"] = subs
        else:
            status["firstExecuteTime"] = status["lastExecuteTime"] = now
            if self.parent:
                steps.append({"name": self.parent, "firstExecuteTime": now, "subSteps": [status]})
            else:
                steps.append(status)
        self.step_status[status["name"]] = status

    @staticmethod
    def _stamp(status: dict[str, Any], old: dict[str, Any], now: str) -> None:
        status["firstExecuteTime"] = old.get("firstExecuteTime") or now
        # lastExecuteTime moves only when the step's state does: a poll that finds a waiting step as it was
        # then writes nothing
        same = all(old.get(k) == status.get(k) for k in ("phase", "message", "reason"))
        status["lastExecuteTime"] = old.get("lastExecuteTime") if same and old.get("lastExecuteTime") else now

    # --- scheduling ---------------------------------------------------------------------------------------

    def pending(self, step: StepSpec) -> dict[str, Any] | None:
        """The pending status of a step that waits for what it depends on or for an input, else None."""
        status = {"id": self.id_of(step.name), "name": step.name, "type": step.type, "phase": ph.PENDING}
        for dep in self.depends.get(step.name, []):
            status["message"] = f"Pending on DependsOn: {dep}"
            found = self.status_named(dep)
            if found is None or not ph.is_finished(found.get("phase"), found.get("reason")):
                return status
        for item in step.inputs:
            status["message"] = f"Pending on Input: {item.from_}"
            if not input_value(item.from_, self.context, self.basic_of(step))[0]:
                return status
        return None

    def basic_of(self, step: StepSpec) -> dict[str, Any]:
        return {"context": {**self.basic, "stepName": step.name}, "parameter": step.properties}

    def finished(self, name: str) -> bool:
        found = self.step_status.get(name)
        return found is not None and ph.is_finished(found.get("phase"), found.get("reason"))

    def run_steps(self, steps: list[StepSpec], dag: bool) -> None:
        for index, step in enumerate(steps):
            if self.finished(step.name):
                continue
            if step.name not in self.step_status:
                self.memory.forget_step(self.id_of(step.name))
            waiting = self.pending(step)
            if waiting is not None:
                self.memory.increase_backoff(waiting["id"])
                self.update(waiting)
                if dag:
                    continue
                return
            status, op = self.run_one(step, self.depend_phase(steps, index, dag))
            self.finish_step(op)
            if not ph.is_finished(status["phase"], status.get("reason")) and status["phase"] != ph.SUSPENDING:
                self.update(status)
                self.memory.note_not_done(status["id"], status.get("message", ""))
                if dag:
                    continue
                return
            self.memory.clear_backoff(status["id"])
            self.update(status)
            if not dag and self.status.get("suspend"):
                return

    def run_as_dag(self, steps: list[StepSpec], pending_round: bool) -> None:
        todo, waiting = [], []
        for step in steps:
            if self.finished(step.name):
                self.memory.clear_backoff(self.id_of(step.name))
                continue
            status = self.pending(step)
            if status is not None:
                if pending_round:
                    self.memory.increase_backoff(status["id"])
                    self.update(status)
                waiting.append(step)
            else:
                todo.append(step)
        if todo:
            self.run_steps(todo, dag=True)
            if self.status.get("suspend"):
                return
            if waiting:
                self.run_as_dag(waiting, pending_round=True)

    def run_list(self, steps: list[StepSpec], dag: bool) -> None:
        if dag:
            self.run_as_dag(steps, pending_round=False)
        else:
            self.run_steps(steps, dag=False)
        if self.op.failed_after_retries:
            self.status["terminated"] = True

    def depend_phase(self, steps: list[StepSpec], index: int, dag: bool) -> str | None:
        name = steps[index].name
        if dag or self.depends.get(name):
            return self.depends_on_phase(name, set())
        if index < 1:
            return ph.SUCCEEDED
        for earlier in reversed(steps[:index]):
            phase = (self.step_status.get(earlier.name) or {}).get("phase")
            if _skip_next(phase, False):
                return phase
        return (self.step_status.get(steps[index - 1].name) or {}).get("phase")

    def depends_on_phase(self, name: str, seen: set[str]) -> str | None:
        for dep in self.depends.get(name, []):
            phase = (self.status_named(dep) or {}).get("phase")
            if phase != ph.SUCCEEDED:
                return phase
            if dep not in seen:
                seen.add(dep)
                deeper = self.depends_on_phase(dep, seen)
                if deeper != ph.SUCCEEDED:
                    return deeper
        return ph.SUCCEEDED

    def finish_step(self, op: _Operation) -> None:
        self.status["terminated"] = bool(self.status.get("terminated")) or op.terminated
        self.op.failed_after_retries |= op.failed_after_retries
        self.op.waiting |= op.waiting
        self.op.suspend |= op.suspend
        self.status["suspend"] = self.op.suspend
        if self.op.failed_after_retries:
            self.status["terminated"] = True

    # --- one step -------------------------------------------------------------------------------------------

    def precheck(self, step: StepSpec, depend_phase: str | None) -> tuple[bool, bool, str]:
        """(skip, timed out, message) before a step runs."""
        parent = self.step_status.get(self.parent) if self.parent else None
        if parent is not None and parent.get("phase") == ph.SKIPPED:
            return True, False, ""
        skip, message = False, ""
        if step.if_ == "always":
            pass
        elif step.if_ is None:
            skip = _skip_next(depend_phase, bool(self.depends.get(step.name)))
        else:
            basic = self.basic_of(step)
            view = {name: ph.step_view(s) for name, s in self.step_status.items()}
            view.update({alias: view[name] for alias, name in self.aliases.items() if name in view})
            try:
                skip = not condition_holds(step.if_, {"status": view, "context": basic["context"],
                                                      "parameter": step.properties,
                                                      "inputs": inputs_view(step, self.context, basic)})
            except ValueError as err:
                return True, False, f"pre check error: {err}"
        if skip:
            return True, False, message
        if parent is not None and parent.get("phase") == ph.FAILED and parent.get("reason") == ph.TIMEOUT:
            return False, True, ""
        first = ph.parse_timestamp((self.step_status.get(step.name) or {}).get("firstExecuteTime"))
        if first is not None and step.timeout is not None:
            deadline = first.timestamp() + step.timeout
            self.timeouts[step.name] = deadline
            if self.now.timestamp() > deadline:
                return False, True, ""
        return False, False, ""

    def run_one(self, step: StepSpec, depend_phase: str | None) -> tuple[dict[str, Any], _Operation]:
        status: dict[str, Any] = {"id": self.id_of(step.name), "name": step.name, "type": step.type,
                                  "phase": ph.SUCCEEDED}
        op = _Operation()
        skip, timed_out, message = self.precheck(step, depend_phase)
        value: Any = None
        if skip:
            status.update(phase=ph.SKIPPED, reason=ph.SKIP, message=message)
        elif timed_out:
            status.update(phase=ph.FAILED, reason=ph.TIMEOUT, message="")
            op.terminated = True
        if step_type(step.type).sub_steps:
            status = self.run_group(step, status, op)
            if not (skip or timed_out):
                op = self.op_after_group()
        elif timed_out:
            # KubeVela runs a timed-out step's template once more (its outputs come from it); it stays failed
            value = self.run_task(step, dict(status, phase=ph.SUCCEEDED), _Operation())
        elif not skip:
            value = self.run_task(step, status, op)
        if step.outputs and ph.is_finished(status["phase"], status.get("reason")):
            problems, too_large = set_outputs(step, value, status["phase"] == ph.SKIPPED, self.context)
            if problems:
                status["message"] = bounded(problems)
            if too_large:
                status.update(phase=ph.FAILED, reason=ph.OUTPUT)
                op.terminated = True
        if value is not None:
            value.release()  # its outputs are read
        return status, op

    def run_task(self, step: StepSpec, status: dict[str, Any], op: _Operation) -> Any:
        previous = dict(self.step_status.get(step.name) or {})
        basic = self.basic_of(step)
        try:
            props = with_inputs(step, self.context, basic)
        except ValueError as err:
            self.error(status, op, str(err), ph.INPUT, wait=False)
            return None
        result = self.runner.run(step, props, Session(status["id"], previous, self.parent, self.context, self.now))
        status["phase"] = result.phase
        status["reason"] = result.reason
        status["message"] = result.message
        op.waiting, op.suspend, op.terminated = result.wait, result.suspend, result.terminated
        if result.phase == ph.FAILED and result.reason in (ph.EXECUTE, ph.RENDERING):
            self.error(status, op, result.message, result.reason, wait=result.reason == ph.EXECUTE)
        return result.value

    def error(self, status: dict[str, Any], op: _Operation, message: str, reason: str, wait: bool) -> None:
        """KubeVela's exec.err: failed; Execute is retried (until too many errors), anything else is final."""
        op.waiting = wait
        status.update(phase=ph.FAILED, message=message, reason=reason)
        if reason != ph.EXECUTE:
            op.terminated = True
        if self.memory.increase_failed(status["id"]) >= self.settings.max_error_retries:
            op.waiting = False
            op.failed_after_retries = True
            status["reason"] = ph.FAILED_AFTER_RETRIES

    def run_group(self, step: StepSpec, status: dict[str, Any], op: _Operation) -> dict[str, Any]:
        """step-group: its sub-steps run as a DAG (or one by one); its phase follows theirs."""
        if status["phase"] in (ph.SKIPPED, ph.FAILED):
            self.step_status[step.name] = {**(self.step_status.get(step.name) or {}), **status}
        self.parent = step.name
        try:
            self.run_list(list(step.sub_steps), dag=(step.mode or self.workflow.mode.sub_steps) == MODE_DAG)
        finally:
            self.parent = ""
        if status["phase"] == ph.SKIPPED or (status["phase"] == ph.FAILED and status.get("reason") == ph.TIMEOUT):
            return status
        entry = next((s for s in self.status.get("steps") or [] if s.get("name") == step.name), {})
        return group_status(status, entry.get("subSteps") or [], len(step.sub_steps))

    def op_after_group(self) -> _Operation:
        return _Operation(bool(self.status.get("suspend")), bool(self.status.get("terminated")), self.op.waiting,
                          self.op.failed_after_retries)

    # --- when to come back ------------------------------------------------------------------------------------

    def next_timeout(self) -> float | None:
        left = [self.timeouts[s["name"]] - self.now.timestamp() for s in self.status.get("steps") or []
                if s.get("phase") == ph.RUNNING and s.get("name") in self.timeouts]
        if not left:
            return None
        return MIN_TIMEOUT if min(left) < MIN_TIMEOUT else math.ceil(min(left))

    def set_next_execute(self) -> None:
        ids = [s["id"] for s in ph.iter_statuses(self.status.get("steps") or []) if s.get("id")]
        failed = any(s.get("phase") == ph.FAILED for s in self.status.get("steps") or [])
        interval: float = wait_interval(ids, self.memory, failed, self.settings)
        timeout = self.next_timeout()
        if timeout is not None and 0 < timeout < interval:
            interval = timeout
        self.memory.next_execute = (self.memory.last_execute or self.now.timestamp()) + interval


def run(workflow: Workflow, previous: dict[str, Any], runner: TaskRunner, context: WorkflowContext,
        memory: RunMemory, now: datetime, basic: dict[str, Any], settings: Settings = DEFAULTS) -> Outcome:
    """One pass of a workflow. `previous` is status.workflow of this run (with appRevision and, once started,
    startTime); `basic` the context every step's template sees (name, namespace, appName, appRevision...). The
    caller records in `memory.produced` the digest of the status it stores, so that a pass before the backoff
    is up, over that same status, runs nothing."""
    status = json.loads(json.dumps(previous))
    status.setdefault("mode", str(workflow.mode))
    status.setdefault("startTime", ph.timestamp(now))
    status.setdefault("suspend", False)
    status.setdefault("terminated", False)
    status.setdefault("finished", False)
    done, succeeded = all_done(workflow, status)
    if status.get("terminated") and done:
        return Outcome(status, settle(workflow, status, now))
    if suspended(status):
        state = with_state(status, ph.WF_SUSPENDING)
        return Outcome(status, state, suspend_wait(workflow, status, context, now))
    if succeeded:
        return Outcome(status, settle(workflow, status, now))
    if memory.next_execute is not None and now.timestamp() < memory.next_execute and \
            memory.produced == status_digest(previous):
        # nothing changed since this process last ran the steps: wait out the backoff rather than poll
        return Outcome(status, status.get("status") or ph.EXECUTING, memory.next_execute - now.timestamp())
    one = _Pass(workflow, status, runner, context, memory, now, settings, basic)
    one.run_list(list(workflow.steps), dag=workflow.mode.steps == MODE_DAG)
    one.set_next_execute()
    state = state_of(workflow, status)
    ended = state in (ph.WF_SUCCEEDED, ph.WF_FAILED, ph.WF_TERMINATED)
    outcome = Outcome(status, settle(workflow, status, now) if ended else with_state(status, state))
    outcome.ran = True
    if state == ph.EXECUTING:
        outcome.requeue_after = max((memory.next_execute or now.timestamp()) - now.timestamp(), 0.0)
    elif state == ph.WF_SUSPENDING:
        outcome.requeue_after = suspend_wait(workflow, status, context, now)
    return outcome

