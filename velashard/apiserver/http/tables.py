"""Server-side printing: meta.k8s.io Table responses, as kubectl get asks for them."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Any, Callable

from velashard.apiserver.storage import conversion
from velashard.apiserver.storage.resources import ResourceType

_FILTER = re.compile(r"^\?\(@\.([\w.-]+)\s*==\s*['\"]?([^'\"]*)['\"]?\)$")


def human_age(timestamp: str | None, now: datetime | None = None) -> str:
    """kubectl's short duration: 45s, 12m, 3h, 5d."""
    if not timestamp:
        return "<unknown>"
    try:
        then = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return "<invalid>"
    seconds = int(((now or datetime.now(timezone.utc)) - then).total_seconds())
    if seconds < 0:
        return "0s"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * (2 if unit != "d" else 1):
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def jsonpath(obj: Any, path: str) -> Any:
    """The subset of JSONPath CRD printer columns use: .a.b, [N], [*] and [?(@.k=="v")]; first match."""
    tokens = re.findall(r"\.((?:\\\.|[^.\[])+)|\[([^\]]+)\]", path.strip().lstrip("$"))
    values = [obj]
    for name, index in tokens:
        name = name.replace("\\.", ".")  # `\.` escapes a dot inside a key, e.g. an annotation name
        nxt: list[Any] = []
        for value in values:
            if name:
                if isinstance(value, dict) and name in value:
                    nxt.append(value[name])
            elif isinstance(value, list):
                if index == "*":
                    nxt.extend(value)
                elif index.lstrip("-").isdigit():
                    i = int(index)
                    if -len(value) <= i < len(value):
                        nxt.append(value[i])
                else:
                    m = _FILTER.match(index)
                    if m:
                        nxt.extend(v for v in value if isinstance(v, dict) and str(jsonpath(v, "." + m.group(1)))
                                   == m.group(2))
        values = nxt
    return values[0] if values else None


def _cell(value: Any, column_type: str) -> Any:
    if value is None:
        return "<none>" if column_type == "string" else None
    if column_type == "date":
        return human_age(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return value


def _ready(obj: dict[str, Any]) -> str:
    status = obj.get("status") or {}
    return f'{status.get("readyReplicas", 0)}/{(obj.get("spec") or {}).get("replicas", 0)}'


def _ports(obj: dict[str, Any]) -> str:
    ports = (obj.get("spec") or {}).get("ports") or []
    return ",".join(f'{p.get("port")}/{p.get("protocol", "TCP")}' for p in ports) or "<none>"


def _container_statuses(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return (obj.get("status") or {}).get("containerStatuses") or []


def _pod_ready(obj: dict[str, Any]) -> str:
    ready = sum(1 for c in _container_statuses(obj) if c.get("ready"))
    return f'{ready}/{len((obj.get("spec") or {}).get("containers") or [])}'


def _pod_status(obj: dict[str, Any]) -> str:
    if obj["metadata"].get("deletionTimestamp"):
        return "Terminating"
    return (obj.get("status") or {}).get("phase", "")


def _node_status(obj: dict[str, Any]) -> str:
    ready = [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
    text = "Ready" if ready and ready[0].get("status") == "True" else "NotReady"
    return text + (",SchedulingDisabled" if (obj.get("spec") or {}).get("unschedulable") else "")


def _node_roles(obj: dict[str, Any]) -> str:
    prefix = "node-role.kubernetes.io/"
    roles = sorted(k[len(prefix):] for k in obj["metadata"].get("labels") or {} if k.startswith(prefix))
    return ",".join(roles) or "<none>"


def _hpa_target(spec: dict[str, Any], status: Any) -> str:
    """One metric as kubectl prints it: current/target, `<unknown>` before the controller measured it."""
    kind = spec.get("type")
    key = {"Resource": "resource", "ContainerResource": "containerResource", "Pods": "pods", "Object": "object",
           "External": "external"}.get(kind or "")
    source = spec.get(key) if key else None
    if not isinstance(source, dict):
        return "<unknown type>"
    target = source.get("target") or {}
    current = ((status or {}).get(key) or {}).get("current") or {} if isinstance(status, dict) else {}
    if key in ("resource", "containerResource"):
        if target.get("averageValue") is not None:
            return f'{source.get("name", "")}: {current.get("averageValue", "<unknown>")}/{target["averageValue"]}'
        now = f'{current["averageUtilization"]}%' if current.get("averageUtilization") is not None else "<unknown>"
        goal = f'{target["averageUtilization"]}%' if target.get("averageUtilization") is not None else "<auto>"
        return f'{source.get("name", "")}: {now}/{goal}'
    if key == "pods" or target.get("averageValue") is not None:
        suffix = "" if key == "pods" else " (avg)"
        return f'{current.get("averageValue", "<unknown>")}/{target.get("averageValue")}{suffix}'
    return f'{current.get("value", "<unknown>")}/{target.get("value")}'


def _hpa_targets(obj: dict[str, Any]) -> str:
    specs = [m for m in (obj.get("spec") or {}).get("metrics") or [] if isinstance(m, dict)]
    if not specs:
        return "<none>"
    statuses = (obj.get("status") or {}).get("currentMetrics") or []
    shown = [_hpa_target(m, statuses[i] if i < len(statuses) else None) for i, m in enumerate(specs)]
    text = ", ".join(shown[:2])
    return text + (f" + {len(shown) - 2} more..." if len(shown) > 2 else "")


def _hpa_reference(obj: dict[str, Any]) -> str:
    ref = (obj.get("spec") or {}).get("scaleTargetRef") or {}
    return f'{ref.get("kind", "")}/{ref.get("name", "")}'


_REPLICA_COLUMNS: list[tuple[Any, ...]] = [
    ("Desired", "integer", lambda o: (o.get("spec") or {}).get("replicas", 0)),
    ("Current", "integer", lambda o: (o.get("status") or {}).get("replicas", 0)),
    ("Ready", "integer", lambda o: (o.get("status") or {}).get("readyReplicas", 0))]


# Extra columns for the built-in kinds users look at most: (name, type, getter).
# (name, type, getter[, priority]): priority 1 columns show only with -o wide.
_BUILTIN_COLUMNS: dict[str, list[tuple[Any, ...]]] = {
    "Pod": [("Ready", "string", _pod_ready), ("Status", "string", _pod_status),
            ("Restarts", "integer", lambda o: sum(c.get("restartCount", 0) for c in _container_statuses(o))),
            ("IP", "string", lambda o: (o.get("status") or {}).get("podIP") or "<none>", 1),
            ("Node", "string", lambda o: (o.get("spec") or {}).get("nodeName") or "<none>", 1)],
    "Deployment": [("Ready", "string", _ready),
                   ("Up-to-date", "integer", lambda o: (o.get("status") or {}).get("updatedReplicas", 0)),
                   ("Available", "integer", lambda o: (o.get("status") or {}).get("availableReplicas", 0))],
    "StatefulSet": [("Ready", "string", _ready)],
    "ReplicaSet": _REPLICA_COLUMNS,
    "ReplicationController": _REPLICA_COLUMNS,
    "Node": [("Status", "string", _node_status), ("Roles", "string", _node_roles),
             ("Version", "string", lambda o: ((o.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion",
                                                                                                  ""))],
    "Namespace": [("Status", "string", lambda o: (o.get("status") or {}).get("phase", ""))],
    "Service": [("Type", "string", lambda o: (o.get("spec") or {}).get("type", "")),
                ("Cluster-IP", "string", lambda o: (o.get("spec") or {}).get("clusterIP") or "<none>"),
                ("Ports", "string", _ports)],
    "Lease": [("Holder", "string", lambda o: (o.get("spec") or {}).get("holderIdentity") or "")],
    # Read from the autoscaling/v2 form, whatever version was asked for.
    "HorizontalPodAutoscaler": [
        ("Reference", "string", _hpa_reference), ("Targets", "string", _hpa_targets),
        ("MinPods", "string", lambda o: str((o.get("spec") or {}).get("minReplicas", "<unset>"))),
        ("MaxPods", "integer", lambda o: (o.get("spec") or {}).get("maxReplicas", 0)),
        ("Replicas", "integer", lambda o: (o.get("status") or {}).get("currentReplicas", 0))],
    "Job": [("Completions", "string", lambda o: f'{(o.get("status") or {}).get("succeeded", 0)}/'
                                                f'{(o.get("spec") or {}).get("completions", 1)}')],
}


def to_table(rt: ResourceType, objects: list[dict[str, Any]], list_meta: dict[str, Any], include: str,
             api_version: str) -> dict[str, Any]:
    columns: list[dict[str, Any]] = [{"name": "Name", "type": "string", "format": "name", "priority": 0,
                                      "description": "Name must be unique within a namespace."}]
    getters: list[Callable[[dict[str, Any]], Any]] = [lambda o: o["metadata"]["name"]]
    if rt.printer_columns:
        for col in rt.printer_columns:
            columns.append({"name": col.get("name", ""), "type": col.get("type", "string"),
                            "format": col.get("format", ""), "description": col.get("description", ""),
                            "priority": col.get("priority", 0)})
            getters.append(lambda o, c=col: _cell(jsonpath(o, c.get("jsonPath", "")), c.get("type", "string")))
    else:
        for name, ctype, getter, *priority in _BUILTIN_COLUMNS.get(rt.kind, []):
            columns.append({"name": name, "type": ctype, "format": "", "description": "",
                            "priority": priority[0] if priority else 0})
            getters.append(getter)
        columns.append({"name": "Age", "type": "string", "format": "", "priority": 0,
                        "description": "CreationTimestamp is a timestamp representing the server time when this "
                                       "object was created."})
        getters.append(lambda o: human_age(o["metadata"].get("creationTimestamp")))
    rows = []
    for obj in objects:
        view = conversion.to_storage(rt, obj) if rt.storage_version else obj
        row: dict[str, Any] = {"cells": [g(view) for g in getters]}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": obj["metadata"]}
        rows.append(row)
    return {"kind": "Table", "apiVersion": api_version, "metadata": list_meta, "columnDefinitions": columns,
            "rows": rows}
