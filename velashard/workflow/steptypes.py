"""The step types the engine knows by name, and how each is run, as kubevela/workflow's task discovery has built-in
generators before it looks for a WorkflowStepDefinition: `step-group` runs its sub-steps (no template); `suspend`
and `apply-component` run templates of the engine's own (steps/<type>.cue, package data), whatever definition has
their name, `apply-component` after KubeVela's conversion of the component it names; any other type runs its
definition's template. Pure but for reading those two files once."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from velashard.workflow import cuefiles
from velashard.workflow.spec import STEP_GROUP, Input, Output, StepSpec, Workflow

APPLY_COMPONENT = "apply-component"

Convert = Callable[[StepSpec, list[dict[str, Any]]], StepSpec]


@dataclass(frozen=True)
class StepType:
    sub_steps: bool = False  # the engine runs the step's sub-steps itself
    own_template: str = ""  # the engine's own template, a file in steps/; "" for the definition's
    convert: Convert | None = None  # the step as the engine runs it, from the app's components (before a pass)

    def template(self) -> str | None:
        """The engine's own template of this type; None when the type's definition holds it."""
        return cuefiles.read(__package__, "steps", self.own_template) if self.own_template else None


def convert_apply_component(step: StepSpec, components: list[dict[str, Any]]) -> StepSpec:
    """KubeVela's StepConvertor: the component named in properties.component becomes properties.value; its
    inputs (their parameterKey under value.properties) and outputs join the step's, its dependsOn too."""
    name = step.properties.get("component")
    comp = next((c for c in components if c.get("name") == name), None)
    if comp is None:
        return step  # the step fails when it runs, saying so
    inputs = list(step.inputs) + [Input(str(item["from"]), str(item.get("parameterKey") or ""))
                                   for item in comp.get("inputs") or [] if isinstance(item, dict) and item.get("from")]
    for i, item in enumerate(inputs):  # every input goes into the component (value.properties.<key>)
        key = item.parameter_key.strip()
        if key and not key.startswith("properties") and not key.startswith("traits["):
            key = "properties." + key
        inputs[i] = Input(item.from_, "value." + key if key else "")
    outputs = list(step.outputs)
    for item in comp.get("outputs") or []:
        if isinstance(item, dict) and item.get("name") and item.get("valueFrom"):
            outputs.append(Output(str(item["name"]), str(item["valueFrom"])))
    value = {k: v for k, v in comp.items() if k not in ("inputs", "outputs", "dependsOn")}
    props = {"value": value, "cluster": step.properties.get("cluster") or ""}
    if step.properties.get("namespace"):
        props["namespace"] = step.properties["namespace"]
    depends = tuple(step.depends_on) + tuple(d for d in comp.get("dependsOn") or [] if d not in step.depends_on)
    return dataclasses.replace(step, properties=props, inputs=tuple(inputs), outputs=tuple(outputs),
                               depends_on=depends)


BUILTIN: dict[str, StepType] = {
    STEP_GROUP: StepType(sub_steps=True),
    "suspend": StepType(own_template="suspend.cue"),
    APPLY_COMPONENT: StepType(own_template="apply-component.cue", convert=convert_apply_component),
}
DEFINED = StepType()  # any other type: its WorkflowStepDefinition's template


def step_type(name: str) -> StepType:
    return BUILTIN.get(name, DEFINED)


def _converted(step: StepSpec, components: list[dict[str, Any]]) -> StepSpec:
    convert = step_type(step.type).convert
    return convert(step, components) if convert is not None else step


def convert(workflow: Workflow, components: list[dict[str, Any]]) -> Workflow:
    """The workflow as the engine runs it: each step (and sub-step) as its type prepares it."""
    steps = tuple(dataclasses.replace(_converted(s, components),
                                      sub_steps=tuple(_converted(x, components) for x in s.sub_steps))
                  for s in workflow.steps)
    return dataclasses.replace(workflow, steps=steps)
