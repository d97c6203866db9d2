"""What the workflow engine is handed for a WorkflowRun (velashard.workflow.delivery.Delivery): a run has no
components or policies, and the objects its steps apply are applied as its author, labelled with the run as
kubevela/workflow labels them (workflowrun.oam.dev/name, workflowrun.oam.dev/namespace) and merged three ways
over what is live, so that fields others set survive. Nothing records them: as in KubeVela, a run's objects stay
when the run goes."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from velashard.apis import labels
from velashard.core import ownership
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.discovery import Discovery
from velashard.kube.resources import Resource
from velashard.workflow.delivery import ComponentResult, DeliveryError

NO_COMPONENTS = "a WorkflowRun has no components: steps that deploy components need an Application"


@dataclass
class RunDelivery:
    run: dict[str, Any]
    author: KubeClient  # every write goes through it: the run's author
    discovery: Discovery

    def components(self) -> list[dict[str, Any]]:
        return []

    def policies(self) -> list[dict[str, Any]]:
        return []

    def apply_component(self, component: dict[str, Any], namespace: str | None = None,
                        patch: dict[str, Any] | None = None, replica_key: str = "") -> ComponentResult:
        raise DeliveryError(NO_COMPONENTS)

    def render_component(self, component: dict[str, Any], namespace: str | None = None,
                         patch: dict[str, Any] | None = None) -> ComponentResult:
        raise DeliveryError(NO_COMPONENTS)

    def resource(self, api_version: str, kind: str) -> Resource:
        return self.discovery.for_kind(api_version, kind)

    def dispatch(self, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        meta = self.run["metadata"]
        mark = {labels.WORKFLOW_RUN_NAME: meta["name"], labels.WORKFLOW_RUN_NAMESPACE: meta.get("namespace", "")}
        live = []
        for obj in objects:
            obj = copy.deepcopy(obj)
            obj_meta = obj.setdefault("metadata", {})
            obj_meta["labels"] = {**(obj_meta.get("labels") or {}), **mark}
            try:
                res = self.discovery.for_kind(obj["apiVersion"], obj["kind"])
            except errors.NotFound:
                raise DeliveryError(f'the server has no resource for {obj["apiVersion"]} {obj["kind"]}') from None
            if not res.namespaced:
                obj_meta.pop("namespace", None)
            live.append(self._apply(res, obj))
        return live

    def _apply(self, res: Resource, desired: dict[str, Any]) -> dict[str, Any]:
        meta = desired["metadata"]
        namespace = meta.get("namespace") if res.namespaced else None
        where = f'{desired["kind"]} {namespace + "/" if namespace else ""}{meta["name"]}'
        try:
            try:
                current = self.author.get(res, meta["name"], namespace)
            except errors.NotFound:
                return self.author.create(res, ownership.with_last_applied(desired))
            merged = ownership.merged_for_update(desired, current)
            if not ownership.needs_update(merged, current):
                return current
            return self.author.update(res, merged)
        except (errors.Invalid, errors.BadRequest) as err:
            raise DeliveryError(f"{where} is invalid: {err.message}") from None
        except errors.Forbidden as err:
            raise DeliveryError(f"{where}: {err.message}") from None
        except (errors.Conflict, errors.AlreadyExists) as err:
            raise DeliveryError(f"{where}: {err.message} (tried again after the backoff)") from None
