"""Kubernetes Events about an Application or a WorkflowRun (kube/events.py says when a failure to record one is
raised)."""

from __future__ import annotations

from typing import Any

from velashard.apis.oam import APPLICATIONS, WORKFLOW_RUNS
from velashard.kube.client import KubeClient
from velashard.kube.events import event_body as _event_body, record, timestamp
from velashard.kube.resources import EVENTS, Resource

__all__ = ["EVENTS", "event_body", "record_event", "timestamp"]


def _resource(obj: dict[str, Any]) -> Resource:
    """What the Event is about: a WorkflowRun when the object says so (a run from an informer may not: callers
    then pass one with its kind set), else an Application."""
    return WORKFLOW_RUNS if obj.get("kind") == WORKFLOW_RUNS.kind else APPLICATIONS


def event_body(app: dict[str, Any], etype: str, reason: str, message: str, now: str) -> dict[str, Any]:
    return _event_body(app, _resource(app), etype, reason, message, now)


def record_event(client: KubeClient, app: dict[str, Any], etype: str, reason: str, message: str,
                 must_record: bool = False) -> None:
    record(client, app, _resource(app), etype, reason, message, must_record=must_record)
