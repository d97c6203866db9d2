"""Workflow steps as an Application writes them (spec.workflow.steps, KubeVela's step types and fields),
parsed and validated into StepSpecs for the engine in workflow.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from velashard.durations import go_duration

KUBEVELA_STEP_TYPES = ("deploy", "apply-component", "suspend", "apply-object", "read-object", "export2config",
                       "export2secret", "depends-on-app", "apply-deployment", "step-group")


@dataclass(frozen=True)
class StepSpec:
    name: str
    type: str
    properties: dict[str, Any]
    if_: str | None = None
    timeout: float | None = None
    depends_on: tuple[str, ...] = ()
    inputs: tuple[dict[str, Any], ...] = ()
    outputs: tuple[dict[str, Any], ...] = ()
    sub_steps: tuple["StepSpec", ...] = ()


def parse_duration(text: str) -> float:
    """Seconds in a Go duration such as `30s`, `5m` or `1h30m` (a step's timeout, a suspend's duration);
    ValueError otherwise."""
    problem = ValueError(f'"{str(text).strip()}" is not a duration like 30s, 5m or 1h30m')
    try:
        seconds = go_duration(text)
    except ValueError:
        raise problem from None
    if seconds < 0:  # a negative wait or timeout means nothing
        raise problem
    return seconds


def default_step_name(step: dict[str, Any], index: int) -> str:
    return step.get("name") or f'{step.get("type", "step")}-{index + 1}'


def _parse_one(step: dict[str, Any], index: int, where: str) -> StepSpec:
    if not isinstance(step, dict):
        raise ValueError(f"{where}[{index}] must be an object")
    name = default_step_name(step, index)
    here = f'{where} "{name}"'
    stype = step.get("type")
    if stype not in KUBEVELA_STEP_TYPES:
        raise ValueError(f'{here}: unsupported type "{stype}" (supported: {", ".join(KUBEVELA_STEP_TYPES)})')
    timeout = None
    if step.get("timeout") is not None:
        try:
            timeout = parse_duration(step["timeout"])
        except ValueError as err:
            raise ValueError(f"{here}: timeout: {err}")
    props = step.get("properties") or {}
    if not isinstance(props, dict):
        raise ValueError(f"{here}: properties must be an object")
    if stype == "suspend" and props.get("duration") is not None:
        try:
            parse_duration(props["duration"])
        except ValueError as err:
            raise ValueError(f"{here}: properties.duration: {err}")
    for key in ("inputs", "outputs"):
        for item in step.get(key) or []:
            need = ("from", "parameterKey") if key == "inputs" else ("name", "valueFrom")
            if not isinstance(item, dict) or any(not item.get(k) for k in need):
                raise ValueError(f"{here}: each of {key} needs {' and '.join(need)}")
    subs = tuple(_parse_one(s, i, f"{here} subStep") for i, s in enumerate(step.get("subSteps") or []))
    if stype == "step-group" and not subs:
        raise ValueError(f"{here}: a step-group needs subSteps")
    return StepSpec(name, stype, props, step.get("if"), timeout, tuple(step.get("dependsOn") or ()),
                    tuple(step.get("inputs") or ()), tuple(step.get("outputs") or ()), subs)


def uses_variables(steps: list[StepSpec] | tuple[StepSpec, ...]) -> bool:
    """Whether any step passes values on (inputs or outputs): only then is the context ConfigMap read or kept."""
    return any(s.inputs or s.outputs or uses_variables(s.sub_steps) for s in steps)


def parse_steps(spec: dict[str, Any]) -> list[StepSpec]:
    """spec.workflow.steps, or KubeVela's default: one deploy step for every component. ValueError if invalid."""
    steps = (spec.get("workflow") or {}).get("steps") or []
    if not steps:
        return [StepSpec("deploy", "deploy", {})]
    parsed = [_parse_one(s, i, "workflow step") for i, s in enumerate(steps)]
    names = [s.name for s in parsed] + [sub.name for s in parsed for sub in s.sub_steps]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f'workflow step names must be unique: {", ".join(duplicates)}')
    components = {c.get("name") for c in spec.get("components") or []}
    for s in parsed + [sub for s in parsed for sub in s.sub_steps]:
        unknown = [d for d in s.depends_on if d not in names]
        if unknown:
            raise ValueError(f'workflow step "{s.name}": dependsOn names unknown steps {", ".join(unknown)}')
        if s.type == "apply-component" and s.properties.get("component") not in components:
            raise ValueError(f'workflow step "{s.name}": properties.component must name a component of the app')
    return parsed
