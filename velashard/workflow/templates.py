"""Step templates: a WorkflowStepDefinition's `spec.schematic.cue.template`, compiled once per text with the
providers' packages importable; which template a step runs (the engine's own for the types steptypes.py names,
else its definition's)."""

from __future__ import annotations

from typing import Any, Callable

from velashard.cue import CueError, Program, compile_cached
from velashard.workflow.providers import packages
from velashard.workflow.steptypes import step_type

Lookup = Callable[[str, str], "dict[str, Any] | None"]  # (step type, app namespace) -> WorkflowStepDefinition

_DECLARED = "context: _\nparameter: _\n"


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


def template_of(type_name: str, namespace: str, lookup: Lookup) -> str | None:
    """The template a step of this type runs: the engine's own, else its definition's (the app's namespace
    first, then vela-system, as KubeVela looks), else None."""
    own = step_type(type_name).template()
    return own if own is not None else definition_template(lookup(type_name, namespace))
