"""KubeVela's words for a workflow's and a step's state: phases, reasons, and when a step counts as finished."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

# a step's phase
SUCCEEDED, FAILED, SKIPPED, RUNNING, PENDING, SUSPENDING = ("succeeded", "failed", "skipped", "running", "pending",
                                                            "suspending")
# a workflow run's state (status.workflow.status)
EXECUTING, WF_SUCCEEDED, WF_FAILED, WF_SUSPENDING, WF_TERMINATED = ("executing", "succeeded", "failed", "suspending",
                                                                     "terminated")
# a step's reason
WAIT, SKIP, RENDERING, EXECUTE, SUSPEND, TERMINATE = "Wait", "Skip", "Rendering", "Execute", "Suspend", "Terminate"
INPUT, OUTPUT, FAILED_AFTER_RETRIES, TIMEOUT, ACTION = "Input", "Output", "FailedAfterRetries", "Timeout", "Action"

StepStatus = dict[str, Any]


def is_finished(phase: str | None, reason: str | None) -> bool:
    """A step that will not run again: succeeded, skipped, or failed for good (a failed Execute is retried)."""
    if phase == FAILED:
        return bool(reason) and reason != EXECUTE
    return phase in (SUCCEEDED, SKIPPED)


def timestamp(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(text: Any) -> datetime | None:
    if not text or not isinstance(text, str):
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def step_view(status: StepStatus) -> dict[str, Any]:
    """A step's status as `if` expressions see it (status.<step>.succeeded and the like)."""
    phase, reason = status.get("phase"), status.get("reason")
    return {**status, "failed": phase == FAILED, "succeeded": phase == SUCCEEDED, "skipped": phase == SKIPPED,
            "timeout": reason == TIMEOUT, "failedAfterRetries": reason == FAILED_AFTER_RETRIES,
            "terminate": reason == TERMINATE}


def iter_statuses(steps: list[dict[str, Any]]) -> list[StepStatus]:
    """Every step's and sub-step's status, in order."""
    return [s for top in steps for s in (top, *(top.get("subSteps") or []))]
