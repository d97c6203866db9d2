"""vela/builtin: the actions that steer a step itself: wait until something holds, suspend, fail, stop, say
something in the step's status, and read or write the run's variables."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from velashard.durations import go_duration
from velashard.workflow import phases as ph
from velashard.workflow.providers.base import ActionBreak, Provider, ProviderError, Runtime

RESUME_AT = "resumeTimeStamp"
MAX_SUSPEND, MAX_SUSPEND_TEXT = 100 * 365 * 86400.0, "100 years"  # beyond it a date overflows
SUSPENDED_AT = "suspendTimeStamp"


def _message(params: dict[str, Any]) -> str:
    value = params.get("message")
    return value if isinstance(value, str) else ""


def wait(params: dict[str, Any], rt: Runtime) -> None:
    if params.get("continue") is True:
        return None
    rt.action.wait_for(_message(params))
    raise ActionBreak()


def stop(params: dict[str, Any], rt: Runtime) -> None:
    rt.action.terminate(_message(params))
    raise ActionBreak()


def fail(params: dict[str, Any], rt: Runtime) -> None:
    rt.action.fail(_message(params))
    raise ActionBreak()


def message(params: dict[str, Any], rt: Runtime) -> None:
    rt.action.note(_message(params))
    return None


def variable(params: dict[str, Any], rt: Runtime) -> dict[str, Any] | None:
    path = [p for p in str(params.get("path") or "").split(".") if p]
    if not path:
        raise ProviderError("var: path is required")
    if params.get("method", "Get") == "Put":
        rt.context.set_var(params.get("value"), path)
        return None
    try:
        return {"value": rt.context.get_var(path)}
    except KeyError:
        raise ProviderError(f'var {".".join(path)} not found') from None


def _stamp(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def suspend(params: dict[str, Any], rt: Runtime) -> None:
    """Suspend the step: until its duration is up, or until the workflow is resumed (which sets the step's phase
    to running before it runs again: then this action lets the step go on)."""
    ctx, sid = rt.context, rt.step_id
    text = _message(params) or f"Suspended by field {rt.field_label}"
    resume_at = ph.parse_timestamp(ctx.get_mutable(sid, RESUME_AT))
    if resume_at is not None:
        if rt.now >= resume_at or rt.action.previous_phase == ph.RUNNING:  # its time is up, or it was resumed
            rt.action.resume()
            return None
        rt.action.suspend_step(text)
        raise ActionBreak()
    if params.get("duration"):
        try:
            seconds = go_duration(params["duration"])
        except ValueError:
            raise ProviderError(f'suspend: duration "{params["duration"]}" is not a duration like 30s or 5m') from None
        if seconds > MAX_SUSPEND:
            raise ProviderError(f'suspend: duration "{params["duration"]}" is longer than {MAX_SUSPEND_TEXT}')
        ctx.set_mutable(_stamp(rt.now + timedelta(seconds=seconds)), sid, RESUME_AT)
        if seconds <= 0:
            return None
    if ctx.get_mutable(sid, rt.field_label, SUSPENDED_AT):
        if rt.action.previous_phase == ph.RUNNING:
            return None  # suspended before and resumed since
    else:
        ctx.set_mutable(_stamp(rt.now), sid, rt.field_label, SUSPENDED_AT)
    rt.action.suspend_step(text)
    raise ActionBreak()


HANDLERS = {"wait": wait, "suspend": suspend, "break": stop, "fail": fail, "message": message, "var": variable}
PROVIDER = Provider("vela/builtin", "builtin", HANDLERS)
