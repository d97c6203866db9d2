"""A workflow run's state read from its status, KubeVela's rules: whether every step is done (and succeeded),
whether it is suspended or was terminated by hand, what a step-group's phase is from its sub-steps', and how long
until a suspended step's duration or timeout is up. Pure."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from velashard.workflow import phases as ph
from velashard.workflow.context import WorkflowContext
from velashard.workflow.spec import Workflow


def all_done(workflow: Workflow, status: dict[str, Any]) -> tuple[bool, bool]:
    """(every step finished, every step succeeded or skipped) by the status (KubeVela's checkRunners)."""
    by_name = {s.get("name"): s for s in status.get("steps") or []}
    succeeded = True
    for step in workflow.steps:
        found = by_name.get(step.name)
        if found is None or not ph.is_finished(found.get("phase"), found.get("reason")):
            return False, False
        succeeded = succeeded and found.get("phase") in (ph.SUCCEEDED, ph.SKIPPED)
    return True, succeeded


def terminated_by_hand(status: dict[str, Any]) -> bool:
    manually = False
    for step in status.get("steps") or []:
        if step.get("phase") == ph.FAILED:
            if step.get("reason") != ph.TERMINATE:
                return False
            manually = True
    return manually


def suspended(status: dict[str, Any]) -> bool:
    """Suspended, unless a step suspended itself and must run to see whether its time has come."""
    if not status.get("suspend"):
        return False
    return not any(s.get("reason") == ph.SUSPEND and s.get("phase") == ph.SUSPENDING
                   for s in ph.iter_statuses(status.get("steps") or []))


def state_of(workflow: Workflow, status: dict[str, Any]) -> str:
    """The run's state from its status (KubeVela's checkWorkflowPhase)."""
    done, succeeded = all_done(workflow, status)
    if status.get("terminated") and done:
        return ph.WF_TERMINATED if terminated_by_hand(status) else ph.WF_FAILED
    if status.get("suspend"):
        return ph.WF_SUSPENDING
    if succeeded:
        return ph.WF_SUCCEEDED
    return ph.EXECUTING


def suspend_wait(workflow: Workflow, status: dict[str, Any], context: WorkflowContext, now: datetime) -> float | None:
    """Seconds until a suspended step's duration or timeout is up (KubeVela's GetSuspendBackoffWaitTime)."""
    by_name = {s["name"]: s for s in ph.iter_statuses(status.get("steps") or []) if s.get("name")}
    waits = []
    for step in workflow.all_steps():
        found = by_name.get(step.name) or {}
        if found.get("phase") != ph.SUSPENDING:
            continue
        first = ph.parse_timestamp(found.get("firstExecuteTime"))
        if step.timeout is not None and first is not None:
            left = first.timestamp() + step.timeout - now.timestamp()
            if left > 0:
                waits.append(left)
        resume = ph.parse_timestamp(context.get_mutable(found.get("id", ""), "resumeTimeStamp"))
        if resume is not None:
            waits.append(max(resume.timestamp() - now.timestamp(), 0))
    return min(waits) if waits else None


def group_status(status: dict[str, Any], subs: list[dict[str, Any]], expected: int) -> dict[str, Any]:
    """A step-group's phase from its sub-steps' (KubeVela's getStepGroupStatus)."""
    count: dict[str, int] = {}
    for sub in subs:
        for key in (sub.get("phase", ""), sub.get("reason", "")):
            count[key] = count.get(key, 0) + 1
    status["reason"] = ""
    if count.get(ph.SUSPENDING):
        status["phase"] = ph.SUSPENDING
    elif len(subs) < expected or count.get(ph.RUNNING):
        status["phase"] = ph.RUNNING
    elif count.get(ph.PENDING):
        status["phase"] = ph.PENDING
    elif count.get(ph.FAILED):
        status["phase"] = ph.FAILED
        status["reason"] = next((r for r in (ph.FAILED_AFTER_RETRIES, ph.TIMEOUT, ph.ACTION, ph.TERMINATE)
                                 if count.get(r)), "")
    elif expected and count.get(ph.SKIPPED) == expected:
        status.update(phase=ph.SKIPPED, reason=ph.SKIP)
    else:
        status["phase"] = ph.SUCCEEDED
    return status
