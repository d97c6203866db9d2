"""Health of rendered resources and components from their observed state: built-in rules per kind, or a
definition's health policy."""

from __future__ import annotations

from typing import Any

from jinja2 import TemplateError

from velashard.core.expressions import compiled


def resource_health(obj: dict[str, Any] | None) -> tuple[bool, str]:
    """(healthy, message) for one live object; a missing object is unhealthy."""
    if obj is None:
        return False, "not found"
    kind = obj.get("kind")
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    generation = (obj.get("metadata") or {}).get("generation")
    if kind in ("Deployment", "StatefulSet"):
        want = spec.get("replicas", 1)
        if status.get("observedGeneration", 0) < (generation or 0):
            return False, "waiting for the controller to observe the latest generation"
        ready = status.get("availableReplicas" if kind == "Deployment" else "readyReplicas", 0)
        updated = status.get("updatedReplicas", 0)
        if ready >= want and updated >= want:
            return True, f"Ready:{ready}/{want}"
        return False, f"Ready:{ready}/{want}"
    if kind == "DaemonSet":
        want = status.get("desiredNumberScheduled", 0)
        ready = status.get("numberAvailable", 0)
        return (want > 0 and ready >= want), f"Ready:{ready}/{want}"
    if kind == "Job":
        for cond in status.get("conditions") or []:
            if cond.get("type") == "Complete" and cond.get("status") == "True":
                return True, "Complete"
            if cond.get("type") == "Failed" and cond.get("status") == "True":
                return False, f"Failed: {cond.get('message', '')}".strip()
        return False, f"Succeeded:{status.get('succeeded', 0)}/{spec.get('completions', 1)}"
    return True, "Exists"


def policy_health(expression: str, live: dict[str, Any]) -> tuple[bool, str]:
    """A definition's health policy: a sandboxed Jinja expression over `context.output` (the live workload)."""
    try:
        healthy = compiled(expression)(context={"output": live})
    except (TemplateError, TypeError, ValueError, AttributeError, KeyError) as err:
        return False, f"health policy failed: {err}"
    return bool(healthy), "healthy by policy" if healthy else "unhealthy by policy"


def component_health(objects: list[dict[str, Any]], workload: dict[str, Any], live: list[dict[str, Any] | None],
                     policy: str | None) -> tuple[bool, str]:
    """A component's health from its rendered objects and their live counterparts (same order): the workload by
    its definition's health policy when there is one, everything else by the built-in rules. The message
    names the workload's state and every unhealthy object's."""
    messages = []
    healthy = True
    for obj, observed in zip(objects, live):
        if obj is workload and policy and observed is not None:
            ok, message = policy_health(policy, observed)
        else:
            ok, message = resource_health(observed)
        healthy = healthy and ok
        if obj is workload or not ok:
            messages.append(message)
    return healthy, "; ".join(messages)
