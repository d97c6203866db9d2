"""A wrapper around any reconciler that makes it shard-aware: it acknowledges a drain by letting go of the
object, hands an object whose shard assignment has no valid proof back to the scheduler instead of running
it, and stops acting on an object whose dependents were already relabelled for another shard.

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
from velashard.observability import ASSIGNMENTS_REJECTED, fields
from velashard.sharding.keys import AssignmentCheck
from velashard.sharding.proof import MISSING, NO_KEY, UNPROVEN, rejection_reason

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


# (object, type, reason, message): records an Event, raising a failure that may pass (see core/events.py)
Event = Callable[[dict[str, Any], str, str, str], None]


class ShardReconciler:
    def __init__(self, inner: Reconcile, client: KubeClient, resource: Resource,
                 lookup: Callable[[str], dict[str, Any] | None], on_release: Callable[[str], None] = lambda _k: None,
                 check: AssignmentCheck | None = None, event: Event = lambda *_a: None):
        self.inner, self.client, self.resource, self.lookup = inner, client, resource, lookup
        self.on_release = on_release  # told when this shard lets go of a key
        self.check, self.event = check, event

    def __call__(self, key: str) -> Result | None:
        obj = self.lookup(key)
        if wants_drain(obj):
            self.let_go(obj)
            self.on_release(key)
            return DONE
        if self.check is not None and not self._may_run(key, obj):
            return DONE
        try:
            return self.inner(key)
        except MovedAway as err:
            log.info("object is moving to another shard; letting go", extra=fields(key=key, why=str(err)))
            self.on_release(key)
            return DONE

    def _may_run(self, key: str, obj: dict[str, Any] | None) -> bool:
        """Whether the app's assignment is proven (a deleted app passes: there is nothing to run). Without the
        master's key yet it waits, as the key's arrival brings every app back; unproven, it is handed back."""
        assert self.check is not None
        if obj is None:
            self.check.forget(key)
            return True
        verdict, assignment = self.check.verdict(key, obj)
        if verdict == NO_KEY:
            log.debug("waiting for the master's verifying key before running the object", extra=fields(key=key))
            return False
        if verdict == UNPROVEN:
            self.hand_back(obj, rejection_reason(assignment))
            self.on_release(key)
            return False
        return True

    def let_go(self, obj: dict[str, Any]) -> None:
        """Drain handshake: nothing of this object is in flight here (one key, one worker), so acknowledge by
        removing our shard id and the drain label; the master schedules it anew."""
        if not self._unschedule(obj):
            return
        meta = obj["metadata"]
        log.info("drained", extra=fields(key=f'{meta.get("namespace", "")}/{meta["name"]}',
                                         to=meta["labels"][labels.DRAIN]))

    def hand_back(self, obj: dict[str, Any], reason: str) -> None:
        """The assignment was not made by the scheduler (a tenant wrote the label while the webhook was down, or
        the proof was altered): unschedule it unrun, so that the master places it (with its dependents, if
        any) through the normal path. A conflict means it changed meanwhile: its new version comes back.

        The Event, the only trace of the forged assignment a user sees, is recorded first: once unscheduled,
        the app leaves this shard's cache and nothing here would try it again. An Event that cannot be recorded
        yet (fenced, no answer) fails this reconcile with the app still ours, so it is tried again."""
        meta = obj["metadata"]
        key = f'{meta.get("namespace", "")}/{meta["name"]}'
        shard = meta["labels"][labels.SCHEDULED_SHARD_ID]
        self.event(obj, "Warning", "UnprovenShardAssignment",
                   f"the assignment to shard {shard} has {'no' if reason == MISSING else 'an invalid'} proof "
                   f"(annotation {labels.ASSIGNMENT_PROOF}): only the scheduler assigns shards; handed back to it")
        if not self._unschedule(obj):
            return
        ASSIGNMENTS_REJECTED.labels(reason=reason).inc()
        log.warning("shard assignment without a valid proof; handed back to the scheduler", extra=fields(
            key=key, assigned=shard, proof=reason))

    def _unschedule(self, obj: dict[str, Any]) -> bool:
        """Remove our shard id, a drain request and the proof (guarded by the resourceVersion); False if gone."""
        meta = obj["metadata"]
        try:
            self.client.patch(self.resource, meta["name"], {"metadata": {
                "labels": {labels.SCHEDULED_SHARD_ID: None, labels.DRAIN: None},
                "annotations": {labels.ASSIGNMENT_PROOF: None},
                "resourceVersion": meta["resourceVersion"]}}, meta.get("namespace"))
        except errors.NotFound:
            return False
        return True
