"""Workflow step definitions the tests use, written for the tests (tests/workflowsteps/*.cue, `vela def` files):
installed where velashard's built-in catalog does not have a step of that name, so that the built-in one is
tested wherever there is one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from velashard.apis.oam import SYSTEM_NAMESPACE, WORKFLOW_STEP_DEFINITIONS
from velashard.core.builtins import builtin_definitions
from velashard.core.deffile import parse_def_file
from velashard.kube import errors
from velashard.kube.client import KubeClient

HERE = Path(__file__).parent


def step_definitions() -> list[dict[str, Any]]:
    return [parse_def_file(p.read_text(), p.name) for p in sorted(HERE.glob("*.cue"))]


def install_missing(kube: KubeClient) -> list[str]:
    """Install the test definitions the catalog lacks; their names."""
    builtin = {d["metadata"]["name"] for d in builtin_definitions() if d["kind"] == "WorkflowStepDefinition"}
    installed = []
    for definition in step_definitions():
        name = definition["metadata"]["name"]
        if name in builtin:
            continue
        try:
            kube.create(WORKFLOW_STEP_DEFINITIONS, definition, SYSTEM_NAMESPACE)
        except errors.AlreadyExists:
            live = kube.get(WORKFLOW_STEP_DEFINITIONS, name, SYSTEM_NAMESPACE)
            kube.update(WORKFLOW_STEP_DEFINITIONS, dict(live, spec=definition["spec"]))
        installed.append(name)
    return installed
