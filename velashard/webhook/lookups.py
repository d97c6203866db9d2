"""Cluster reads the webhooks need: cached briefly, or followed by an informer, so that admission stays fast."""

from __future__ import annotations

import threading
from typing import Any

from cachetools import TTLCache

from velashard.apis import labels
from velashard.apis.oam import COMPONENT_DEFINITIONS, POLICY_DEFINITIONS, TRAIT_DEFINITIONS
from velashard.core.definitions import Definitions, lookup_order
from velashard.core.rendered import RenderError
from velashard.core.rendering import render_app
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.manager import Manager
from velashard.kube.resources import LEASES, NAMESPACES
from velashard.sharding.loads import LEASE_LABEL, parse_loads
from velashard.sharding.strategies import pinned_shard


class ClusterLookups:
    def __init__(self, client: KubeClient, namespace: str, ttl: float = 10.0):
        self.client = client
        self.namespace_name = namespace
        self._cache: TTLCache = TTLCache(maxsize=4096, ttl=ttl)
        self._lock = threading.Lock()

    def _cached(self, key: Any, load: Any) -> Any:
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        value = load()
        with self._lock:
            self._cache[key] = value
        return value

    def namespace(self, name: str) -> dict[str, Any] | None:
        def load() -> dict[str, Any] | None:
            try:
                return self.client.get(NAMESPACES, name)
            except errors.NotFound:
                return None
        return self._cached(("ns", name), load) if name else None

    def loads(self) -> dict[str, int]:
        """App counts shards publish, as last read (placement counts its own picks on top of them)."""
        return dict(self._cached("loads", lambda: parse_loads(
            self.client.list(LEASES, self.namespace_name, label_selector=LEASE_LABEL).get("items") or [])))

    def definitions(self, namespace: str) -> Definitions:
        """The definitions as an app in `namespace` sees them (its namespace's, then vela-system's), as the
        controller resolves them."""
        def listed(where: str) -> tuple[list[dict[str, Any]], ...]:
            return self._cached(("defs", where), lambda: tuple(self.client.list(res, where)["items"] for res in (
                COMPONENT_DEFINITIONS, TRAIT_DEFINITIONS, POLICY_DEFINITIONS)))
        found = [listed(where) for where in lookup_order(namespace)]
        return Definitions.from_objects(*[[d for lists in found for d in lists[i]] for i in range(3)],
                                        namespace=namespace)

    def check_components(self, app: dict[str, Any]) -> str | None:
        """ValidateComponentWhenSharding: component and trait types exist and their parameters are valid."""
        try:
            render_app(app, self.definitions((app.get("metadata") or {}).get("namespace") or "default"), 0)
        except RenderError as err:
            return str(err)
        return None


class NamespacePins:
    """The shard a namespace pins its apps to (its controller.core.oam.dev/shard-id label), from an informer of
    the namespaces that keeps only their names and that label: the mutating webhook asks on every call, so no
    call waits for a read of its namespace, and a pin set or removed holds from the next call on. A namespace the
    informer has not seen yet (created a moment ago: its watch event may come after the first app's admission, and
    a tenant must not slip past its namespace's pin that way) is read, as every namespace is until the informer
    has synced (through `lookups`)."""

    def __init__(self, manager: Manager, lookups: ClusterLookups):
        self._informer = manager.informer(NAMESPACES, transform=_pin_only)
        self._lookups = lookups

    def shard_for(self, namespace: str) -> str | None:
        if not namespace:
            return None
        seen = self._informer.store.get_by(None, namespace) if self._informer.has_synced() else None
        return pinned_shard(seen if seen is not None else self._lookups.namespace(namespace))


def _pin_only(namespace: dict[str, Any]) -> dict[str, Any]:
    meta = namespace.get("metadata") or {}
    pin = (meta.get("labels") or {}).get(labels.SHARD_ID)
    return {"metadata": {"name": meta.get("name", ""), "resourceVersion": meta.get("resourceVersion", ""),
                         **({"labels": {labels.SHARD_ID: pin}} if pin else {})}}
