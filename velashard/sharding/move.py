"""Setting an application's shard: its revisions and trackers first, then the app itself.

The order is the invariant KubeVela issue 6433 breaks: the new shard only sees the app once its
label changes, and by then everything the app's reconcile reads already carries the new id.
"""

from __future__ import annotations

import logging
from typing import Any

from velashard.apis import labels
from velashard.apis.oam import APPLICATION_REVISIONS, APPLICATIONS, RESOURCE_TRACKERS
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.observability import fields

log = logging.getLogger("velashard.sharding.move")


def _label_patch(shard: str | None) -> dict[str, Any]:
    return {"metadata": {"labels": {labels.SCHEDULED_SHARD_ID: shard}}}


def dependents(client: KubeClient, namespace: str, name: str) -> list[tuple[Any, dict[str, Any]]]:
    """The app's ApplicationRevisions and ResourceTrackers, found by label (never by listing everything)."""
    selector = f"{labels.APP_NAME}={name},{labels.APP_NAMESPACE}={namespace}"
    revisions, _ = client.list_all(APPLICATION_REVISIONS, namespace, label_selector=f"{labels.APP_NAME}={name}")
    trackers, _ = client.list_all(RESOURCE_TRACKERS, label_selector=selector)
    return [(APPLICATION_REVISIONS, r) for r in revisions] + [(RESOURCE_TRACKERS, t) for t in trackers]


def set_shard(client: KubeClient, app: dict[str, Any], shard: str, reason: str) -> dict[str, Any]:
    """Label the app's dependents, then the app (guarded by its resourceVersion); returns the updated app."""
    meta = app["metadata"]
    for res, obj in dependents(client, meta["namespace"], meta["name"]):
        if (obj["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID) != shard:
            try:
                client.patch(res, obj["metadata"]["name"], _label_patch(shard), obj["metadata"].get("namespace"))
            except errors.NotFound:
                pass
    patch = _label_patch(shard)
    patch["metadata"]["resourceVersion"] = meta["resourceVersion"]
    patch["metadata"]["labels"][labels.DRAIN] = None
    try:
        updated = client.patch(APPLICATIONS, meta["name"], patch, meta["namespace"])
    except errors.KubeError:
        _roll_back(client, meta["namespace"], meta["name"])
        raise
    log.info("application scheduled", extra=fields(key=f'{meta["namespace"]}/{meta["name"]}', shard=shard,
                                                    previous=(meta.get("labels") or {}).get(labels.SCHEDULED_SHARD_ID,
                                                                                            "-"), reason=reason))
    return updated


def _roll_back(client: KubeClient, namespace: str, name: str) -> None:
    """The app kept its shard (conflict, denial, outage): give its dependents the app's label back, or its
    shard would find them gone from its cache and let the app go with nobody reconciling it."""
    try:
        app = client.get(APPLICATIONS, name, namespace)
    except errors.KubeError as err:
        log.error("cannot roll back a failed move", extra=fields(key=f"{namespace}/{name}", error=str(err)))
        return
    shard = (app["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID)
    for res, obj in dependents(client, namespace, name):
        if (obj["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID) != shard:
            try:
                client.patch(res, obj["metadata"]["name"], _label_patch(shard), obj["metadata"].get("namespace"))
            except errors.KubeError as err:
                log.error("cannot roll back a dependent", extra=fields(key=f"{namespace}/{name}", error=str(err)))
    log.warning("move failed; dependents returned to the app's shard", extra=fields(
        key=f"{namespace}/{name}", shard=shard or "-"))
