"""kubevela/workflow's WorkflowRun as this engine runs it, pure: its steps (written in spec.workflowSpec, or its
Workflow template's, spec.workflowRef), its mode, the context its steps see (name and namespace, with
spec.context over them), the step names KubeVela's webhook gives unnamed steps, and its status (the run's own:
mode an object, conditions of type WorkflowRun) to and from the engine's. The operations of
`velashard workflow` on a run's status are here too (a run keeps its workflow status at the top of its status)."""

from __future__ import annotations

import copy
from typing import Any

from velashard.workflow import phases as ph
from velashard.workflow.spec import Mode, Workflow, parse_workflow

CONDITION_TYPE = "WorkflowRun"
INITIALIZING = "initializing"
# What KubeVela writes as a run's status before it ran: every field its schema requires.
EMPTY_STATUS = {"mode": {}, "status": "", "suspend": False, "terminated": False, "finished": False}


class RunError(ValueError):
    """The run cannot be turned into a workflow (no steps, a template missing or invalid): its message says why."""


def template_name(run: dict[str, Any]) -> str | None:
    """The Workflow the run refers to, if it has no steps of its own."""
    spec = run.get("spec") or {}
    if spec.get("workflowSpec") is None and isinstance(spec.get("workflowRef"), str) and spec["workflowRef"]:
        return spec["workflowRef"]
    return None


def step_names(steps: Any) -> list[tuple[str, str]]:
    """(JSON pointer, name) for each unnamed step and sub-step, as KubeVela's WorkflowRun webhook names them:
    step-<i>, and step-<i>-<j> for sub-steps (counted from 0)."""
    found: list[tuple[str, str]] = []
    for i, step in enumerate(steps if isinstance(steps, list) else []):
        if not isinstance(step, dict):
            continue
        if not step.get("name"):
            found.append((f"/{i}/name", f"step-{i}"))
        for j, sub in enumerate(step.get("subSteps") if isinstance(step.get("subSteps"), list) else []):
            if isinstance(sub, dict) and not sub.get("name"):
                found.append((f"/{i}/subSteps/{j}/name", f"step-{i}-{j}"))
    return found


def _named(steps: list[Any]) -> list[Any]:
    out = copy.deepcopy(steps)
    for pointer, name in step_names(out):
        node: Any = out
        parts = pointer.strip("/").split("/")
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[parts[-1]] = name
    return out


def workflow_of(run: dict[str, Any], template: dict[str, Any] | None) -> Workflow:
    """The run's workflow: its own steps, or those of `template` (the Workflow it refers to, None when absent),
    with the run's mode over the template's. RunError says what is wrong."""
    spec = run.get("spec") or {}
    mode = spec.get("mode")
    if spec.get("workflowSpec") is not None:
        steps = (spec["workflowSpec"] or {}).get("steps") if isinstance(spec["workflowSpec"], dict) else None
    elif spec.get("workflowRef"):
        if template is None:
            raise RunError(f'Workflow "{spec["workflowRef"]}" not found in namespace '
                           f'{run["metadata"].get("namespace")} (spec.workflowRef)')
        steps = template.get("steps")
        mode = mode if mode is not None else template.get("mode")
    else:
        raise RunError("a WorkflowRun needs spec.workflowSpec or spec.workflowRef")
    if not isinstance(steps, list) or not steps:
        raise RunError("the workflow has no steps")
    try:
        return parse_workflow({"workflow": {"steps": _named(steps), "mode": mode}})
    except ValueError as err:
        raise RunError(str(err)) from None


def context_of(run: dict[str, Any]) -> dict[str, Any]:
    """What a run's steps see as `context`: its name and namespace (and the fields KubeVela's process context
    always has), with spec.context's variables over them, as KubeVela lets them override."""
    meta = run["metadata"]
    base: dict[str, Any] = {"name": meta["name"], "namespace": meta.get("namespace", "default"),
                            "workflowName": "", "publishVersion": ""}
    custom = (run.get("spec") or {}).get("context")
    if isinstance(custom, dict):
        base.update(copy.deepcopy(custom))
    return base


def mode_object(mode: Mode) -> dict[str, str]:
    return {"steps": mode.steps, "subSteps": mode.sub_steps}


def engine_status(status: dict[str, Any] | None) -> dict[str, Any]:
    """The run's status as the engine reads a workflow's: without what only a run's status has (its mode object
    is the engine's to set, as a string, and its conditions are the run's)."""
    out = {k: copy.deepcopy(v) for k, v in (status or {}).items() if k not in ("mode", "conditions", "suspendState")}
    if not out.get("startTime") and not out.get("steps"):
        return {}  # never ran, or restarted (KubeVela's empty status): a new run
    return out


def run_status(engine: dict[str, Any], mode: Mode, previous: dict[str, Any] | None,
               condition: dict[str, Any] | None) -> dict[str, Any]:
    """The status to write from what the engine left: its mode an object, the run's condition kept or set."""
    out = {k: v for k, v in engine.items() if k not in ("appRevision",)}
    out["mode"] = mode_object(mode)
    for key, default in EMPTY_STATUS.items():
        out.setdefault(key, default)
    # the run's workflow was made: an earlier failure to make it is over
    conditions = [c for c in (previous or {}).get("conditions") or []
                  if not (c.get("type") == CONDITION_TYPE and c.get("reason") == "ReconcileError")]
    if condition is not None:
        conditions = with_condition(conditions, condition)
    if conditions:
        out["conditions"] = conditions
    return out


def with_condition(conditions: list[dict[str, Any]], condition: dict[str, Any]) -> list[dict[str, Any]]:
    """The conditions with `condition` set: its transition time kept while its status does not change."""
    old = next((c for c in conditions if c.get("type") == condition["type"]), None)
    if old is not None and all(old.get(k) == condition.get(k) for k in ("status", "reason", "message")):
        return conditions
    return [c for c in conditions if c.get("type") != condition["type"]] + [condition]


def ready(now: str) -> dict[str, Any]:
    return {"type": CONDITION_TYPE, "status": "True", "reason": "Available", "message": "", "lastTransitionTime": now}


def failed(message: str, now: str) -> dict[str, Any]:
    return {"type": CONDITION_TYPE, "status": "False", "reason": "ReconcileError", "message": message,
            "lastTransitionTime": now}


def not_generated(previous: dict[str, Any] | None, message: str, now: str) -> dict[str, Any]:
    """The status of a run whose workflow could not be made (KubeVela's: initializing, with the error)."""
    out = {**EMPTY_STATUS, **{k: v for k, v in (previous or {}).items()}}
    out["status"] = INITIALIZING
    out["message"] = message
    out["conditions"] = with_condition(list(out.get("conditions") or []), failed(message, now))
    return out


def operated(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether a run's status changed the way an operation changes it (suspend, resume, terminate, restart), as
    opposed to the controller's own progress: worth a reconcile."""
    was, now = old.get("status") or {}, new.get("status") or {}
    return bool(was.get("suspend")) != bool(now.get("suspend")) or \
        bool(was.get("terminated")) != bool(now.get("terminated")) or \
        (bool(was.get("finished")) and not now.get("finished")) or \
        (bool(was.get("steps")) and not now.get("steps"))


def settled(run: dict[str, Any]) -> bool:
    """KubeVela does nothing more for a finished run (until it is restarted)."""
    return bool((run.get("status") or {}).get("finished"))


def phase_of(status: dict[str, Any]) -> str:
    return str(status.get("status") or "")


def ended(status: dict[str, Any]) -> bool:
    return phase_of(status) in (ph.WF_SUCCEEDED, ph.WF_FAILED, ph.WF_TERMINATED)

