"""What core hands the workflow engine (velashard.workflow.delivery.Delivery) for one reconcile of one app:
components rendered and applied on demand (into a namespace, with a patch or a replicaKey) and objects applied
for steps, each recorded by the pass's ResourceKeeper before it is applied (nothing applied is untracked) and
dispatched through it, as the app's author; their health as the pass's HealthReader reads it."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from velashard.apis import labels
from velashard.core.context import ReconcileContext
from velashard.core.health import HealthReader
from velashard.core.keeper import ResourceKeeper, refs_of
from velashard.core.rendered import RenderedApp, RenderedComponent, RenderError
from velashard.core.rendering import render_component
from velashard.core.tracker import Ref, RefKey
from velashard.kube import errors
from velashard.kube.controller import Retry, Terminal
from velashard.kube.discovery import Discovery
from velashard.kube.resources import Resource
from velashard.patch import PatchError
from velashard.patch.trait_patch import apply_trait_patch
from velashard.workflow.delivery import ComponentResult, DeliveryError

@dataclass
class Instance:
    """A component as a step deployed it in this reconcile: where, and its health."""
    component: RenderedComponent
    namespace: str
    replica_key: str
    healthy: bool
    message: str


@dataclass
class StepDelivery:
    ctx: ReconcileContext
    discovery: Discovery
    keeper: ResourceKeeper
    health: HealthReader
    rendered: RenderedApp
    run: str
    revision: int
    instances: list[Instance] = field(default_factory=list)

    def components(self) -> list[dict[str, Any]]:
        return copy.deepcopy(list((self.ctx.app.get("spec") or {}).get("components") or []))

    def policies(self) -> list[dict[str, Any]]:
        return copy.deepcopy(list((self.ctx.app.get("spec") or {}).get("policies") or []))

    def resource(self, api_version: str, kind: str) -> Resource:
        return self.discovery.for_kind(api_version, kind)

    def _render(self, component: dict[str, Any], namespace: str | None, patch: dict[str, Any] | None,
                replica_key: str) -> RenderedComponent:
        name = component.get("name", "")
        default = next((c for c in self.rendered.components if c.name == name), None)
        spec = self.ctx.app.get("spec") or {}
        as_written = next((c for c in spec.get("components") or [] if c.get("name") == name), None)
        overridden = any(p.get("type") == "override" for p in spec.get("policies") or [])
        if default is not None and not replica_key and not overridden and _bare(component) == _bare(as_written):
            comp = copy.deepcopy(default)  # rendered already in this reconcile
        else:
            try:
                comp = render_component(self.ctx.app, component, self.ctx.definitions, self.revision, replica_key)
            except RenderError as err:
                raise DeliveryError(str(err)) from None
        app_namespace = self.ctx.namespace
        for obj in comp.objects:
            meta = obj["metadata"]
            if namespace and meta.get("namespace") == app_namespace:
                meta["namespace"] = namespace
        if patch:
            try:
                comp.workload = apply_trait_patch(comp.workload, patch)
            except PatchError as err:
                raise DeliveryError(f'component "{name}": patch: {err}') from None
        return comp

    def as_written(self, name: str, replica_key: str = "") -> RenderedComponent | None:
        """A component as a step applies it by name (apply-component), or a replication policy's copy of it, for
        its health; None when unknown or it no longer renders."""
        component = next((c for c in (self.ctx.app.get("spec") or {}).get("components") or []
                          if c.get("name") == name), None)
        if component is None:
            return None
        try:
            return self._render(component, None, None, replica_key)
        except DeliveryError:
            return None

    def _tag(self, objects: list[dict[str, Any]], replica_key: str = "") -> dict[RefKey, Ref]:
        """Refs tagged with the run that deploys them (and the replica they are of), for the status and garbage
        collection once a later run succeeds without them."""
        extra = {"run": self.run, **({"replicaKey": replica_key} if replica_key else {})}
        return {k: {**r, **extra} for k, r in refs_of(objects).items()}

    def apply_component(self, component: dict[str, Any], namespace: str | None = None,
                        patch: dict[str, Any] | None = None, replica_key: str = "") -> ComponentResult:
        comp = self._render(component, namespace, patch, replica_key)
        self.keeper.use_kinds(comp.objects)
        self.keeper.record(self._tag(comp.objects, replica_key))
        try:
            self.keeper.dispatch(comp)
        except (Terminal, Retry) as problem:  # a step error: the engine tries again after its backoff
            raise DeliveryError(str(problem)) from None
        healthy, message = self.health.component(comp)
        self.instances.append(Instance(comp, namespace or self.ctx.namespace, replica_key, healthy, message))
        return ComponentResult(healthy, message, self.keeper.live(comp.workload), self._outputs(comp))

    def _outputs(self, comp: RenderedComponent) -> dict[str, dict[str, Any]]:
        out = {}
        for obj in comp.outputs:
            name = (obj["metadata"].get("labels") or {}).get(labels.TRAIT_RESOURCE)
            live = self.keeper.live(obj)
            if name and live is not None:
                out[name] = live
        return out

    def render_component(self, component: dict[str, Any], namespace: str | None = None,
                         patch: dict[str, Any] | None = None) -> ComponentResult:
        comp = self._render(component, namespace, patch, "")
        outputs = {(o["metadata"].get("labels") or {}).get(labels.TRAIT_RESOURCE, ""): o for o in comp.outputs}
        return ComponentResult(False, "", comp.workload, {k: v for k, v in outputs.items() if k})

    def dispatch(self, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        prepared = []
        for obj in objects:
            obj = copy.deepcopy(obj)
            meta = obj.setdefault("metadata", {})
            meta.setdefault("namespace", self.ctx.namespace)
            meta["labels"] = {**(meta.get("labels") or {}), labels.APP_NAME: self.ctx.name,
                              labels.APP_NAMESPACE: self.ctx.namespace}
            try:
                if not self.discovery.for_kind(obj["apiVersion"], obj["kind"]).namespaced:
                    meta.pop("namespace", None)
            except errors.NotFound:
                raise DeliveryError(f'the server has no resource for {obj["apiVersion"]} {obj["kind"]}') from None
            prepared.append(obj)
        self.keeper.use_kinds(prepared)
        # what steps apply beside components stays until the app is deleted (no run tag)
        self.keeper.record(refs_of(prepared))
        live = []
        for obj in prepared:
            step = RenderedComponent(f'workflow:{obj["kind"]}/{obj["metadata"]["name"]}', "", obj, [], [], [])
            try:
                self.keeper.dispatch(step, "workflow step object")
            except (Terminal, Retry) as problem:
                raise DeliveryError(str(problem)) from None
            live.append(self.keeper.live(obj) or obj)
        return live


def _bare(component: dict[str, Any] | None) -> dict[str, Any] | None:
    """A component without what only the workflow reads (data passing, ordering)."""
    if component is None:
        return None
    return {k: v for k, v in component.items() if k not in ("inputs", "outputs", "dependsOn")}
