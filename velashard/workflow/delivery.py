"""What core/ hands the engine to reach an app's components and apply objects for it (KubeVela's ComponentApply,
ComponentRender, Dispatch): the engine never renders or tracks anything itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from velashard.kube.resources import Resource


class DeliveryError(Exception):
    """A component or object could not be applied as it is; the message names it and says why."""


@dataclass
class ComponentResult:
    healthy: bool
    message: str = ""
    output: dict[str, Any] | None = None  # the workload, live once applied
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # traits' and auxiliary objects by name


class Delivery(Protocol):
    def components(self) -> list[dict[str, Any]]:
        """The app's components as written (name, type, properties, traits, dependsOn)."""

    def policies(self) -> list[dict[str, Any]]:
        """The app's policies as written."""

    def apply_component(self, component: dict[str, Any], namespace: str | None = None,
                        patch: dict[str, Any] | None = None, replica_key: str = "") -> ComponentResult:
        """Render and apply one component (as given: overrides already merged) into `namespace` (the app's when
        None), record it as deployed by this run, and report its health. Raises DeliveryError."""

    def render_component(self, component: dict[str, Any], namespace: str | None = None,
                         patch: dict[str, Any] | None = None) -> ComponentResult:
        """What the component renders to, applied nowhere. Raises DeliveryError."""

    def dispatch(self, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Apply objects for the app (labelled and tracked as the workflow's); their live state. Raises
        DeliveryError."""

    def resource(self, api_version: str, kind: str) -> Resource:
        """The API resource of a kind; kube.errors.NotFound when the server has none."""
