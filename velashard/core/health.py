"""Health of rendered resources from their observed state: built-in rules per kind."""

from __future__ import annotations

from typing import Any


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
    from jinja2 import TemplateError
    from jinja2.sandbox import SandboxedEnvironment

    try:
        healthy = SandboxedEnvironment().compile_expression(expression)(context={"output": live})
    except (TemplateError, TypeError, ValueError, AttributeError, KeyError) as err:
        return False, f"health policy failed: {err}"
    return bool(healthy), "healthy by policy" if healthy else "unhealthy by policy"
