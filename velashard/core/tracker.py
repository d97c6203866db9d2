"""The ResourceTracker: the record of what an app manages, read from the cache or the API and saved back."""

from __future__ import annotations

import copy
from typing import Any, Callable

from velashard.apis import labels
from velashard.apis.oam import API_VERSION, RESOURCE_TRACKERS
from velashard.core.ownership import dependent_labels
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.controller import Retry

Ref = dict[str, Any]
RefKey = tuple[str, str, str, str]
# Called with (app, dependent) for a dependent read from the API rather than the app's own cache; it raises to
# stop the reconcile when the dependent says the app is no longer ours (see sharding/shard_reconciler.py).
DependentCheck = Callable[[dict[str, Any], dict[str, Any]], None]


def tracker_name(app: dict[str, Any]) -> str:
    return f'{app["metadata"]["name"]}-{app["metadata"]["namespace"]}'


def ref_of(obj: dict[str, Any]) -> Ref:
    """How the tracker and the status name a managed object."""
    meta = obj["metadata"]
    ref = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"]}
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    component = (meta.get("labels") or {}).get(labels.APP_COMPONENT)
    if component:
        ref["component"] = component
    trait = (meta.get("labels") or {}).get(labels.TRAIT_TYPE)
    if trait:
        ref["trait"] = trait  # as KubeVela's ManagedResource records it, for garbage-collect rules
    return ref


def ref_key(ref: Ref) -> RefKey:
    return (ref["apiVersion"], ref["kind"], ref.get("namespace", ""), ref["name"])


def managed_refs(tracker: dict[str, Any]) -> dict[RefKey, Ref]:
    return {ref_key(r): r for r in (tracker.get("spec") or {}).get("managedResources") or []}


class Trackers:
    def __init__(self, client: KubeClient, informer: Any, check_dependent: DependentCheck | None = None):
        self.client, self.informer = client, informer
        self.check_dependent = check_dependent

    def version(self, app: dict[str, Any]) -> str:
        """The resourceVersion of the app's cached tracker ("" when there is none in the cache)."""
        return self.informer.store.version(tracker_name(app)) or ""

    def get(self, app: dict[str, Any]) -> dict[str, Any]:
        """The app's tracker (a private copy), or a new unsaved one."""
        name = tracker_name(app)
        store = self.informer.store
        cached = store.get(name)
        if cached is not None:
            return cached if store.packed else copy.deepcopy(cached)  # a packed store's reads are private
        if not (app.get("status") or {}).get("latestRevision"):
            return self._new(app)  # never reconciled: no tracker yet (save finds out if there is one after all)
        try:
            tracker = self.client.get(RESOURCE_TRACKERS, name)
        except errors.NotFound:
            return self._new(app)
        if self.check_dependent is not None:
            self.check_dependent(app, tracker)
        return tracker

    @staticmethod
    def _new(app: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": API_VERSION, "kind": "ResourceTracker",
                "metadata": {"name": tracker_name(app), "labels": dependent_labels(app)},
                "spec": {"managedResources": []}}

    def save(self, app: dict[str, Any], tracker: dict[str, Any], refs: dict[RefKey, Ref]) -> dict[str, Any]:
        wanted = sorted(refs.values(), key=ref_key)
        if (tracker.get("spec") or {}).get("managedResources") == wanted and "resourceVersion" in tracker["metadata"] \
                and tracker["metadata"].get("labels") == dependent_labels(app):
            return tracker
        tracker = dict(tracker, spec={"managedResources": wanted})
        tracker["metadata"] = dict(tracker["metadata"], labels=dependent_labels(app))
        if "resourceVersion" in tracker["metadata"]:
            return self.client.update(RESOURCE_TRACKERS, tracker)
        try:
            return self.client.create(RESOURCE_TRACKERS, tracker)
        except errors.AlreadyExists:
            # Written by an earlier reconcile whose status write did not happen, or labelled for another shard.
            existing = self.client.get(RESOURCE_TRACKERS, tracker["metadata"]["name"])
            if self.check_dependent is not None:
                self.check_dependent(app, existing)
            raise Retry("the tracker exists but is not cached yet; converging again") from None

    def delete(self, tracker: dict[str, Any]) -> None:
        if "resourceVersion" not in tracker["metadata"]:
            return
        try:
            self.client.delete(RESOURCE_TRACKERS, tracker["metadata"]["name"])
        except errors.NotFound:
            pass
