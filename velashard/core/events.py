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


def record_event(client: KubeClient, app: dict[str, Any], etype: str, reason: str, message: str) -> None:
    try:
        client.create(EVENTS, event_body(app, etype, reason, message, timestamp()))
    except errors.KubeError as err:
        log.warning("could not record event", extra=fields(reason=reason, error=str(err)))
