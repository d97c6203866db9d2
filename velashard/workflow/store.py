"""Where a run's context lives between reconciles: KubeVela's ConfigMap `workflow-<app>-context` in the app's
namespace, owned by the app, written only when a step changed something. status.workflow.contextBackend names it
with the resourceVersion last written, so a process that wrote it reads nothing back while its cached copy is that
version (a restart, or a move to another shard, reads it once). Every request goes through the client the engine
was given for the app (its author)."""

from __future__ import annotations

import threading
from typing import Any

from cachetools import LRUCache

from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.resources import CONFIGMAPS
from velashard.workflow.context import WorkflowContext

_CACHE_SIZE = 4096


def context_name(app_name: str) -> str:
    return f"workflow-{app_name}-context"


def backend_ref(configmap: dict[str, Any]) -> dict[str, Any]:
    """status.workflow.contextBackend: KubeVela's ObjectReference to the ConfigMap, with the version we wrote."""
    meta = configmap["metadata"]
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": meta["name"], "namespace": meta["namespace"],
            "uid": meta.get("uid", ""), "resourceVersion": meta.get("resourceVersion", "")}


class ContextStore:
    def __init__(self) -> None:
        self._cache: LRUCache = LRUCache(maxsize=_CACHE_SIZE)  # (namespace, name) -> the ConfigMap as written
        self._lock = threading.Lock()

    def _cached(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._cache.get((namespace, name))

    def _remember(self, configmap: dict[str, Any]) -> None:
        meta = configmap["metadata"]
        with self._lock:
            self._cache[(meta["namespace"], meta["name"])] = configmap

    def load(self, author: KubeClient, backend: dict[str, Any] | None) -> WorkflowContext:
        """The run's context: empty for a run that has stored none yet; from the cache when it holds the version
        the status names; else read (once)."""
        if not backend or not backend.get("name"):
            return WorkflowContext()
        namespace, name = backend.get("namespace", ""), backend["name"]
        cached = self._cached(namespace, name)
        if cached is None or cached["metadata"].get("resourceVersion") != backend.get("resourceVersion"):
            try:
                cached = author.get(CONFIGMAPS, name, namespace)
            except errors.NotFound:
                return WorkflowContext()
            self._remember(cached)
        return WorkflowContext.from_data(cached.get("data"))

    def commit(self, author: KubeClient, app: dict[str, Any], backend: dict[str, Any] | None,
               context: WorkflowContext) -> dict[str, Any] | None:
        """Write the context if a step changed it; the contextBackend to record (the old one when unchanged)."""
        if not context.modified:
            return backend
        meta = app["metadata"]
        namespace, name = meta["namespace"], context_name(meta["name"])
        data = context.to_data()
        if backend and backend.get("name"):
            current = self._cached(namespace, backend["name"])
            if current is not None and current["metadata"].get("resourceVersion") == backend.get("resourceVersion"):
                written = self._update(author, dict(current, data=data))
                self._remember(written)
                context.modified = False
                return backend_ref(written)
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
                "data": data}
        if meta.get("uid"):
            body["metadata"]["ownerReferences"] = [_owner(app)]
        try:
            written = author.create(CONFIGMAPS, body, namespace)
        except errors.AlreadyExists:
            # an earlier run's (or a write whose status update was lost): this run's context replaces it
            live = author.get(CONFIGMAPS, name, namespace)
            written = self._update(author, dict(live, data=data))
        self._remember(written)
        context.modified = False
        return backend_ref(written)

    def _update(self, author: KubeClient, configmap: dict[str, Any]) -> dict[str, Any]:
        try:
            return author.update(CONFIGMAPS, configmap)
        except errors.Conflict:
            meta = configmap["metadata"]
            live = author.get(CONFIGMAPS, meta["name"], meta["namespace"])
            return author.update(CONFIGMAPS, dict(live, data=configmap.get("data")))

    def forget(self, backend: dict[str, Any] | None) -> None:
        if backend and backend.get("name"):
            with self._lock:
                self._cache.pop((backend.get("namespace", ""), backend["name"]), None)

    def delete(self, author: KubeClient, backend: dict[str, Any] | None) -> None:
        """Delete the run's ConfigMap (the app is going; its owner reference would have it collected too)."""
        if not backend or not backend.get("name"):
            return
        self.forget(backend)
        try:
            author.delete(CONFIGMAPS, backend["name"], backend.get("namespace"))
        except errors.NotFound:
            pass


def _owner(app: dict[str, Any]) -> dict[str, Any]:
    meta = app["metadata"]
    return {"apiVersion": app.get("apiVersion", "core.oam.dev/v1beta1"), "kind": app.get("kind", "Application"),
            "name": meta["name"], "uid": meta["uid"], "controller": True}
