"""Kubernetes Events about an object, recorded best-effort (a failure to record one is only logged) unless the
caller must not lose it.

`annotations` carry what a reader needs as data (the dashboard reads a move's shards and reason from them);
the message says the same in words for `kubectl describe`.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.resources import EVENTS, Resource
from velashard.observability import fields

log = logging.getLogger("velashard.kube.events")


def timestamp(now: datetime | None = None) -> str:
    return (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_body(obj: dict[str, Any], res: Resource, etype: str, reason: str, message: str, now: str,
               component: str = "velashard", annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta = obj["metadata"]
    metadata: dict[str, Any] = {"generateName": f'{meta["name"]}.', "namespace": meta.get("namespace") or "default"}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Event", "metadata": metadata,
            "involvedObject": {"apiVersion": res.api_version, "kind": res.kind, "name": meta["name"],
                               "namespace": meta.get("namespace", ""), "uid": meta.get("uid", "")},
            "type": etype, "reason": reason, "message": message[:1000],
            "source": {"component": component}, "firstTimestamp": now, "lastTimestamp": now, "count": 1}


def may_pass(err: errors.KubeError) -> bool:
    """A failure that trying again may not meet: fenced (nothing was sent), no answer, the server busy or failing.
    A refusal (403, 422, ...) would be refused again."""
    return isinstance(err, (errors.Fenced, errors.TransportError, errors.ServerError, errors.TooManyRequests))


def record(client: KubeClient, obj: dict[str, Any], res: Resource, etype: str, reason: str, message: str,
           component: str = "velashard", annotations: dict[str, str] | None = None, must_record: bool = False) -> None:
    """Record an Event about `obj`. With `must_record` (the Event is the only trace of what the caller is about to
    do, and nothing would record it again once done), a failure that may pass is raised, so that the caller's
    reconcile fails before acting and is tried again; otherwise, and for refusals, a failure is only logged."""
    try:
        client.create(EVENTS, event_body(obj, res, etype, reason, message, timestamp(), component, annotations))
    except errors.KubeError as err:
        if must_record and may_pass(err):
            raise
        log.warning("could not record event", extra=fields(reason=reason, error=str(err)))
