"""The application's side of its workflow, pure: which run the app is on (its revision, or its publishVersion),
when a run starts again (a new revision, `app.oam.dev/restart-workflow`), the status of the default workflow the
controller runs itself (deploy every component), and the app's phase from the run's state and its health."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any

from velashard.durations import go_duration
from velashard.workflow import phases as ph

PUBLISH_VERSION = "app.oam.dev/publishVersion"
RESTART = "app.oam.dev/restart-workflow"
MODE = "StepByStep-DAG"
DEFAULT_STEP = "deploy"


def run_revision(app: dict[str, Any], revision_name: str) -> str:
    """What status.workflow.appRevision is for the app now: a pinned publishVersion, else the revision."""
    return (app["metadata"].get("annotations") or {}).get(PUBLISH_VERSION) or revision_name


def restart_due(annotation: str | None, workflow: dict[str, Any], now: datetime) -> tuple[bool, bool, float | None]:
    """(restart now, remove the annotation, seconds until it is due) for `app.oam.dev/restart-workflow`:
    "true" restarts as soon as the run has finished; an RFC3339 time once it has come and the run has finished
    (after it); a Go duration that long after the run finished, again and again (the annotation stays). A run
    still going is never cut short; a value that is none of these is ignored."""
    if not annotation:
        return False, False, None
    finished_at = ph.parse_timestamp(workflow.get("endTime")) if workflow.get("finished") else None
    if annotation == "true":
        return (True, True, None) if finished_at is not None else (False, False, None)
    when = _rfc3339(annotation)
    if when is not None:
        if now < when:
            return False, False, (when - now).total_seconds()
        if finished_at is None or when <= finished_at:
            return False, finished_at is not None and when <= finished_at, None
        return True, True, None
    try:
        every = go_duration(annotation)
    except ValueError:
        return False, False, None
    if finished_at is None:
        return False, False, None
    due = finished_at + timedelta(seconds=every)
    if now < due:
        return False, False, (due - now).total_seconds()
    return True, False, None


def deadline(workflow: dict[str, Any], annotation: str | None, default: float, now: datetime
             ) -> tuple[bool, str, str, float | None] | None:
    """The WorkflowDeadline condition of a run not finished (suspended ones included: a run waiting for an
    approval nobody gives hangs too) as (ok, reason, message, seconds until it is due); None for a finished or
    terminated run, or without a deadline. The annotation's Go duration wins over the controller's default."""
    if not workflow or workflow.get("finished") or workflow.get("terminated"):
        return None
    limit, said = default, ""
    if annotation:
        try:
            limit, said = go_duration(annotation), annotation
        except ValueError:
            said = ""
    started = ph.parse_timestamp(workflow.get("startTime"))
    if limit <= 0 or started is None:
        return None
    due = started + timedelta(seconds=limit)
    source = f"annotation {said}" if said else f"--workflow-deadline {int(limit)}s"
    if now < due:
        return True, "WithinDeadline", f"due at {ph.timestamp(due)} ({source})", (due - now).total_seconds()
    return False, "DeadlineExceeded", f"the workflow has not finished within its deadline ({source}): started at " \
                                      f"{workflow.get('startTime')}", None


def _rfc3339(text: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def default_status(previous: dict[str, Any], run: str, outcome: tuple[str, str, str], now: datetime
                   ) -> dict[str, Any]:
    """status.workflow of the default workflow: one `deploy` step whose (phase, message, reason) is `outcome`."""
    phase, message, reason = outcome
    stamp = ph.timestamp(now)
    old = next(iter(previous.get("steps") or []), {})
    step = {"id": old.get("id") or _step_id(run), "name": DEFAULT_STEP, "type": DEFAULT_STEP, "phase": phase}
    if message:
        step["message"] = message
    if reason:
        step["reason"] = reason
    step["firstExecuteTime"] = old.get("firstExecuteTime") or stamp
    same = all(old.get(k) == step.get(k) for k in ("phase", "message", "reason"))
    step["lastExecuteTime"] = old["lastExecuteTime"] if same and old.get("lastExecuteTime") else stamp
    failed = phase == ph.FAILED
    done = phase == ph.SUCCEEDED or failed
    state = ph.WF_SUCCEEDED if phase == ph.SUCCEEDED else ph.WF_FAILED if failed else ph.EXECUTING
    status = {"appRevision": run, "mode": MODE, "status": state, "finished": done, "terminated": failed,
              "suspend": False, "message": message if failed else "", "steps": [step],
              "startTime": previous.get("startTime") or stamp}
    if done:
        status["endTime"] = previous.get("endTime") or stamp
    return status


def _step_id(run: str) -> str:
    return hashlib.sha256(f"{run}/{DEFAULT_STEP}".encode()).hexdigest()[:10]


def app_phase(state: str, all_healthy: bool) -> str:
    """KubeVela's application phase from the run's state and the components' health."""
    return {ph.EXECUTING: "runningWorkflow", ph.WF_SUSPENDING: "workflowSuspending",
            ph.WF_TERMINATED: "workflowTerminated", ph.WF_FAILED: "workflowFailed"}.get(
        state, "running" if all_healthy else "unhealthy")


def state_of(workflow: dict[str, Any]) -> str:
    """The run's state as status.workflow records it (for statuses written before it had `status`)."""
    if workflow.get("status"):
        return workflow["status"]
    if workflow.get("suspend"):
        return ph.WF_SUSPENDING
    if workflow.get("finished"):
        failed = any(s.get("phase") == ph.FAILED for s in workflow.get("steps") or [])
        return ph.WF_FAILED if failed else ph.WF_SUCCEEDED
    return ph.EXECUTING
