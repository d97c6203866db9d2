"""The control loops kube-controller-manager would run for the embedded server: garbage collection
of dependents, namespace termination, and the lifecycle of CustomResourceDefinitions."""

from __future__ import annotations

import copy
import logging
import threading
from typing import Any

from velashard.apiserver import errors
from velashard.apiserver.admission import policy
from velashard.apiserver.registry.rest import GC_USER, Request, RestAPI
from velashard.apiserver.storage.resources import Registry, ResourceType
from velashard.apiserver.storage.store import SUBSCRIBER_BATCH_SECONDS, Event, now_rfc3339

log = logging.getLogger("velashard.apiserver.controllers.controller_manager")

CRD_GR = ("apiextensions.k8s.io", "customresourcedefinitions")
NS_GR = ("", "namespaces")
CRD_CLEANUP = "customresourcecleanup.apiextensions.k8s.io"


def crd_resource_types(crd: dict[str, Any]) -> list[ResourceType]:
    """The resource types a CustomResourceDefinition serves, one per served version."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    out = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        schema = ((version.get("schema") or {}).get("openAPIV3Schema")) or None
        out.append(ResourceType(
            group=spec["group"], version=version["name"], plural=names["plural"], kind=names["kind"],
            namespaced=spec.get("scope") == "Namespaced", singular=names.get("singular") or names["kind"].lower(),
            short_names=tuple(names.get("shortNames") or ()), categories=tuple(names.get("categories") or ()),
            status_subresource="status" in (version.get("subresources") or {}),
            schema=schema, printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
            crd_name=crd["metadata"]["name"]))
    return out


class Controllers:
    """One thread consuming every event of the store and converging what depends on it."""

    def __init__(self, api: RestAPI, types: Registry):
        self._api = api
        self._store = api.store
        self._types = types
        self._req = Request(user=dict(GC_USER))
        self._stop = threading.Event()
        self._sub = self._store.subscribe()
        self._thread = threading.Thread(target=self._run, name="apiserver-controllers", daemon=True)

    # Called synchronously after each commit so that a CRD's resources are served as soon as it exists.
    def on_commit(self, rt: ResourceType, event: Event) -> None:
        if rt.group_resource != CRD_GR:
            return
        if event.type == "DELETED":
            self._types.remove_crd(event.obj["metadata"]["name"])
            for crd_rt in crd_resource_types(event.obj):
                self._store.close_watchers(crd_rt.group_resource)
        elif not event.obj["metadata"].get("deletionTimestamp"):
            self._types.remove_crd(event.obj["metadata"]["name"])
            for crd_rt in crd_resource_types(event.obj):
                self._types.add(crd_rt)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._sub.close()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            events = self._sub.take(timeout=0.5)
            for event in events:
                try:
                    self._handle(event)
                except errors.APIError as err:
                    log.warning("controller action failed resource=%s/%s name=%s err=%s", event.gr[0], event.gr[1],
                                event.obj["metadata"].get("name"), err.message)
                except Exception:  # a control loop must survive any single object
                    log.exception("controller action crashed resource=%s/%s", *event.gr)
            if events:
                self._stop.wait(SUBSCRIBER_BATCH_SECONDS)  # woken once per batch, not once per event

    def _handle(self, event: Event) -> None:
        obj, meta = event.obj, event.obj["metadata"]
        if event.type == "DELETED":
            for gr, dependent in self._store.dependents_of(meta["uid"]):
                self._collect(gr, dependent)
            self._after_removal(event)
            return
        if meta.get("ownerReferences"):
            self._collect(event.gr, obj)
        if meta.get("deletionTimestamp"):
            self._finalize(event.gr, obj)
        elif event.gr == CRD_GR and not _established(obj):
            self._establish(obj)
        elif event.gr == policy.POLICIES and policy.status_update(obj) is not None:
            self._api.patch(self._types.for_group_resource(*policy.POLICIES), "", meta["name"],
                            "application/merge-patch+json", {"status": policy.status_update(obj)}, self._req, "status")

    # --- garbage collection ----------------------------------------------------------------------

    def _collect(self, gr: tuple[str, str], dependent: dict[str, Any]) -> None:
        """Delete a dependent whose owners are all gone; drop references to owners that are gone."""
        meta = dependent["metadata"]
        refs = meta.get("ownerReferences") or []
        live = [r for r in refs if self._owner_exists(r)]
        if len(live) == len(refs):
            return
        rt = self._types.for_group_resource(*gr)
        if rt is None:
            return
        namespace = meta.get("namespace") or ""
        if not live:
            if meta.get("deletionTimestamp"):
                return
            try:
                self._api.delete(rt, namespace, meta["name"], {"propagationPolicy": "Background",
                                                               "preconditions": {"uid": meta["uid"]}}, self._req)
            except errors.APIError as err:
                if err.code not in (404, 409):
                    raise
            return
        self._set_owner_refs(rt, namespace, meta["name"], live)

    def _owner_exists(self, ref: dict[str, Any]) -> bool:
        found = self._store.by_uid(ref.get("uid", ""))
        return found is not None

    def _set_owner_refs(self, rt: ResourceType, namespace: str, name: str, refs: list[dict[str, Any]]) -> None:
        try:
            self._api.patch(rt, namespace, name, "application/merge-patch+json",
                            {"metadata": {"ownerReferences": refs or None}}, self._req)
        except errors.APIError as err:
            if err.code != 404:
                raise

    # --- finalizers the server owns ---------------------------------------------------------------

    def _finalize(self, gr: tuple[str, str], obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        finalizers = meta.get("finalizers") or []
        rt = self._types.for_group_resource(*gr)
        if rt is None:
            return
        namespace = meta.get("namespace") or ""
        if "orphan" in finalizers:
            for dep_gr, dep in self._store.dependents_of(meta["uid"]):
                dep_rt = self._types.for_group_resource(*dep_gr)
                if dep_rt is not None:
                    refs = [r for r in dep["metadata"].get("ownerReferences") or [] if r.get("uid") != meta["uid"]]
                    self._set_owner_refs(dep_rt, dep["metadata"].get("namespace") or "", dep["metadata"]["name"],
                                         refs)
            self._remove_finalizer(rt, namespace, meta["name"], "orphan")
        if "foregroundDeletion" in finalizers:
            dependents = self._store.dependents_of(meta["uid"])
            for dep_gr, dep in dependents:
                dep_rt = self._types.for_group_resource(*dep_gr)
                if dep_rt is not None and not dep["metadata"].get("deletionTimestamp"):
                    self._delete_quietly(dep_rt, dep, "Foreground")
            if not dependents:
                self._remove_finalizer(rt, namespace, meta["name"], "foregroundDeletion")
        if gr == NS_GR and "kubernetes" in ((obj.get("spec") or {}).get("finalizers") or []):
            self._terminate_namespace(obj)
        if gr == CRD_GR and CRD_CLEANUP in finalizers:
            self._cleanup_crd(obj)

    def _after_removal(self, event: Event) -> None:
        meta = event.obj["metadata"]
        # A dependent going away may be the last one an owner in foreground deletion waited for.
        for ref in meta.get("ownerReferences") or []:
            found = self._store.by_uid(ref.get("uid", ""))
            if found and found[1]["metadata"].get("deletionTimestamp"):
                self._finalize(found[0], found[1])
        namespace = meta.get("namespace")
        if namespace:
            ns = self._store.get(NS_GR, ("", namespace))
            if ns is not None and ns["metadata"].get("deletionTimestamp"):
                self._terminate_namespace(ns)
        for crd in self._store.list(CRD_GR)[0]:
            spec = crd.get("spec") or {}
            if crd["metadata"].get("deletionTimestamp") and (spec.get("group"), (spec.get("names") or {}).get(
                    "plural")) == event.gr:
                self._cleanup_crd(crd)

    def _terminate_namespace(self, ns: dict[str, Any]) -> None:
        name = ns["metadata"]["name"]
        remaining = 0
        for gr in self._store.namespaced_buckets():
            rt = self._types.for_group_resource(*gr)
            if rt is None or not rt.namespaced:
                continue
            items, _ = self._store.list(gr, name)
            remaining += len(items)
            for item in items:
                if not item["metadata"].get("deletionTimestamp"):
                    self._delete_quietly(rt, item, "Background")
        if remaining:
            return
        ns_rt = self._types.for_group_resource(*NS_GR)
        assert ns_rt is not None
        finalized = copy.deepcopy(ns)
        finalized["spec"] = dict(finalized.get("spec") or {}, finalizers=[])
        try:
            self._api.update(ns_rt, "", name, finalized, self._req, subresource="finalize")
        except errors.APIError as err:
            if err.code not in (404, 409):
                raise

    def _cleanup_crd(self, crd: dict[str, Any]) -> None:
        types = crd_resource_types(crd)
        if not types:
            self._remove_finalizer(self._types.for_group_resource(*CRD_GR), "", crd["metadata"]["name"], CRD_CLEANUP)
            return
        rt = types[0]
        items, _ = self._store.list(rt.group_resource)
        for item in items:
            if not item["metadata"].get("deletionTimestamp"):
                self._delete_quietly(rt, item, "Background")
        if not items:
            self._remove_finalizer(self._types.for_group_resource(*CRD_GR), "", crd["metadata"]["name"], CRD_CLEANUP)

    def _delete_quietly(self, rt: ResourceType, obj: dict[str, Any], policy: str) -> None:
        try:
            self._api.delete(rt, obj["metadata"].get("namespace") or "", obj["metadata"]["name"],
                             {"propagationPolicy": policy}, self._req)
        except errors.APIError as err:
            if err.code != 404:
                raise

    def _remove_finalizer(self, rt: ResourceType | None, namespace: str, name: str, finalizer: str) -> None:
        if rt is None:
            return
        current = self._store.get(rt.group_resource, (namespace, name))
        if current is None or finalizer not in (current["metadata"].get("finalizers") or []):
            return
        remaining = [f for f in current["metadata"]["finalizers"] if f != finalizer]
        try:
            self._api.patch(rt, namespace, name, "application/merge-patch+json",
                            {"metadata": {"finalizers": remaining or None,
                                          "resourceVersion": current["metadata"]["resourceVersion"]}}, self._req)
        except errors.APIError as err:
            if err.code not in (404, 409):
                raise

    # --- CRD status ------------------------------------------------------------------------------

    def _establish(self, crd: dict[str, Any]) -> None:
        rt = self._types.for_group_resource(*CRD_GR)
        assert rt is not None
        spec = crd.get("spec") or {}
        now = now_rfc3339()
        status = {
            "acceptedNames": spec.get("names") or {},
            "storedVersions": [v["name"] for v in spec.get("versions") or [] if v.get("storage")],
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found", "lastTransitionTime": now},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted", "lastTransitionTime": now},
            ],
        }
        try:
            self._api.patch(rt, "", crd["metadata"]["name"], "application/merge-patch+json", {"status": status},
                            self._req, subresource="status")
        except errors.APIError as err:
            if err.code != 404:
                raise


def _established(crd: dict[str, Any]) -> bool:
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (crd.get("status") or {}).get("conditions") or [])
