"""What `velashard workflow suspend|resume|terminate|restart` do to an app's status.workflow, as `vela workflow`
does: pure functions from the status to the status to write (OperationError when the run is not in a state the
operation applies to). The controller's next pass acts on what they wrote."""

from __future__ import annotations

import copy
from typing import Any

from velashard.workflow import phases as ph
from velashard.workflow.spec import MODE_DAG, Workflow


class OperationError(Exception):
    pass


def _running(workflow: dict[str, Any] | None) -> dict[str, Any]:
    if not workflow:
        raise OperationError("the workflow in application is not running")
    return copy.deepcopy(workflow)


def _set_phase(step: dict[str, Any], phase: str) -> None:
    """A step and its unfinished sub-steps to `phase` (KubeVela's OperateSteps)."""
    step["phase"] = phase
    for sub in step.get("subSteps") or []:
        if not ph.is_finished(sub.get("phase"), sub.get("reason")):
            sub["phase"] = phase


def _operate(workflow: dict[str, Any], step_name: str, from_phase: str, to_phase: str) -> None:
    found = not step_name
    for step in workflow.get("steps") or []:
        for sub in step.get("subSteps") or []:
            if sub.get("phase") == from_phase and (not step_name or sub.get("name") == step_name):
                sub["phase"] = to_phase
                found = found or sub.get("name") == step_name
        if step.get("phase") == from_phase and (not step_name or step.get("name") == step_name):
            _set_phase(step, to_phase)
            found = found or step.get("name") == step_name
    if not found:
        raise OperationError(f"can not find step {step_name}")


def suspend(workflow: dict[str, Any] | None, step: str = "") -> dict[str, Any]:
    """Suspend the run (its running steps, or only the one named)."""
    out = _running(workflow)
    if step and out.get("terminated"):
        raise OperationError("can not suspend a terminated workflow")
    out["suspend"] = True
    _operate(out, step, ph.RUNNING, ph.SUSPENDING)
    return out


def resume(workflow: dict[str, Any] | None, step: str = "") -> dict[str, Any] | None:
    """Resume a suspended run (its suspending steps, or only the one named); None when it is not suspended."""
    out = _running(workflow)
    if out.get("terminated"):
        raise OperationError("can not resume a terminated workflow")
    if not out.get("suspend"):
        return None
    out["suspend"] = False
    _operate(out, step, ph.SUSPENDING, ph.RUNNING)
    return out


def terminate(workflow: dict[str, Any] | None) -> dict[str, Any]:
    """End the run: running and suspending steps fail (reason Terminate)."""
    out = _running(workflow)
    out["terminated"] = True
    out["suspend"] = False
    for step in out.get("steps") or []:
        for s in (step, *(step.get("subSteps") or [])):
            if s.get("phase") == ph.FAILED:
                if s.get("reason") not in (ph.FAILED_AFTER_RETRIES, ph.TIMEOUT):
                    s["reason"] = ph.TERMINATE
            elif s.get("phase") in (ph.RUNNING, ph.SUSPENDING):
                s["phase"], s["reason"] = ph.FAILED, ph.TERMINATE
    return out


def _after(workflow: Workflow, name: str) -> list[str]:
    """The steps that come after `name` in its list (StepByStep) or depend on it, directly or not (DAG)."""
    for steps, dag in ((list(workflow.steps), workflow.mode.steps == MODE_DAG),
                       *((list(s.sub_steps), workflow.mode.sub_steps == MODE_DAG) for s in workflow.steps)):
        names = [s.name for s in steps]
        if name not in names:
            continue
        if not dag:
            return names[names.index(name) + 1:]
        later: list[str] = []
        frontier = [name]
        while frontier:
            current = frontier.pop()
            for s in steps:
                if current in s.depends_on and s.name not in later:
                    later.append(s.name)
                    frontier.append(s.name)
        return later
    return []


def restart_from(workflow_status: dict[str, Any] | None, workflow: Workflow, step: str
                 ) -> tuple[dict[str, Any], list[str]]:
    """Run again from a failed step: its status and those of the steps after it are cleared; returns the status
    and the names of the outputs to clear from the run's context (KubeVela's CleanStatusFromStep)."""
    out = _running(workflow_status)
    for key in ("terminated", "suspend", "finished"):
        out[key] = False
    out.pop("endTime", None)
    out["status"] = ph.EXECUTING
    steps = out.get("steps") or []
    cleared: list[str] = []
    for top in steps:
        if top.get("name") == step:
            if top.get("phase") != ph.FAILED:
                raise OperationError("can not restart from a non-failed step")
            cleared = [step, *_after(workflow, step)]
            out["steps"] = [s for s in steps if s.get("name") not in cleared]
            break
        subs = top.get("subSteps") or []
        if any(sub.get("name") == step for sub in subs):
            if next(s for s in subs if s.get("name") == step).get("phase") != ph.FAILED:
                raise OperationError("can not restart from a non-failed step")
            inner = [step, *_after(workflow, step)]
            top["subSteps"] = [s for s in subs if s.get("name") not in inner]
            top["phase"], top["reason"] = ph.RUNNING, ""
            later = _after(workflow, top["name"])
            out["steps"] = [s for s in steps if s.get("name") not in later]
            cleared = inner + later
            break
    else:
        raise OperationError(f"failed step {step} not found")
    outputs = [o.name for s in workflow.all_steps() if s.name in cleared for o in s.outputs]
    return out, outputs
