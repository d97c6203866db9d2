"""Checking a definition when it is written: its CUE template and status programs compile, its schematic is one
velashard runs. The master's validating webhook refuses a definition that fails; where no webhook runs, the
DefinitionChecker (velashard.core.defstatus) says so in the definition's status. Pure."""

from __future__ import annotations

from typing import Any

from velashard.core.templates import compile_template
from velashard.cue import CueError
from velashard.workflow.steptypes import step_type
from velashard.workflow.templates import template_problem

CONDITION = "TemplateValid"


def _cue_problem(text: Any, what: str) -> str | None:
    if not isinstance(text, str):
        return f"{what} must be a string of CUE"
    try:
        compile_template(text, what.replace(" ", "-") + ".cue")
    except CueError as err:
        where = f" at line {err.positions[0].line}, column {err.positions[0].col}" if err.positions else ""
        return f"{what} does not compile: {err.message}{where}"
    return None


def definition_problem(definition: dict[str, Any]) -> tuple[str, str] | None:
    """(reason, message) of what is wrong with a definition, or None when velashard can run it."""
    kind = definition.get("kind", "")
    spec = definition.get("spec") or {}
    schematic = spec.get("schematic") or {}
    if not isinstance(schematic, dict):
        return "InvalidSchematic", "spec.schematic must be an object"
    cue = schematic.get("cue")
    if kind == "WorkflowStepDefinition":
        # compiled with the providers' packages (vela/op, vela/kube, ...) importable, as the engine runs it
        if cue is None:
            if step_type(str((definition.get("metadata") or {}).get("name") or "")).sub_steps:
                return None  # the engine runs step-group itself
            return "InvalidSchematic", "a WorkflowStepDefinition needs spec.schematic.cue.template"
        problem = template_problem(cue.get("template") if isinstance(cue, dict) else None)
        return ("TemplateError", problem) if problem else None
    if cue is not None:
        problem = _cue_problem((cue or {}).get("template") if isinstance(cue, dict) else None,
                               "spec.schematic.cue.template")
        if problem:
            return "TemplateError", problem
    elif kind == "ComponentDefinition" and "kube" not in schematic:
        return "InvalidSchematic", "a ComponentDefinition needs spec.schematic.cue.template (or schematic.kube)"
    elif kind == "TraitDefinition":
        return "InvalidSchematic", "a TraitDefinition needs spec.schematic.cue.template"
    status = spec.get("status") or {}
    for key in ("healthPolicy", "customStatus"):
        if status.get(key):
            problem = _cue_problem(status[key], f"spec.status.{key}")
            if problem:
                return "TemplateError", problem
    return None


def definition_condition(definition: dict[str, Any], now: str) -> dict[str, Any]:
    problem = definition_problem(definition)
    reason, message = problem or ("Compiled", "")
    return {"type": CONDITION, "status": "False" if problem else "True", "reason": reason, "message": message,
            "lastTransitionTime": now}
