"""What rendering takes and gives: definitions by name and their generations, rendered components and apps,
the labels that make an object the app's, and the error that says where rendering failed."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from velashard.apis import labels
from velashard.patch.copying import copy_json


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
class Definitions:
    """Definitions by name, as the controller's informers hold them."""

    components: dict[str, dict[str, Any]] = field(default_factory=dict)
    traits: dict[str, dict[str, Any]] = field(default_factory=dict)
    policies: dict[str, dict[str, Any]] = field(default_factory=dict)
    cluster_version: dict[str, Any] | None = None

    @classmethod
    def from_objects(cls, components: list[dict[str, Any]], traits: list[dict[str, Any]],
                     policies: list[dict[str, Any]] = (), cluster_version: dict[str, Any] | None = None
                     ) -> "Definitions":
        return cls({d["metadata"]["name"]: d for d in components}, {d["metadata"]["name"]: d for d in traits},
                   {d["metadata"]["name"]: d for d in policies}, cluster_version)

    def fingerprint(self) -> str:
        # the generation, which only a spec change moves (a status write, e.g. TemplateValid, must not
        # make every app a new revision); the resourceVersion where a definition has none
        parts = sorted(f'{kind}/{n}@{d["metadata"].get("uid", "")}:{version(d)}'
                       for kind, table in (("c", self.components), ("t", self.traits), ("p", self.policies))
                       for n, d in table.items())
        return ",".join(parts)


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


def version(definition: dict[str, Any]) -> str:
    meta = definition["metadata"]
    return f'g{meta["generation"]}' if meta.get("generation") else str(meta.get("resourceVersion", ""))


def identity(definition: dict[str, Any]) -> str:
    """A definition's generation: uid and generation when stored, else its content (files, built-ins)."""
    meta = definition["metadata"]
    if meta.get("uid") and (meta.get("generation") or meta.get("resourceVersion")):
        return f'{meta["uid"]}:{version(definition)}'
    return hashlib.sha256(json.dumps(definition.get("spec"), sort_keys=True, default=str).encode()).hexdigest()


def properties_of(value: Any, component: str, trait: str | None = None) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RenderError("InvalidParameter", "properties must be an object", component, trait, "properties")
    return value


def marked(obj: dict[str, Any], marks: dict[str, str]) -> dict[str, Any]:
    meta = obj.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **marks}
    return obj


def finish(obj: Any, app: dict[str, Any], component: str, where: str) -> dict[str, Any]:
    if not isinstance(obj, dict) or not obj.get("kind") or not obj.get("apiVersion"):
        raise RenderError("TemplateError", f"{where} must be an object with apiVersion and kind", component)
    obj = copy_json(obj)
    meta = obj.setdefault("metadata", {})
    meta.setdefault("name", component)
    meta.setdefault("namespace", app["metadata"].get("namespace", "default"))
    meta["labels"] = {**(meta.get("labels") or {}), labels.APP_NAME: app["metadata"]["name"],
                      labels.APP_NAMESPACE: app["metadata"].get("namespace", "default"),
                      labels.APP_COMPONENT: component}
    return obj
