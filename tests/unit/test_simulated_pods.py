"""KWOK-style decisions for pods on simulated nodes, and simulated statuses."""

from __future__ import annotations

from velashard.apiserver.simulation import pods
from velashard.apiserver.simulation.nodes import node_object
from velashard.apiserver.simulation.workloads import simulated_status

NODES = frozenset({"node-0", "node-1"})


def pod(node: str = "", deleting: bool = False, finalizers: list | None = None, phase: str = "Pending",
        selector: dict | None = None) -> dict:
    meta = {"name": "p", "namespace": "d", "uid": "u"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if finalizers:
        meta["finalizers"] = finalizers
    spec = {"containers": [{"name": "c", "image": "nginx"}]}
    if node:
        spec["nodeName"] = node
    if selector:
        spec["nodeSelector"] = selector
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def test_pod_actions():
    assert pods.pod_action(pod(), NODES) == pods.SCHEDULE
    assert pods.pod_action(pod(), frozenset()) is None
    assert pods.pod_action(pod("node-1"), NODES) == pods.RUN
    assert pods.pod_action(pod("node-1", phase="Running"), NODES) is None
    assert pods.pod_action(pod("local"), NODES) is None  # another kubelet's node
    assert pods.pod_action(pod("node-0", deleting=True), NODES) == pods.REMOVE
    assert pods.pod_action(pod("node-0", deleting=True, finalizers=["x"]), NODES) is None


def test_choose_node_balances_and_honours_node_selector():
    nodes = [node_object(0, "t"), node_object(1, "t")]
    assert pods.choose_node(pod(), nodes, {"node-0": 3, "node-1": 1}) == "node-1"
    assert pods.choose_node(pod(selector={"kubernetes.io/hostname": "node-0"}), nodes, {"node-0": 9}) == "node-0"
    assert pods.choose_node(pod(selector={"disk": "ssd"}), nodes, {}) is None


def test_running_status_has_ip_ready_and_container_statuses():
    status = pods.running_status(pod("node-0"), "172.18.0.10", "10.244.0.5", "t")
    assert status["phase"] == "Running" and status["podIP"] == "10.244.0.5"
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"
    assert status["containerStatuses"][0]["ready"] and "running" in status["containerStatuses"][0]["state"]


def test_replicaset_and_scaled_to_zero_statefulset_keep_required_replicas():
    rs = {"metadata": {"name": "r", "generation": 2}, "spec": {"replicas": 0}, "status": {}}
    assert simulated_status("ReplicaSet", rs, "t")["replicas"] == 0
    assert simulated_status("StatefulSet", rs, "t")["replicas"] == 0
    ds = simulated_status("DaemonSet", rs, "t", nodes=3)
    assert ds["desiredNumberScheduled"] == ds["numberReady"] == 3 and ds["numberMisscheduled"] == 0


def _deployment(image: str = "nginx:1", replicas: int = 2) -> dict:
    return {"metadata": {"name": "web", "namespace": "d", "uid": "u1", "annotations": {"note": "x"}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}, "template": {
                "metadata": {"labels": {"app": "web"}, "creationTimestamp": None},
                "spec": {"containers": [{"name": "c", "image": image}]}}}}


def test_deployment_plan_creates_then_reuses_replicasets_by_template():
    from velashard.apiserver.controllers import deployments
    first = deployments.plan(_deployment(), [])
    assert len(first.create) == 1 and first.deployment_revision == "1"
    rs1 = first.create[0]
    assert rs1["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    assert rs1["metadata"]["annotations"]["note"] == "x"
    assert rs1["metadata"]["annotations"]["deployment.kubernetes.io/max-replicas"] == "3"  # 25% surge of 2, ceil
    assert deployments.plan(_deployment(), [rs1]).create == []
    second = deployments.plan(_deployment("nginx:2"), [rs1])
    rs2 = second.create[0]
    assert rs2["metadata"]["name"] != rs1["metadata"]["name"] and second.deployment_revision == "2"
    assert second.update[0]["spec"]["replicas"] == 0  # the old revision is scaled down
    back = deployments.plan(_deployment(), [dict(rs1, spec=dict(rs1["spec"], replicas=0)), rs2])
    assert back.create == [] and back.deployment_revision == "3"
    assert back.update[0]["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"] == "1"


def test_paused_deployment_rolls_nothing_out():
    from velashard.apiserver.controllers import deployments
    rs1 = deployments.plan(_deployment(), []).create[0]
    paused = _deployment("nginx:2")
    paused["spec"]["paused"] = True
    todo = deployments.plan(paused, [rs1])
    assert todo.create == [] and todo.update == [] and todo.deployment_revision == "1"
