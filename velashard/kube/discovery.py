"""Resolving group/resource or apiVersion/kind to a Resource through the API's discovery documents."""

from __future__ import annotations

import threading

from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.resources import Resource


class Discovery:
    """Cached discovery; a miss re-reads the server once (a CRD may have just been installed).

    Reads are single-flight: threads that miss together wait for one re-read instead of each making one
    (a failover's move workers all resolve their first kind at the same moment)."""

    def __init__(self, client: KubeClient):
        self._client = client
        self._lock = threading.Lock()
        self._by_kind: dict[tuple[str, str], Resource] = {}
        self._by_resource: dict[tuple[str, str], Resource] = {}
        self._loaded = False
        self._loads = 0  # completed re-reads
        self._version: dict | None = None

    def server_version(self) -> dict | None:
        """The API server's /version (read once; None when it cannot be read)."""
        if self._version is None:
            try:
                self._version = self._client.request("version", "GET", "/version")
            except (errors.KubeError, OSError):
                return None
        return self._version

    def _load(self) -> None:
        by_kind, by_resource = {}, {}
        versions = [("", "v1", True)]
        for group in self._client.request("discovery", "GET", "/apis").get("groups") or []:
            preferred = group["preferredVersion"]["version"]
            versions.append((group["name"], preferred, True))
            # other served versions resolve by apiVersion/kind (KubeVela's cpuscaler renders autoscaling/v1)
            versions += [(group["name"], v["version"], False) for v in group.get("versions") or []
                         if v.get("version") and v["version"] != preferred]
        for group, version, is_preferred in versions:
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            try:
                listing = self._client.request("discovery", "GET", path)
            except errors.NotFound:
                continue
            for entry in listing.get("resources") or []:
                if "/" in entry["name"]:
                    continue
                res = Resource(group, version, entry["name"], entry["kind"], entry.get("namespaced", True))
                by_kind[(res.api_version, res.kind)] = res
                if is_preferred:
                    by_resource[(group, res.plural)] = res
                else:
                    by_resource.setdefault((group, res.plural), res)
                # singular names too, as a RESTMapper resolves them (KubeVela's ref-objects say `resource: configmap`)
                by_resource.setdefault((group, entry.get("singularName") or entry["kind"].lower()), res)
        self._by_kind, self._by_resource, self._loaded = by_kind, by_resource, True

    def _reload(self, seen: int) -> None:
        """Re-read unless another thread finished a re-read since this one looked (`seen`)."""
        with self._lock:
            if self._loads == seen:
                self._load()
                self._loads += 1

    def _find(self, table: str, key: tuple[str, str]) -> Resource:
        for attempt in range(2):
            seen = self._loads
            if not self._loaded or attempt == 1:
                self._reload(seen)
            found = getattr(self, table).get(key)
            if found is not None:
                return found
        raise errors.NotFound(404, "NotFound", f"the server has no resource for {key[0]}/{key[1]}")

    def for_kind(self, api_version: str, kind: str) -> Resource:
        return self._find("_by_kind", (api_version, kind))

    def for_resource(self, group: str, plural: str) -> Resource:
        return self._find("_by_resource", (group, plural))
