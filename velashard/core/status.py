"""An Application's status assembled from plain data: the workflow's steps, each component's health, the
conditions and the phase. Pure; `now` is an argument."""

from __future__ import annotations

from typing import Any

from velashard.core.rendering import RenderedComponent
from velashard.core.workflow import WorkflowState

Health = dict[str, tuple[bool, str]]  # component name -> (healthy, message)
SETTLED_PHASES = ("running", "workflowSuspending", "workflowFailed")


def condition(ctype: str, ok: bool, reason: str, message: str, now: str) -> dict[str, Any]:
    return {"type": ctype, "status": "True" if ok else "False", "reason": reason, "message": message,
            "lastTransitionTime": now}


def workflow_status(state: WorkflowState) -> dict[str, Any]:
    return {"steps": [s.as_dict() for s in state.steps], "finished": state.finished, "suspend": state.suspended,
            "message": state.message}


def services(components: list[RenderedComponent], health: Health) -> list[dict[str, Any]]:
    return [{"name": c.name, "type": c.type, "healthy": health[c.name][0], "message": health[c.name][1],
             "traits": [{"type": t} for t in c.traits]} for c in components]


def workflow_conditions(state: WorkflowState, health: Health, now: str) -> list[dict[str, Any]]:
    """WorkflowFinished (why not, when not) and Healthy (naming each unhealthy component)."""
    all_healthy = all(h for h, _ in health.values())
    reason = "Failed" if state.failed else "Suspended" if state.suspended else \
        "Finished" if state.finished else "Running"
    return [condition("WorkflowFinished", state.finished, reason, state.message, now),
            condition("Healthy", all_healthy, "Healthy" if all_healthy else "Unhealthy",
                      "; ".join(f"{n}: {m}" for n, (h, m) in sorted(health.items()) if not h), now)]


def with_phase(previous: dict[str, Any], status: dict[str, Any], phase: str, generation: int | None,
               conditions: list[dict[str, Any]]) -> dict[str, Any]:
    """`status` completed with the phase, the generation it describes and the conditions; a condition whose
    value did not change keeps its transition time from `previous` (the status as stored)."""
    before = {c["type"]: c for c in previous.get("conditions") or []}
    carried = []
    for cond in conditions:
        old = before.get(cond["type"])
        if old and old.get("status") == cond["status"]:
            cond = dict(cond, lastTransitionTime=old.get("lastTransitionTime", cond["lastTransitionTime"]))
        carried.append(cond)
    return dict(status, status=phase, observedGeneration=generation, conditions=carried)
