"""An Application's workflow as written (spec.workflow: steps, sub-steps, mode), parsed and checked into plain
frozen data for the engine. KubeVela's field names; a problem raises ValueError naming the step and field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from velashard.durations import go_duration

STEP_GROUP = "step-group"
MODE_STEPS, MODE_DAG = "StepByStep", "DAG"


@dataclass(frozen=True)
class Input:
    from_: str  # a variable an earlier step's output set (or a path into the step's context and parameter)
    parameter_key: str  # where in the step's properties it goes ("" keeps it for `if` only)


@dataclass(frozen=True)
class Output:
    name: str
    value_from: str  # a CUE expression over the step's value


@dataclass(frozen=True)
class StepSpec:
    name: str
    type: str
    properties: dict[str, Any]
    if_: str | None = None
    timeout: float | None = None  # seconds
    depends_on: tuple[str, ...] = ()
    inputs: tuple[Input, ...] = ()
    outputs: tuple[Output, ...] = ()
    sub_steps: tuple["StepSpec", ...] = ()
    mode: str = ""  # a step-group's own mode for its sub-steps (kubevela/workflow's), over the workflow's

    @property
    def additional_name(self) -> str:
        """KubeVela also knows a step by its properties' `name` or `component` (for dependsOn and `if`)."""
        props = self.properties if isinstance(self.properties, dict) else {}
        return str(props.get("name") or props.get("component") or "")


@dataclass(frozen=True)
class Mode:
    steps: str = MODE_STEPS
    sub_steps: str = MODE_DAG

    def __str__(self) -> str:
        return f"{self.steps}-{self.sub_steps}"  # as status.workflow.mode shows it


@dataclass(frozen=True)
class Workflow:
    steps: tuple[StepSpec, ...]
    mode: Mode = Mode()
    default: bool = False  # no steps written: the controller's own deploy of every component

    def all_steps(self) -> list[StepSpec]:
        return [s for top in self.steps for s in (top, *top.sub_steps)]


DEFAULT = Workflow((StepSpec("deploy", "deploy", {}),), default=True)


def parse_duration(text: Any) -> float:
    """Seconds in a Go duration such as `30s`, `5m` or `1h30m`; ValueError otherwise."""
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


def _io(items: Any, key: str, here: str) -> tuple:
    if items is None:
        return ()
    if not isinstance(items, list):
        raise ValueError(f"{here}: {key} must be a list")
    out = []
    for item in items:
        if not isinstance(item, dict):
            raise ValueError(f"{here}: each of {key} must be an object")
        if key == "inputs":
            if not isinstance(item.get("from"), str) or not item["from"]:
                raise ValueError(f"{here}: each of inputs needs from")
            out.append(Input(item["from"], str(item.get("parameterKey") or "")))
        else:
            # as KubeVela's Application schema: both are required (an old `fromKey` is no valueFrom)
            if not item.get("name") or not isinstance(item.get("valueFrom"), str) or not item["valueFrom"]:
                raise ValueError(f"{here}: each of outputs needs name and valueFrom (a CUE expression)")
            out.append(Output(str(item["name"]), item["valueFrom"]))
    return tuple(out)


def _parse_one(step: Any, index: int, where: str, nested: bool) -> StepSpec:
    if not isinstance(step, dict):
        raise ValueError(f"{where}[{index}] must be an object")
    name = default_step_name(step, index)
    here = f'{where} "{name}"'
    stype = step.get("type")
    if not isinstance(stype, str) or not stype:
        raise ValueError(f"{here}: type is required")
    if nested and stype == STEP_GROUP:
        raise ValueError(f"{here}: a step-group cannot be a sub-step")
    timeout = None
    if step.get("timeout") not in (None, ""):
        try:
            timeout = parse_duration(step["timeout"])
        except ValueError as err:
            raise ValueError(f"{here}: timeout: {err}") from None
    props = step.get("properties")
    if props is None:
        props = {}
    if not isinstance(props, dict):
        raise ValueError(f"{here}: properties must be an object")
    if_ = step.get("if")
    if if_ is not None and not isinstance(if_, str):
        raise ValueError(f"{here}: if must be a string")
    depends = step.get("dependsOn") or []
    if not isinstance(depends, list) or not all(isinstance(d, str) for d in depends):
        raise ValueError(f"{here}: dependsOn must be a list of step names")
    subs = step.get("subSteps") or []
    if subs and stype != STEP_GROUP:
        raise ValueError(f"{here}: only a step-group has subSteps")
    if not isinstance(subs, list):
        raise ValueError(f"{here}: subSteps must be a list")
    parsed_subs = tuple(_parse_one(s, i, f"{here} subStep", True) for i, s in enumerate(subs))
    mode = step.get("mode") or ""
    if mode not in ("", MODE_STEPS, MODE_DAG):
        raise ValueError(f'{here}: mode must be {MODE_STEPS} or {MODE_DAG}, not "{mode}"')
    return StepSpec(name, stype, props, if_ or None, timeout, tuple(depends), _io(step.get("inputs"), "inputs", here),
                    _io(step.get("outputs"), "outputs", here), parsed_subs, mode)


def _mode(raw: Any) -> Mode:
    if raw is None:
        return Mode()
    if not isinstance(raw, dict):
        raise ValueError("workflow.mode must be an object with steps and subSteps")
    values = []
    for key, default in (("steps", MODE_STEPS), ("subSteps", MODE_DAG)):
        value = raw.get(key) or default
        if value not in (MODE_STEPS, MODE_DAG):
            raise ValueError(f'workflow.mode.{key} must be {MODE_STEPS} or {MODE_DAG}, not "{value}"')
        values.append(value)
    return Mode(*values)


def parse_workflow(spec: dict[str, Any]) -> Workflow:
    """spec.workflow, or KubeVela's default when it has no steps: deploy every component. ValueError if invalid."""
    raw = spec.get("workflow") or {}
    if not isinstance(raw, dict):
        raise ValueError("workflow must be an object")
    if raw.get("ref"):
        raise ValueError("workflow.ref (a Workflow object) is not supported: write the steps in the application")
    steps = raw.get("steps") or []
    if not isinstance(steps, list):
        raise ValueError("workflow.steps must be a list")
    mode = _mode(raw.get("mode"))
    if not steps:
        return DEFAULT
    parsed = tuple(_parse_one(s, i, "workflow step", False) for i, s in enumerate(steps))
    workflow = Workflow(parsed, mode)
    names = [s.name for s in workflow.all_steps()]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f'workflow step names must be unique: {", ".join(duplicates)}')
    known = set(names) | {s.additional_name for s in workflow.all_steps() if s.additional_name}
    for s in workflow.all_steps():
        unknown = [d for d in s.depends_on if d not in known]
        if unknown:
            raise ValueError(f'workflow step "{s.name}": dependsOn names unknown steps {", ".join(unknown)}')
    return workflow
