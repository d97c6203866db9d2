"""Simulated workload status, the audit log and leases (the client's leader-election LeaseLock)."""

from __future__ import annotations

import threading
import time

from kubernetes import client, config
from kubernetes.leaderelection.leaderelectionrecord import LeaderElectionRecord
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from velashard.apiserver.simulation import workloads
from tests.integration.helpers import deployment, eventually, raw_request


def test_simulated_deployment_and_job_status(api_client, namespace):
    apps, batch = client.AppsV1Api(api_client), client.BatchV1Api(api_client)
    apps.create_namespaced_deployment(namespace, deployment("web", replicas=3))

    def available():
        d = apps.read_namespaced_deployment("web", namespace)
        ok = (d.status.observed_generation == d.metadata.generation and d.status.available_replicas == 3
              and d.status.ready_replicas == 3 and d.status.updated_replicas == 3)
        return d if ok else None

    dep = eventually(available)
    assert {c.type: c.status for c in dep.status.conditions}["Available"] == "True"
    apps.patch_namespaced_deployment("web", namespace, {"spec": {"replicas": 1}})
    eventually(lambda: apps.read_namespaced_deployment("web", namespace).status.available_replicas == 1)

    job = client.V1Job(metadata=client.V1ObjectMeta(name="once"), spec=client.V1JobSpec(
        template=client.V1PodTemplateSpec(spec=client.V1PodSpec(
            restart_policy="Never", containers=[client.V1Container(name="c", image="busybox")]))))
    made = batch.create_namespaced_job(namespace, job)
    assert made.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": made.metadata.uid}
    done = eventually(lambda: (lambda j: j if j.status.succeeded == 1 else None)(
        batch.read_namespaced_job("once", namespace)))
    assert {c.type: c.status for c in done.status.conditions}["Complete"] == "True"


def test_audit_records_every_request(api_client, apiserver, namespace):
    since = apiserver.audit.since(0)["lastSeq"]
    api_client.set_default_header("User-Agent", "velashard/0.1.0 (shard=test)")
    try:
        client.CoreV1Api(api_client).create_namespaced_config_map(
            namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="audited")))
    finally:
        api_client.set_default_header("User-Agent", "OpenAPI-Generator/python")
    code, log = raw_request(api_client, "GET", f"/debug/audit?since={since}")
    assert code == 200
    record = next(r for r in log["items"] if r["verb"] == "create" and r["name"] == "audited")
    assert record["resource"] == "configmaps" and record["namespace"] == namespace and record["code"] == 201
    assert record["userAgent"] == "velashard/0.1.0 (shard=test)" and record["seq"] > since
    assert record["durationMs"] >= 0 and record["time"] > 0
    assert log["lastSeq"] >= record["seq"]


def test_lease_lock_from_the_client(api_client, namespace):
    coordination = client.CoordinationV1Api(api_client)
    lock = LeaseLock("leader", namespace, "me")
    lock.api_instance = coordination  # the lock builds a default client; point it at this server
    found, _ = lock.get("leader", namespace)
    assert not found
    record = LeaderElectionRecord("me", "15", "2026-01-01 00:00:00.000001", "2026-01-01 00:00:00.000001")
    assert lock.create("leader", namespace, record)
    found, lease = lock.get("leader", namespace)
    assert found and lease.holder_identity == "me"
    record.renew_time = "2026-01-01 00:00:05.000001"
    assert lock.update("leader", namespace, record)
    assert coordination.read_namespaced_lease("leader", namespace).spec.holder_identity == "me"


def test_simulator_runs_once_per_change_it_has_to_answer(api_client, apiserver, namespace, monkeypatch):
    """The simulator's own writes (a Deployment's revision annotation and status, a ReplicaSet's status) and a
    burst of events for one object wake no extra run: under load those runs were most of its work."""
    runs: list[tuple[str, str]] = []
    simulator = apiserver.simulator
    converge = simulator._converge

    def counted(gr: tuple[str, str], ns: str, name: str) -> None:
        if ns == namespace:
            runs.append((gr[1], name))
        converge(gr, ns, name)

    monkeypatch.setattr(simulator, "_converge", counted)
    monkeypatch.setattr(simulator, "_delay", 0.5)  # the burst below comes well within it
    apps = client.AppsV1Api(api_client)
    apps.create_namespaced_deployment(namespace, deployment("once", replicas=2))
    apps.patch_namespaced_deployment("once", namespace, {"metadata": {"labels": {"burst": "1"}}})
    apps.patch_namespaced_deployment("once", namespace, {"metadata": {"labels": {"burst": "2"}}})
    ready = eventually(lambda: (lambda d: d if d.status.ready_replicas == 2 else None)(
        apps.read_namespaced_deployment("once", namespace)))
    replicasets = eventually(lambda: (lambda rs: rs if len(rs) == 1 and rs[0].status.ready_replicas == 2 else None)(
        apps.list_namespaced_replica_set(namespace).items))
    time.sleep(1.0)  # what the last writes' events would have woken has run
    assert sorted(runs) == [("deployments", "once"), ("replicasets", replicasets[0].metadata.name)]
    assert apps.read_namespaced_deployment("once", namespace).metadata.resource_version == \
        ready.metadata.resource_version

    runs.clear()
    apps.patch_namespaced_deployment("once", namespace, {"spec": {"replicas": 3}})
    eventually(lambda: apps.read_namespaced_deployment("once", namespace).status.ready_replicas == 3)
    eventually(lambda: apps.read_namespaced_replica_set(replicasets[0].metadata.name, namespace)
               .status.ready_replicas == 3)
    time.sleep(1.0)
    assert sorted(runs) == [("deployments", "once"), ("replicasets", replicasets[0].metadata.name)]


def test_simulator_writes_several_objects_at_once(api_client, apiserver, namespace, monkeypatch):
    """As kube-controller-manager syncs several Deployments at once, the simulator runs several objects at once:
    the first run of each of these Deployments waits until all of them are in progress together."""
    simulator = apiserver.simulator
    converge = simulator._converge
    parties = 4
    barrier = threading.Barrier(parties, timeout=10)
    first: set[str] = set()
    met: list[int] = []

    def together(gr: tuple[str, str], ns: str, name: str) -> None:
        if ns == namespace and gr[1] == "deployments" and name not in first:
            first.add(name)
            met.append(barrier.wait())  # broken after 10 s unless every party is running at once
        converge(gr, ns, name)

    monkeypatch.setattr(simulator, "_converge", together)
    apps = client.AppsV1Api(api_client)
    for i in range(parties):
        apps.create_namespaced_deployment(namespace, deployment(f"together-{i}", replicas=1))
    for i in range(parties):
        eventually(lambda: apps.read_namespaced_deployment(f"together-{i}", namespace).status.ready_replicas == 1)
    assert sorted(met) == list(range(parties)) and workloads.WORKERS >= parties


def test_simulated_scheduler_spreads_pods_over_nodes_and_frees_a_deleted_pod_s_place(make_apiserver):
    server = make_apiserver(simulate_workloads=True, nodes=2)
    core = client.CoreV1Api(config.new_client_from_config(config_file=server.kubeconfig))

    def make(name: str) -> None:
        core.create_namespaced_pod("default", client.V1Pod(metadata=client.V1ObjectMeta(name=name),
                                                           spec=client.V1PodSpec(containers=[client.V1Container(
                                                               name="c", image="busybox")])))
        eventually(lambda: core.read_namespaced_pod(name, "default").spec.node_name, timeout=30)

    def nodes() -> list[str]:
        return sorted(p.spec.node_name for p in core.list_namespaced_pod("default").items)

    for i in range(4):
        make(f"p{i}")
    assert nodes() == ["node-0", "node-0", "node-1", "node-1"]
    gone = core.read_namespaced_pod("p0", "default").spec.node_name
    core.delete_namespaced_pod("p0", "default", grace_period_seconds=0)
    eventually(lambda: len(core.list_namespaced_pod("default").items) == 3, timeout=30)
    make("p4")
    assert core.read_namespaced_pod("p4", "default").spec.node_name == gone
