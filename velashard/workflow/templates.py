"""Step templates: a WorkflowStepDefinition's `spec.schematic.cue.template`, compiled once per text with the
providers' packages importable, and the two templates the engine itself holds, as KubeVela's does: `suspend`
and the one an `apply-component` step runs (it takes precedence over any definition of that name)."""

from __future__ import annotations

from typing import Any, Callable

from velashard.cue import CueError, Program, compile_cached
from velashard.workflow.providers import packages

Lookup = Callable[[str, str], "dict[str, Any] | None"]  # (step type, app namespace) -> WorkflowStepDefinition

_DECLARED = "context: _\nparameter: _\n"

SUSPEND = '''
import "vela/builtin"

parameter: {
	// +usage=resume by itself after this long (a Go duration such as 30s)
	duration?: string
	message?:  string
}
suspend: builtin.#Suspend & {$params: parameter}
'''

# an apply-component step after KubeVela's conversion: parameter.value is the component as the app writes it
APPLY_COMPONENT = '''
import "vela/oam"

parameter: {...}
apply: oam.#ApplyComponent & {$params: parameter}
if apply.$returns.output != _|_ {
	output: apply.$returns.output
}
if apply.$returns.outputs != _|_ {
	outputs: apply.$returns.outputs
}
'''

APPLY_COMPONENT_TYPE = "apply-component"
STATIC = {"suspend": SUSPEND, APPLY_COMPONENT_TYPE: APPLY_COMPONENT}


def compile_step(text: str, name: str = "template.cue") -> Program:
    """The compiled program of a step template (cached by text); CueError names line and column. `context` and
    `parameter` are declared beside it, in a file of their own so that positions stay the template's."""
    return compile_cached({name: text, "velashard-step-context.cue": _DECLARED}, packages())


def template_problem(text: Any, what: str = "spec.schematic.cue.template") -> str | None:
    """What keeps a step template from compiling, with line and column; None when it compiles."""
    if not isinstance(text, str):
        return f"{what} must be a string of CUE"
    try:
        compile_step(text, what.replace(" ", "-") + ".cue")
    except CueError as err:
        where = f" at line {err.positions[0].line}, column {err.positions[0].col}" if err.positions else ""
        return f"{what} does not compile: {err.message}{where}"
    return None


def definition_template(definition: dict[str, Any] | None) -> str | None:
    cue = ((definition or {}).get("spec") or {}).get("schematic") or {}
    template = (cue.get("cue") or {}).get("template") if isinstance(cue.get("cue"), dict) else None
    return template if isinstance(template, str) else None


def template_of(step_type: str, namespace: str, lookup: Lookup) -> str | None:
    """The template a step of this type runs: the engine's own, else its definition's (the app's namespace
    first, then vela-system, as KubeVela looks), else None."""
    if step_type in STATIC:
        return STATIC[step_type]
    return definition_template(lookup(step_type, namespace))
