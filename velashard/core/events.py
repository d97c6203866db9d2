"""Kubernetes Events about an Application, recorded best-effort (a failure to record one is only logged)."""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

from velashard.apis.oam import API_VERSION
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.resources import Resource
from velashard.observability import fields

log = logging.getLogger("velashard.core.events")

EVENTS = Resource("", "v1", "events", "Event")


def timestamp(now: datetime | None = None) -> str:
    return (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_body(app: dict[str, Any], etype: str, reason: str, message: str, now: str) -> dict[str, Any]:
    meta = app["metadata"]
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f'{meta["name"]}.', "namespace": meta["namespace"]},
            "involvedObject": {"apiVersion": API_VERSION, "kind": "Application", "name": meta["name"],
                               "namespace": meta["namespace"], "uid": meta["uid"]},
            "type": etype, "reason": reason, "message": message[:1000],
            "source": {"component": "velashard"}, "firstTimestamp": now, "lastTimestamp": now, "count": 1}


def may_pass(err: errors.KubeError) -> bool:
    """A failure that trying again may not meet: fenced (nothing was sent), no answer, the server busy or failing.
    A refusal (403, 422, ...) would be refused again."""
    return isinstance(err, (errors.Fenced, errors.TransportError, errors.ServerError, errors.TooManyRequests))


def record_event(client: KubeClient, app: dict[str, Any], etype: str, reason: str, message: str,
                 must_record: bool = False) -> None:
    """Record an Event about `app`. With `must_record` (the Event is the only trace of what the caller is about to
    do, and nothing would record it again once done), a failure that may pass is raised, so that the caller's
    reconcile fails before acting and is tried again; otherwise, and for refusals, a failure is only logged."""
    try:
        client.create(EVENTS, event_body(app, etype, reason, message, timestamp()))
    except errors.KubeError as err:
        if must_record and may_pass(err):
            raise
        log.warning("could not record event", extra=fields(reason=reason, error=str(err)))
