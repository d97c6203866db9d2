"""Setting an application's shard: its managed resources, revisions and trackers first, then the app itself.

The order is the invariant KubeVela issue 6433 breaks: the new shard only sees the app once its
label changes, and by then everything the app's reconcile reads already carries the new id. Managed
resources are found through the app's ResourceTracker, never by listing a kind cluster-wide, and relabelled
as the app's author (the controller has no write access of its own to what apps render); one the author may
no longer change keeps its old label, and the new shard, acting as the same author, reports the refusal.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

from velashard.apis import labels
from velashard.apis.oam import APPLICATION_REVISIONS, APPLICATIONS, RESOURCE_TRACKERS, SCHEDULED_RESOURCES
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.discovery import Discovery
from velashard.kube.events import record
from velashard.kube.resources import Resource
from velashard.observability import fields
from velashard.sharding.proof import Signer, subject

log = logging.getLogger("velashard.sharding.move")

# One discovery cache per client: resolving a tracker's kinds must not re-read discovery on every move.
_discoveries: "weakref.WeakKeyDictionary[KubeClient, Discovery]" = weakref.WeakKeyDictionary()


def _label_patch(shard: str | None) -> dict[str, Any]:
    return {"metadata": {"labels": {labels.SCHEDULED_SHARD_ID: shard}}}


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _managed_label_patch(namespace: str, name: str, shard: str | None) -> list[dict[str, Any]]:
    """A JSON patch that relabels a managed resource only while it still belongs to the app (a resource the
    app recorded but another app owns keeps its owner's shard)."""
    base = "/metadata/labels/"
    ops: list[dict[str, Any]] = [{"op": "test", "path": base + _escape(labels.APP_NAME), "value": name},
                                 {"op": "test", "path": base + _escape(labels.APP_NAMESPACE), "value": namespace}]
    if shard is None:
        ops.append({"op": "remove", "path": base + _escape(labels.SCHEDULED_SHARD_ID)})
    else:
        ops.append({"op": "add", "path": base + _escape(labels.SCHEDULED_SHARD_ID), "value": shard})
    return ops


def dependents(client: KubeClient, namespace: str, name: str) -> list[tuple[Any, dict[str, Any]]]:
    """The app's ApplicationRevisions and ResourceTrackers, found by label (never by listing everything)."""
    selector = f"{labels.APP_NAME}={name},{labels.APP_NAMESPACE}={namespace}"
    revisions, _ = client.list_all(APPLICATION_REVISIONS, namespace, label_selector=f"{labels.APP_NAME}={name}")
    trackers, _ = client.list_all(RESOURCE_TRACKERS, label_selector=selector)
    return [(APPLICATION_REVISIONS, r) for r in revisions] + [(RESOURCE_TRACKERS, t) for t in trackers]


Found = list[tuple[Any, dict[str, Any]]]


def group_dependents(revisions: list[dict[str, Any]], trackers: list[dict[str, Any]]) -> dict[tuple[str, str], Found]:
    """Revisions and trackers listed for a whole shard, by the app they belong to: (namespace, name)."""
    out: dict[tuple[str, str], Found] = {}
    for res, objs in ((APPLICATION_REVISIONS, revisions), (RESOURCE_TRACKERS, trackers)):
        for obj in objs:
            meta_labels = obj["metadata"].get("labels") or {}
            name = meta_labels.get(labels.APP_NAME)
            namespace = meta_labels.get(labels.APP_NAMESPACE) or obj["metadata"].get("namespace")
            if name and namespace:
                out.setdefault((namespace, name), []).append((res, obj))
    return out


def shard_dependents(client: KubeClient, shard: str) -> dict[tuple[str, str], Found]:
    """Every revision and tracker labelled for `shard`, by app: two lists for a whole failed shard instead of
    two per app (a failover moves hundreds of apps at once)."""
    selector = f"{labels.SCHEDULED_SHARD_ID}={shard}"
    revisions, _ = client.list_all(APPLICATION_REVISIONS, label_selector=selector)
    trackers, _ = client.list_all(RESOURCE_TRACKERS, label_selector=selector)
    return group_dependents(revisions, trackers)


def managed_refs(found: list[tuple[Any, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The resources the app's trackers record, each once."""
    seen: dict[tuple, dict[str, Any]] = {}
    for res, obj in found:
        if res is RESOURCE_TRACKERS:
            for ref in (obj.get("spec") or {}).get("managedResources") or []:
                seen.setdefault((ref.get("apiVersion"), ref.get("kind"), ref.get("namespace"), ref.get("name")), ref)
    return list(seen.values())


def _relabel_managed(client: KubeClient, app_ns: str, app_name: str, refs: list[dict[str, Any]],
                     shard: str | None, writer: KubeClient) -> None:
    discovery = _discoveries.get(client)
    if discovery is None:
        discovery = _discoveries[client] = Discovery(client)
    for ref in refs:
        try:
            res: Resource = discovery.for_kind(ref["apiVersion"], ref["kind"])
            if res in SCHEDULED_RESOURCES:
                continue  # an Application (or WorkflowRun) the app applied is placed on a shard of its own
            writer.patch(res, ref["name"], _managed_label_patch(app_ns, app_name, shard),
                         ref.get("namespace") if res.namespaced else None, patch_type="json")
        except errors.NotFound:
            continue  # gone, or its kind is gone: nothing to relabel
        except errors.Forbidden as err:
            log.warning("managed resource not relabelled: the app's author may not change it", extra=fields(
                key=f"{app_ns}/{app_name}", resource=f'{ref["kind"]}/{ref.get("namespace", "")}/{ref["name"]}',
                error=err.message))
        except errors.Invalid:
            # The test failed (another app owns it now) or the label to remove is absent: leave it alone.
            log.debug("managed resource not relabelled", extra=fields(
                key=f"{app_ns}/{app_name}", resource=f'{ref["kind"]}/{ref.get("namespace", "")}/{ref["name"]}'))


def _relabel_dependents(client: KubeClient, namespace: str, name: str, shard: str | None,
                        found: Found | None = None, writer: KubeClient | None = None) -> None:
    if found is None:
        found = dependents(client, namespace, name)
    _relabel_managed(client, namespace, name, managed_refs(found), shard, writer or client)
    for res, obj in found:
        if (obj["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID) != shard:
            try:
                client.patch(res, obj["metadata"]["name"], _label_patch(shard), obj["metadata"].get("namespace"))
            except errors.NotFound:
                pass


# Why an app was placed or moved, in the words of its Event.
REASONS = {"unscheduled": "it had no shard", "orphaned": "its shard was unavailable",
           "manual": "rescheduled by hand", "rebalance": "rebalanced onto a new shard"}


def placement_event(previous: str | None, shard: str, reason: str, lost_at: str | None = None
                    ) -> tuple[str, str, dict[str, str]]:
    """(reason, message, annotations) of the Event that says an app was placed on `shard` or moved there."""
    why = REASONS.get(reason, reason)
    data = {labels.EVENT_TO_SHARD: shard, labels.EVENT_MOVE_REASON: reason}
    if previous is None:
        return "Scheduled", f"scheduled to shard {shard}: {why}", data
    data[labels.EVENT_FROM_SHARD] = previous
    if lost_at:
        data[labels.EVENT_SHARD_LOST_AT] = lost_at
        why = f"shard {previous} unavailable since {lost_at}"
    return "Rescheduled", f"rescheduled from shard {previous} to shard {shard}: {why}", data


def set_shard(client: KubeClient, app: dict[str, Any], shard: str, reason: str, signer: Signer,
              found: Found | None = None, writer: KubeClient | None = None, lost_at: str | None = None,
              resource: Resource = APPLICATIONS) -> dict[str, Any]:
    """Label the app's managed resources, revisions and trackers, then the app (guarded by its
    resourceVersion, and with the proof of its new assignment); returns the updated app. Any failure returns the
    dependents to the app's shard.

    `found`: the app's revisions and trackers when the caller listed them already (shard_dependents).
    `writer`: the client that relabels the managed resources, acting as the app's author (default: `client`).
    `lost_at`: when the shard an orphan leaves was first seen unavailable. A Scheduled or Rescheduled Event on the
    app says what happened (one request, only on this path: placements at admission are the shard's to record).
    `resource`: what is placed; a WorkflowRun has no revisions, trackers or resources carrying its shard: it moves
    alone."""
    meta = app["metadata"]
    patch = _label_patch(shard)
    patch["metadata"]["resourceVersion"] = meta["resourceVersion"]
    patch["metadata"]["labels"][labels.DRAIN] = None
    patch["metadata"]["annotations"] = {labels.ASSIGNMENT_PROOF: signer.sign(
        meta["namespace"], subject(resource.kind, meta["name"]), shard)}
    alone = resource is not APPLICATIONS
    try:
        if not alone:
            _relabel_dependents(client, meta["namespace"], meta["name"], shard, found, writer)
        updated = client.patch(resource, meta["name"], patch, meta["namespace"])
    except errors.KubeError:
        if not alone:
            _roll_back(client, meta["namespace"], meta["name"], writer)
        raise
    previous = (meta.get("labels") or {}).get(labels.SCHEDULED_SHARD_ID)
    log.info(f"{resource.kind.lower()} scheduled", extra=fields(key=f'{meta["namespace"]}/{meta["name"]}',
                                                                shard=shard, previous=previous or "-", reason=reason))
    if previous != shard:
        event, message, data = placement_event(previous, shard, reason, lost_at)
        record(client, updated, resource, "Normal", event, message, "velashard-scheduler", data)
    return updated


def _roll_back(client: KubeClient, namespace: str, name: str, writer: KubeClient | None = None) -> None:
    """The app kept its shard (conflict, denial, outage): give its dependents and managed resources the app's
    label back, or its shard would find them gone from its caches and let the app go with nobody reconciling it."""
    try:
        app = client.get(APPLICATIONS, name, namespace)
        shard = (app["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID)
        _relabel_dependents(client, namespace, name, shard, writer=writer)
    except errors.KubeError as err:
        log.error("cannot roll back a failed move", extra=fields(key=f"{namespace}/{name}", error=str(err)))
        return
    log.warning("move failed; dependents returned to the app's shard", extra=fields(
        key=f"{namespace}/{name}", shard=shard or "-"))
