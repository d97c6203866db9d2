"""One compact row per Application, from its cached object (which holds no spec): what the fleet, the apps table
and the needs-attention list read. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from velashard.apis import labels

HEALTHY, UNHEALTHY, UNKNOWN = "healthy", "unhealthy", "unknown"
# Phases in which an app's workflow is done with it for now (KubeVela's): anything else has not converged.
SETTLED = ("running", "workflowSuspending", "workflowFailed", "workflowTerminated")


@dataclass(frozen=True, slots=True)
class AppRow:
    namespace: str
    name: str
    shard: str  # "" while unscheduled
    phase: str  # status.status; "" before the first status write
    health: str  # healthy | unhealthy | unknown
    created: str
    proven: bool  # carries the master's assignment proof (an app without a shard needs none)
    author: str
    refused: tuple[str, ...]  # types of the Authorized / Rendered conditions that are False
    since: str  # RFC 3339: since when it has not converged ("" when it has)
    message: str
    since_epoch: float = 0.0  # the same in seconds (0 when converged), parsed once, not on every page

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def health_of(status: dict[str, Any]) -> tuple[str, str]:
    """(health, the first unhealthy component's or trait's message) from status.services."""
    services = status.get("services") or []
    if not services:
        return (HEALTHY, "") if status.get("status") == "running" else (UNKNOWN, "")
    for service in services:
        if not service.get("healthy"):
            return UNHEALTHY, f'{service.get("name", "")}: {service.get("message", "")}'.strip(": ")
        for trait in service.get("traits") or []:
            if not trait.get("healthy", True):
                return UNHEALTHY, f'{service.get("name", "")}/{trait.get("type", "")}: {trait.get("message", "")}'
    return HEALTHY, ""


def row_of(app: dict[str, Any]) -> AppRow:
    meta = app.get("metadata") or {}
    status = app.get("status") or {}
    lbls, notes = meta.get("labels") or {}, meta.get("annotations") or {}
    shard = lbls.get(labels.SCHEDULED_SHARD_ID) or ""
    phase = status.get("status") or ""
    health, message = health_of(status)
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    refused = tuple(c.get("type", "") for c in conditions
                    if c.get("type") in ("Authorized", "Rendered") and c.get("status") == "False")
    for cond in conditions:
        if cond.get("status") == "False" and not message:
            message = f'{cond.get("type")}: {cond.get("message") or cond.get("reason") or ""}'
    since = ""
    if phase not in SETTLED or health == UNHEALTHY:
        stamps = [c.get("lastTransitionTime") or "" for c in conditions if c.get("status") == "False"]
        since = min([s for s in stamps if s] or [meta.get("creationTimestamp") or ""])
    author = notes.get(labels.APP_USERNAME) or notes.get(labels.APP_GROUP) or ""
    moment = parse_time(since)
    return AppRow(meta.get("namespace") or "", meta.get("name") or "", shard, phase, health,
                  meta.get("creationTimestamp") or "", not shard or bool(notes.get(labels.ASSIGNMENT_PROOF)), author,
                  refused, since, message[:300], moment.timestamp() if moment else 0.0)


def not_converged_for(row: AppRow, now: datetime) -> float:
    """Seconds the app has gone without converging (0 when it has)."""
    return max(0.0, now.timestamp() - row.since_epoch) if row.since_epoch else 0.0
