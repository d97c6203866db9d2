"""Data between steps, KubeVela's way: `inputs` put variables into a step's properties at their parameterKey,
`outputs` take values out of the step's CUE value (valueFrom is a CUE expression over it), and `if` is a CUE
expression over the steps' status, the inputs and the context. Pure, over plain data."""

from __future__ import annotations

import copy
import json
from typing import Any, Protocol

from velashard.cue import CueError, Program, ProgramCache, plain
from velashard.workflow.context import MAX_CONTEXT_BYTES, WorkflowContext
from velashard.workflow.data import get_path, set_path, split_path
from velashard.workflow.spec import StepSpec

# Apps' own `if` expressions, apart from the definitions' programs: however many an app author writes, they
# evict none of those.
_CONDITIONS = ProgramCache(maxsize=512)
MAX_OUTPUT_BYTES = 256 << 10  # one output's value, as JSON


class StepValue(Protocol):
    """What a step left behind for its outputs: its evaluated CUE value."""

    def export(self, expression: str | None = None, check: bool = True) -> Any: ...

    def release(self) -> None:
        """Done with it: its vertices are freed by reference counting (cue.Instance.release)."""


def _var_path(name: str) -> list[str]:
    return [p for p in name.split(".") if p]


def input_value(step_input: str, context: WorkflowContext, basic: dict[str, Any]) -> tuple[bool, Any]:
    """(found, value) of an input: a variable, else a path into the step's context and parameter."""
    path = _var_path(step_input)
    if path and context.has_var(path):
        return True, context.get_var(path)
    try:
        return True, copy.deepcopy(get_path(basic, split_path(step_input)))
    except (KeyError, ValueError):
        return False, None


def with_inputs(step: StepSpec, context: WorkflowContext, basic: dict[str, Any]) -> dict[str, Any]:
    """The step's properties with each input at its parameterKey; ValueError says which input does not fit."""
    props = copy.deepcopy(step.properties)
    for item in step.inputs:
        if not item.parameter_key:
            continue
        found, value = input_value(item.from_, context, basic)
        if not found:
            raise ValueError(f'get input from [{item.from_}]: not found')
        try:
            set_path(props, split_path(item.parameter_key), value, f"parameter.{item.parameter_key}")
        except ValueError as err:
            raise ValueError(f'input "{item.from_}": {err}') from None
    return props


def inputs_view(step: StepSpec, context: WorkflowContext, basic: dict[str, Any]) -> dict[str, Any]:
    """`inputs.<from>` as an `if` expression sees them."""
    out = {}
    for item in step.inputs:
        found, value = input_value(item.from_, context, basic)
        if found:
            out[item.from_] = value
    return out


def _condition(expression: str) -> Program:
    return _CONDITIONS.program({"if.cue": f"result: ({expression})\n",
                                "declared.cue": "status: _\ninputs: _\ncontext: _\nparameter: _\n"})


def condition_holds(expression: str, data: dict[str, Any]) -> bool:
    """The value of a step's `if` over {status, inputs, context, parameter}; ValueError when it is not a bool."""
    try:
        with _condition(expression).evaluate(data) as instance:
            value = instance.export("result")
    except CueError as err:
        raise ValueError(f"invalid if value: {err}") from None
    if not isinstance(value, bool):
        raise ValueError(f'invalid if value: "{expression}" is not a bool')
    return value


def _lookup(value: StepValue, expression: str) -> Any:
    return plain(value.export(expression, check=False))


def output_value(value: StepValue, value_from: str) -> Any:
    """An output's value, with KubeVela's fallbacks for templates whose providers return under `$returns`
    (`output.value` finds `output.$returns.value`); CueError when none holds."""
    if not value_from.strip():
        raise CueError("valueFrom is empty", "undefined")
    try:
        return _lookup(value, value_from)
    except CueError as first:
        if "$returns." in value_from:
            raise
        head, sep, rest = value_from.partition("output.")
        candidates = [f"{head}output.$returns.{rest}"] if sep else [f"{value_from}.$returns"]
        for candidate in candidates:
            try:
                return _lookup(value, candidate)
            except CueError:
                pass
        raise first


def set_outputs(step: StepSpec, value: StepValue | None, skipped: bool,
                context: WorkflowContext) -> tuple[str, bool]:
    """Each output into the context (null when it has no value); the problems, as KubeVela words them, and
    whether an output was too large to keep (its value is then null: the step fails)."""
    problems, too_large = [], False
    for item in step.outputs:
        result = None
        if value is not None:
            try:
                result = output_value(value, item.value_from)
            except CueError as err:
                if not skipped:
                    problems.append(f"failed to get output from {item.value_from}: {err}")
        size = len(json.dumps(result, sort_keys=True, default=str))
        if size > MAX_OUTPUT_BYTES or context.size() + size > MAX_CONTEXT_BYTES:
            problems.append(f"output {item.name} is {size} bytes: more than an output ({MAX_OUTPUT_BYTES}) or the "
                            f"run's context ({MAX_CONTEXT_BYTES}) may hold")
            result, too_large = None, True
        context.set_var(result, _var_path(item.name))
    return "\n".join(problems), too_large
