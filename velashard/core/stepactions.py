"""What workflow steps do in the cluster, for the workflow engine (core/workflow.py `Actions`): apply
components in dependsOn order and report their health, apply and read objects, read other apps' phase."""

from __future__ import annotations

import copy
import json
from typing import Any, Callable

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.core.apply import Applier
from velashard.core.context import ReconcileContext
from velashard.core.rendering import RenderedComponent
from velashard.core.workflow import StepError
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.controller import Terminal
from velashard.kube.discovery import Discovery
from velashard.kube.resources import CONFIGMAPS

Health = Callable[[RenderedComponent], tuple[bool, str]]


class StepActions:
    def __init__(self, ctx: ReconcileContext, discovery: Discovery, applier: Applier,
                 components: list[RenderedComponent], health: Health):
        # Steps read and write as the app's author (ctx.author), never with the controller's own rights.
        self.ctx, self.discovery, self.applier = ctx, discovery, applier
        self.by_name = {c.name: c for c in components}
        self.health = health
        self.seen: dict[str, tuple[bool, str]] = {}  # component -> health, as this reconcile observed it
        self.applied_objects: list[dict[str, Any]] = []  # what steps applied beside components, for the tracker

    def health_of(self, name: str) -> tuple[bool, str]:
        if name not in self.seen:
            self.seen[name] = self.health(self.by_name[name])
        return self.seen[name]

    def apply_components(self, names: list[str]) -> tuple[bool, str]:
        waiting = []
        for name in names:
            comp = self.by_name[name]
            blocked = [d for d in comp.depends_on if not self.health_of(d)[0]]
            if blocked:
                waiting.append(f'{name} waits for {", ".join(blocked)}')
                continue
            try:
                self.applier.apply_component(self.ctx, comp)
            except Terminal as problem:
                raise StepError(str(problem), "ApplyFailed") from problem
            self.seen.pop(name, None)
            healthy, message = self.health_of(name)
            if not healthy:
                waiting.append(f"{name}: {message}")
        return not waiting, "; ".join(waiting)

    def apply_object(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", self.ctx.namespace)
        meta["labels"] = {**(meta.get("labels") or {}), labels.APP_NAME: self.ctx.name,
                          labels.APP_NAMESPACE: self.ctx.namespace}
        step = RenderedComponent(f'workflow:{obj["kind"]}/{obj["metadata"]["name"]}', "", obj, [], [], [])
        try:
            self.applier.apply_component(self.ctx, step)
        except Terminal as problem:
            raise StepError(str(problem), "ApplyFailed") from problem
        self.applied_objects.append(obj)
        return self.applier.live_of(self.ctx, obj) or obj

    def read_object(self, api_version: str, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        try:
            res = self.discovery.for_kind(api_version, kind)
        except errors.NotFound:
            raise StepError(f"the server has no resource for {api_version} {kind}", "InvalidParameter") from None
        try:
            return self.ctx.author.get(res, name, namespace if res.namespaced else None)
        except errors.NotFound:
            return None
        except errors.Forbidden as err:
            raise StepError(err.message, "Forbidden") from err

    def app_phase(self, namespace: str, name: str) -> str | None:
        try:
            return (self.ctx.author.get(APPLICATIONS, name, namespace).get("status") or {}).get("status")
        except errors.NotFound:
            return None
        except errors.Forbidden as err:
            raise StepError(err.message, "Forbidden") from err


class WorkflowVariables:
    """Step outputs kept between reconciles in the ConfigMap `workflow-<app>-context`, as KubeVela keeps them: in
    the app's namespace, so read and written as the app's author."""

    @staticmethod
    def name(app: dict[str, Any]) -> str:
        return f'workflow-{app["metadata"]["name"]}-context'

    def read(self, client: KubeClient, app: dict[str, Any]) -> dict[str, Any]:
        try:
            found = client.get(CONFIGMAPS, self.name(app), app["metadata"]["namespace"])
        except errors.NotFound:
            return {}
        try:
            values = json.loads((found.get("data") or {}).get("variables", "{}"))
        except ValueError:
            return {}
        return values if isinstance(values, dict) else {}

    def delete(self, client: KubeClient, app: dict[str, Any]) -> None:
        try:
            client.delete(CONFIGMAPS, self.name(app), app["metadata"]["namespace"])
        except errors.NotFound:
            pass

    def write(self, client: KubeClient, app: dict[str, Any], variables: dict[str, Any]) -> None:
        meta = app["metadata"]
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": self.name(app), "namespace": meta["namespace"],
            "labels": {labels.APP_NAME: meta["name"], labels.APP_NAMESPACE: meta["namespace"]}},
            "data": {"variables": json.dumps(variables, sort_keys=True)}}
        try:
            live = client.get(CONFIGMAPS, self.name(app), meta["namespace"])
        except errors.NotFound:
            client.create(CONFIGMAPS, body, meta["namespace"])
            return
        live["data"] = body["data"]
        client.update(CONFIGMAPS, live)
