"""Pods on simulated nodes, KWOK-style: scheduling, a running status, and confirmed deletion.

Pure functions over plain dicts; `workloads.WorkloadSimulator` applies them.
"""

from __future__ import annotations

from typing import Any

SCHEDULE, RUN, REMOVE = "schedule", "run", "remove"


def pod_action(pod: dict[str, Any], simulated_nodes: frozenset[str]) -> str | None:
    """What the scheduler or a simulated kubelet would do next with `pod`, if anything."""
    meta, spec = pod["metadata"], pod.get("spec") or {}
    node = spec.get("nodeName")
    if meta.get("deletionTimestamp"):
        return REMOVE if node in simulated_nodes and not meta.get("finalizers") else None
    if not node:
        if spec.get("schedulerName", "default-scheduler") != "default-scheduler" or not simulated_nodes:
            return None
        scheduled = _condition(pod, "PodScheduled")
        return SCHEDULE if scheduled is None or scheduled.get("reason") != "Unschedulable" else None
    if node in simulated_nodes and (pod.get("status") or {}).get("phase") in (None, "Pending"):
        return RUN
    return None


def _condition(pod: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return cond
    return None


def choose_node(pod: dict[str, Any], nodes: list[dict[str, Any]], load: dict[str, int]) -> str | None:
    """The least loaded schedulable node whose labels match the pod's nodeSelector, or None."""
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    fitting = []
    for node in nodes:
        labels = node["metadata"].get("labels") or {}
        if (node.get("spec") or {}).get("unschedulable"):
            continue
        if all(labels.get(k) == v for k, v in selector.items()):
            fitting.append(node["metadata"]["name"])
    if not fitting:
        return None
    return min(fitting, key=lambda name: (load.get(name, 0), name))


def unschedulable_status(pod: dict[str, Any], node_count: int, now: str) -> dict[str, Any]:
    return dict(pod.get("status") or {}, phase="Pending", conditions=[{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": now,
        "message": f"0/{node_count} nodes are available: {node_count} node(s) didn't match Pod's node "
                   f"affinity/selector."}])


def running_status(pod: dict[str, Any], host_ip: str, pod_ip: str, now: str) -> dict[str, Any]:
    """The status a kubelet reports once every container started and is ready."""
    spec = pod.get("spec") or {}
    conditions = [{"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
                  for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                               "PodScheduled")]
    containers = []
    for index, container in enumerate(spec.get("containers") or []):
        image = container.get("image", "")
        containers.append({
            "name": container.get("name", f"c{index}"), "image": image, "imageID": f"simulated://{image}",
            "containerID": f"simulated://{pod['metadata'].get('uid', '')}-{index}", "ready": True, "started": True,
            "restartCount": 0, "state": {"running": {"startedAt": now}}})
    status = dict(pod.get("status") or {})
    status.update({"phase": "Running", "conditions": conditions, "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
                   "podIP": pod_ip, "podIPs": [{"ip": pod_ip}], "startTime": status.get("startTime", now),
                   "containerStatuses": containers, "qosClass": status.get("qosClass", "BestEffort")})
    return status
