"""What rendering gives: rendered components (the workload, its auxiliary objects, its traits' names and
properties) and apps, and the error that says where rendering failed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class RenderError(Exception):
    """Why an app could not be rendered, naming the component, trait and field."""

    def __init__(self, reason: str, message: str, component: str, trait: str | None = None,
                 field: str | None = None):
        where = f'component "{component}"' + (f' trait "{trait}"' if trait else "")
        super().__init__(f"{where}: {message}")
        self.reason = reason
        self.component = component
        self.trait = trait
        self.field = field


@dataclass
class RenderedComponent:
    name: str
    type: str
    workload: dict[str, Any]
    outputs: list[dict[str, Any]]
    traits: list[str]
    depends_on: list[str]
    # ref-objects components wait for the controller to read the referenced objects
    pending_spec: dict[str, Any] | None = None
    properties: dict[str, Any] = field(default_factory=dict)
    trait_properties: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # traits used beyond what their definitions declare

    @property
    def objects(self) -> list[dict[str, Any]]:
        return [self.workload] + self.outputs


@dataclass
class RenderedApp:
    components: list[RenderedComponent]
    # what policies with a CUE output render (KubeVela dispatches them before the workflow runs)
    policy_objects: list[dict[str, Any]] = field(default_factory=list)
