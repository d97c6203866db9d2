"""What one reconcile of one Application knows: a private copy of the app, the definitions it renders with,
and the live objects it has read or written so far (so a step never reads again what an earlier step saw)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from velashard.core.rendering import Definitions
from velashard.kube.resources import Resource

ObjectKey = tuple[str, str, "str | None", str]  # plural, group, namespace, name


@dataclass
class ReconcileContext:
    app: dict[str, Any]
    definitions: Definitions
    objects: dict[ObjectKey, dict[str, Any]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.app["metadata"]["name"]

    @property
    def namespace(self) -> str:
        return self.app["metadata"]["namespace"]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def recall(self, res: Resource, name: str, namespace: str | None) -> dict[str, Any] | None:
        return self.objects.get((res.plural, res.group, namespace, name))

    def saw(self, res: Resource, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.objects[(res.plural, res.group, meta.get("namespace"), meta["name"])] = obj
