"""An app's page: components, the workflow's steps as a timeline, conditions, the resource tree from its
ResourceTracker with each object's health, its Events, author, revisions and the shards it has been on. Pure:
the caller reads the objects (with the user's credentials) and hands them in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from velashard.apis import labels
from velashard.core.health import resource_health
from velashard.dashboard.moves import Move, history
from velashard.dashboard.rows import AppRow, parse_time, row_of

Obj = dict[str, Any]


@dataclass
class Step:
    name: str
    type: str
    phase: str
    started: str
    duration: str
    message: str
    depth: int = 0  # 1 for a step group's sub-steps


@dataclass
class Resource:
    kind: str
    namespace: str
    name: str
    component: str
    health: str  # healthy | unhealthy | unknown (not readable)
    message: str


@dataclass
class AppView:
    row: AppRow
    author: str
    groups: str
    components: list[dict[str, Any]]
    steps: list[Step]
    workflow: dict[str, Any]
    conditions: list[dict[str, Any]]
    resources: list[Resource]
    resource_note: str  # why the tree is incomplete, if it is
    events: list[dict[str, str]]
    revisions: list[dict[str, str]]
    shards: list[tuple[str, str]]
    actions: list[str] = field(default_factory=list)  # what the workflow's state allows


def _duration(start: str | None, end: str | None) -> str:
    first, last = parse_time(start), parse_time(end)
    if not first or not last:
        return ""
    seconds = int((last - first).total_seconds())
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def steps_of(workflow: dict[str, Any]) -> list[Step]:
    out = []
    for step in workflow.get("steps") or []:
        out.append(Step(step.get("name", ""), step.get("type", ""), step.get("phase", ""),
                        step.get("firstExecuteTime", ""),
                        _duration(step.get("firstExecuteTime"), step.get("lastExecuteTime")),
                        step.get("message") or step.get("reason") or ""))
        for sub in step.get("subSteps") or []:
            out.append(Step(sub.get("name", ""), sub.get("type", ""), sub.get("phase", ""),
                            sub.get("firstExecuteTime", ""),
                            _duration(sub.get("firstExecuteTime"), sub.get("lastExecuteTime")),
                            sub.get("message") or sub.get("reason") or "", 1))
    return out


def resources_of(tracker: Obj | None, live: dict[tuple[str, str, str], Obj | str | None]) -> list[Resource]:
    """Each object the tracker records (deleted ones left out) with its health. `live`: (kind, namespace, name) ->
    the object, None when it is gone, or why it could not be read."""
    out = []
    for ref in (tracker or {}).get("spec", {}).get("managedResources") or []:
        if ref.get("deleted"):
            continue
        key = (ref.get("kind", ""), ref.get("namespace", ""), ref.get("name", ""))
        obj = live.get(key)
        if isinstance(obj, str):
            health, message = "unknown", obj
        else:
            ok, message = resource_health(obj)
            health = "healthy" if ok else "unhealthy"
        out.append(Resource(key[0], key[1] or "-", key[2], ref.get("component", ""), health, message))
    return sorted(out, key=lambda r: (r.namespace, r.kind, r.name))


def actions_of(workflow: dict[str, Any], shard: str) -> list[str]:
    acts = []
    if workflow.get("suspend") and not workflow.get("terminated"):
        acts.append("resume")
    if workflow and not workflow.get("terminated") and not workflow.get("finished"):
        acts.append("terminate")
    if workflow:
        acts.append("restart")
    acts.append("reschedule")
    return acts


def app_view(app: Obj, tracker: Obj | None, live: dict[tuple[str, str, str], Obj | str | None], resource_note: str,
             events: list[Obj], revisions: list[Obj], moves: list[Move]) -> AppView:
    status = app.get("status") or {}
    notes = (app.get("metadata") or {}).get("annotations") or {}
    row = row_of(app)
    workflow = status.get("workflow") or {}
    shown_events = [{"at": e.get("lastTimestamp") or e.get("eventTime") or "", "type": e.get("type", ""),
                     "reason": e.get("reason", ""), "message": e.get("message", ""),
                     "count": str(e.get("count") or 1)} for e in events]
    shown_events.sort(key=lambda e: e["at"], reverse=True)
    revs = sorted(({"name": r["metadata"]["name"], "created": r["metadata"].get("creationTimestamp", ""),
                    "revision": str((r.get("metadata") or {}).get("labels", {}).get(labels.APP_REVISION, "")
                                    or r["metadata"]["name"].rsplit("-v", 1)[-1])} for r in revisions),
                  key=lambda r: r["created"], reverse=True)
    return AppView(row, notes.get(labels.APP_USERNAME, ""), notes.get(labels.APP_GROUP, ""),
                   status.get("services") or [], steps_of(workflow), workflow, status.get("conditions") or [],
                   resources_of(tracker, live), resource_note, shown_events, revs,
                   history(moves, row.key, row.shard), actions_of(workflow, row.shard))
