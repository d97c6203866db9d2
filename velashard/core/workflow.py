"""The application workflow: which steps run, in what order, and what the app's phase is. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STEP_TYPES = ("deploy", "apply-component", "suspend")


@dataclass(frozen=True)
class Step:
    name: str
    type: str
    components: tuple[str, ...]  # what the step applies (empty for suspend)


@dataclass
class StepStatus:
    name: str
    type: str
    phase: str  # pending, running, succeeded, suspending, failed
    message: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "phase": self.phase, "message": self.message}


@dataclass
class WorkflowState:
    steps: list[StepStatus] = field(default_factory=list)
    finished: bool = False
    suspended: bool = False
    failed: bool = False
    message: str = ""


def default_step_name(step: dict[str, Any], index: int) -> str:
    return step.get("name") or f'{step.get("type", "step")}-{index + 1}'


def workflow_steps(spec: dict[str, Any]) -> list[Step]:
    """Explicit spec.workflow.steps, or one deploy step for all components (honouring dependsOn)."""
    components = tuple(c.get("name", "") for c in spec.get("components") or [])
    steps = (spec.get("workflow") or {}).get("steps") or []
    if not steps:
        return [Step("deploy", "deploy", components)]
    out = []
    for i, step in enumerate(steps):
        stype = step.get("type", "")
        props = step.get("properties") or {}
        if stype == "deploy":
            out.append(Step(default_step_name(step, i), stype, components))
        elif stype == "apply-component":
            out.append(Step(default_step_name(step, i), stype, (str(props.get("component", "")),)))
        else:
            out.append(Step(default_step_name(step, i), stype, ()))
    return out


def validate_steps(spec: dict[str, Any]) -> str | None:
    """A message for the first invalid step, or None."""
    names = {c.get("name") for c in spec.get("components") or []}
    for i, step in enumerate((spec.get("workflow") or {}).get("steps") or []):
        stype = step.get("type")
        where = f'workflow step "{default_step_name(step, i)}"'
        if stype not in STEP_TYPES:
            return f'{where}: unsupported type "{stype}" (supported: {", ".join(STEP_TYPES)})'
        if stype == "apply-component" and (step.get("properties") or {}).get("component") not in names:
            return f'{where}: properties.component must name a component of the app'
    return None


def app_phase(state: WorkflowState, all_healthy: bool) -> str:
    if state.failed:
        return "workflowFailed"
    if state.suspended:
        return "workflowSuspending"
    if not state.finished:
        return "runningWorkflow"
    return "running" if all_healthy else "unhealthy"
