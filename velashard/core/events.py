"""Kubernetes Events about an Application (kube/events.py says when a failure to record one is raised)."""

from __future__ import annotations

from typing import Any

from velashard.apis.oam import APPLICATIONS
from velashard.kube.client import KubeClient
from velashard.kube.events import event_body as _event_body, record, timestamp
from velashard.kube.resources import EVENTS

__all__ = ["EVENTS", "event_body", "record_event", "timestamp"]


def event_body(app: dict[str, Any], etype: str, reason: str, message: str, now: str) -> dict[str, Any]:
    return _event_body(app, APPLICATIONS, etype, reason, message, now)


def record_event(client: KubeClient, app: dict[str, Any], etype: str, reason: str, message: str,
                 must_record: bool = False) -> None:
    record(client, app, APPLICATIONS, etype, reason, message, must_record=must_record)
