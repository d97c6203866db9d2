"""A wrapper around any reconciler that makes it shard-aware: it acknowledges a drain by letting go of the
object, and stops acting on an object whose dependents were already relabelled for another shard.

Like timebertt/kubernetes-controller-sharding's shard reconciler, the wrapped reconciler knows nothing of
shards; it only calls `check_dependent` on dependents it reads from the API instead of its own label-selected
cache (those are the only ones that can belong to another shard).
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from velashard.apis import labels
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.controller import DONE, Reconcile, Result
from velashard.kube.resources import Resource
from velashard.observability import fields

log = logging.getLogger("velashard.sharding.shard_reconciler")


class MovedAway(Exception):
    """The object's dependents are labelled for another shard: the object is moving there; stop acting on it.

    Not a Terminal: nothing failed, and a reconciler that reports its failures (a workflow step, the
    app's status) must not report this one; it passes through to the ShardReconciler."""


def check_dependent(obj: dict[str, Any], dependent: dict[str, Any]) -> None:
    """Raises MovedAway when `dependent` is labelled for another shard than `obj`."""
    mine = (obj["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID)
    theirs = (dependent["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID)
    if theirs != mine:
        raise MovedAway(f'{dependent.get("kind", "dependent")} {dependent["metadata"]["name"]} belongs to shard '
                        f"{theirs}")


def wants_drain(obj: dict[str, Any] | None) -> bool:
    """The master asked the owning shard to let go (and the object is not being deleted: deletion finishes
    where it started)."""
    return obj is not None and not obj["metadata"].get("deletionTimestamp") and \
        labels.DRAIN in (obj["metadata"].get("labels") or {})


class ShardReconciler:
    def __init__(self, inner: Reconcile, client: KubeClient, resource: Resource,
                 lookup: Callable[[str], dict[str, Any] | None], on_release: Callable[[str], None] = lambda _k: None):
        self.inner, self.client, self.resource, self.lookup = inner, client, resource, lookup
        self.on_release = on_release  # told when this shard lets go of a key

    def __call__(self, key: str) -> Result | None:
        obj = self.lookup(key)
        if wants_drain(obj):
            self.let_go(obj)
            self.on_release(key)
            return DONE
        try:
            return self.inner(key)
        except MovedAway as err:
            log.info("object is moving to another shard; letting go", extra=fields(key=key, why=str(err)))
            self.on_release(key)
            return DONE

    def let_go(self, obj: dict[str, Any]) -> None:
        """Drain handshake: nothing of this object is in flight here (one key, one worker), so acknowledge by
        removing our shard id and the drain label; the master schedules it anew."""
        meta = obj["metadata"]
        try:
            self.client.patch(self.resource, meta["name"], {"metadata": {
                "labels": {labels.SCHEDULED_SHARD_ID: None, labels.DRAIN: None},
                "resourceVersion": meta["resourceVersion"]}}, meta.get("namespace"))
        except errors.NotFound:
            return
        log.info("drained", extra=fields(key=f'{meta.get("namespace", "")}/{meta["name"]}',
                                         to=meta["labels"][labels.DRAIN]))
