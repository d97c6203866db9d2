"""Simulated nodes, KWOK-style: Node objects a kubelet would register, and their heartbeat Leases.

The objects are pure functions of the node's index and the time; `NodeHeartbeat` writes them.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from velashard.apiserver import errors
from velashard.apiserver.registry.rest import Request, RestAPI
from velashard.apiserver.storage.resources import Registry
from velashard.apiserver.storage.store import now_rfc3339

log = logging.getLogger("velashard.apiserver.simulation.nodes")

NODE_LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40  # the kubelet's default nodeLeaseDurationSeconds
RENEW_INTERVAL = 10.0  # the kubelet renews at a quarter of the lease duration
CAPACITY = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
# Marks nodes this server simulates (as KWOK's own annotation marks its nodes).
SIMULATED_ANNOTATION = "devcluster.velashard.io/simulated-node"


def node_name(index: int) -> str:
    return f"node-{index}"


def node_ip(index: int) -> str:
    return f"172.18.0.{10 + index}"


def pod_cidr(index: int) -> str:
    return f"10.244.{index}.0/24"


def node_object(index: int, now: str) -> dict[str, Any]:
    """The Node a kubelet would register: capacity, allocatable, healthy conditions, addresses, node info."""
    name = node_name(index)
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64", "type": "simulated"}
    conditions = [
        _condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available",
                   now),
        _condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", now),
        _condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available", now),
        _condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", now)]
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {SIMULATED_ANNOTATION: "true",
                                                                      "node.alpha.kubernetes.io/ttl": "0"}},
        "spec": {"podCIDR": pod_cidr(index), "podCIDRs": [pod_cidr(index)]},
        "status": {
            "capacity": dict(CAPACITY), "allocatable": dict(CAPACITY), "phase": "Running",
            "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": node_ip(index)}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": f"velashard-{index}", "systemUUID": f"velashard-{index}",
                         "bootID": f"velashard-{index}", "kernelVersion": "simulated", "osImage": "simulated",
                         "containerRuntimeVersion": "simulated://0", "kubeletVersion": "v1.32.0",
                         "kubeProxyVersion": "v1.32.0", "operatingSystem": "linux", "architecture": "amd64"},
        },
    }


def _condition(kind: str, status: str, reason: str, message: str, now: str) -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastHeartbeatTime": now,
            "lastTransitionTime": now}


def lease_object(node: dict[str, Any], now_micro: str) -> dict[str, Any]:
    """The node's heartbeat Lease in kube-node-lease, owned by the Node as the kubelet makes it."""
    meta = node["metadata"]
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": meta["name"], "namespace": NODE_LEASE_NAMESPACE,
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": meta["name"],
                                              "uid": meta["uid"]}]},
            "spec": {"holderIdentity": meta["name"], "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                     "renewTime": now_micro}}


def micro_time(now: str) -> str:
    """A MicroTime (RFC 3339 with microseconds) from a Time string."""
    return now.replace("Z", ".000000Z")


class NodeHeartbeat:
    """Registers the simulated nodes and renews their Leases as their kubelets would."""

    def __init__(self, api: RestAPI, types: Registry, count: int, interval: float = RENEW_INTERVAL):
        self._api = api
        self._nodes = types.lookup("", "v1", "nodes")
        self._leases = types.lookup("coordination.k8s.io", "v1", "leases")
        self.count = count
        self._interval = interval
        self._stop = threading.Event()
        self._req = Request(user={"username": "system:node:simulated", "uid": "", "groups": ["system:nodes"]})
        self._thread = threading.Thread(target=self._run, name="apiserver-nodes", daemon=True)

    def names(self) -> list[str]:
        return [node_name(i) for i in range(self.count)]

    def register(self) -> None:
        assert self._nodes is not None
        for index in range(self.count):
            try:
                self._api.create(self._nodes, "", node_object(index, now_rfc3339()), self._req)
            except errors.APIError as err:
                if err.code != 409:
                    raise
        self.renew()

    def start(self) -> None:
        if self.count:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.renew()
            except errors.APIError as err:
                log.warning("node heartbeat failed err=%s", err.message)

    def renew(self) -> None:
        """Create or renew each node's Lease (a deleted Node is not re-registered, as with a stopped kubelet)."""
        assert self._nodes is not None and self._leases is not None
        for name in self.names():
            node = self._api.store.get(self._nodes.group_resource, ("", name))
            if node is None:
                continue
            lease = lease_object(node, micro_time(now_rfc3339()))
            current = self._api.store.get(self._leases.group_resource, (NODE_LEASE_NAMESPACE, name))
            if current is None:
                self._api.create(self._leases, NODE_LEASE_NAMESPACE, lease, self._req)
            else:
                self._api.patch(self._leases, NODE_LEASE_NAMESPACE, name, "application/merge-patch+json",
                                {"spec": lease["spec"]}, self._req)
