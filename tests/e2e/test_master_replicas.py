"""Two master replicas, as the chart's `replicaCount: 2` runs them in `velashard dev` (issue 44, item 2).

Every Ready replica answers admission calls (the webhook Service routes to each), so calls spread over both;
the leader's pod deleted in the middle of a burst of creates (as `kubectl delete pod` or a rollout stops it: out
of the Service, then SIGTERM) costs no call, and every app gets its shard and its author, proven with the one
signing key both replicas share. A crash (SIGKILL) mid-burst fails the calls routed to the dead replica until
its endpoint is dropped: the API server's audit log names them (failed-open), exactly those apps lack an author
and say so, and the background scheduler still gives every app its shard. Measured from the API server (objects,
the Lease, the audit log) and from each replica's own metrics.
"""

from __future__ import annotations

import base64
import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.e2e.helpers import RUNTIME_NS, Dev, leader_pod, shard_of, webhook_calls
from tests.integration.helpers import eventually
from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.core.events import EVENTS
from velashard.kube.client import KubeClient
from velashard.kube.resources import CONFIGMAPS, PODS, SECRETS
from velashard.sharding.keys import PUBLIC_KEY_FIELD, VERIFYING_KEY_CONFIGMAP
from velashard.sharding.proof import load_public_pem, verify

pytest.importorskip("helm_python", reason="helm-python-sdk is installed by the test extra")

SHARDS = {"shard-0", "shard-1"}


def app(name: str) -> dict:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": {"name": name, "namespace": "default"},
            "spec": {"components": [{"name": name, "type": "worker", "properties": {"image": "busybox"}}]}}


def burst(kube: KubeClient, prefix: str, count: int, threads: int, after: int = -1,
          action=None) -> list[str]:
    """`count` creates from `threads` threads at once; `action()` once `after` of them were created."""
    done, lock = [0], threading.Lock()

    def create(i: int) -> str:
        kube.create(APPLICATIONS, app(f"{prefix}-{i}"))
        with lock:
            done[0] += 1
            fire = done[0] == after
        if fire:
            action()
        return f"{prefix}-{i}"

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(create, range(count)))


def create_records(kube: KubeClient, names: list[str]) -> dict[str, dict]:
    records = kube.request("get", "GET", "/debug/audit", query={"since": "0"})["items"]
    wanted = set(names)
    return {r["name"]: r for r in records if r["resource"] == "applications" and r["verb"] == "create"
            and r["namespace"] == "default" and r["name"] in wanted}


def failed_open(record: dict) -> bool:
    return any(key.startswith("failed-open.") for key in record.get("annotations") or {})


@pytest.fixture(scope="module")
def dev(tmp_path_factory):
    cluster = Dev(tmp_path_factory.mktemp("replicas") / "dev", "--shards", "2", "--set", "replicaCount=2")
    try:
        kube = cluster.wait_started()
        eventually(lambda: len(cluster.masters()) == 2, timeout=120, interval=0.5)
        yield cluster, kube
    finally:
        out = cluster.stop()
    assert cluster.proc.returncode == 0, out


def test_every_replica_admits_and_the_leaders_pod_deleted_mid_burst_costs_no_call(dev):
    cluster, kube = dev
    ca = base64.b64decode(kube.get(SECRETS, "velashard-certs", RUNTIME_NS)["data"]["ca.crt"])
    key = load_public_pem(kube.get(CONFIGMAPS, VERIFYING_KEY_CONFIGMAP, RUNTIME_NS)["data"][PUBLIC_KEY_FIELD])
    masters = {p["name"]: p for p in cluster.masters()}
    before = {name: webhook_calls(p["ports"]["webhook"], ca) for name, p in masters.items()}
    spread = burst(kube, "spread", 48, threads=16)
    answered = {name: webhook_calls(p["ports"]["webhook"], ca) - before[name] for name, p in masters.items()}
    assert all(n > 0 for n in answered.values()) and sum(answered.values()) >= 48, answered

    leader = leader_pod(kube)
    assert leader in masters
    names = burst(kube, "rollover", 160, threads=8, after=40,
                  action=lambda: kube.delete(PODS, leader, RUNTIME_NS))  # as kubectl delete pod does
    records = create_records(kube, spread + names)
    assert len(records) == len(spread + names) and all(r["code"] == 201 for r in records.values())
    assert not [n for n, r in records.items() if failed_open(r)]  # no admission call failed, not one
    apps = {a["metadata"]["name"]: a for a in kube.list(APPLICATIONS, "default")["items"]}
    for name in spread + names:
        meta = apps[name]["metadata"]
        assert (meta.get("annotations") or {}).get(labels.APP_USERNAME) == "admin", meta
        assert shard_of(apps[name]) in SHARDS, meta  # placed at admission, by whichever replica answered
        proof = meta["annotations"][labels.ASSIGNMENT_PROOF]
        assert verify(key, "default", name, shard_of(apps[name]), proof)  # both replicas sign with one key
    # The other replica leads now; the Deployment has its second replica again, admitting too.
    eventually(lambda: leader_pod(kube) in {p["name"] for p in cluster.masters()} and leader_pod(kube) != leader,
               timeout=60, interval=0.5)
    eventually(lambda: len(cluster.masters()) == 2 and leader not in {p["name"] for p in cluster.masters()},
               timeout=120, interval=0.5)
    # Every app runs on its shard: none was handed back for a proof the shard did not accept.
    eventually(lambda: all((a.get("status") or {}).get("status") == "running" for a in kube.list(
        APPLICATIONS, "default")["items"] if a["metadata"]["name"] in set(names)), timeout=180, interval=1.0)
    assert not [e for e in kube.list(EVENTS, "default")["items"] if e["reason"] == "UnprovenShardAssignment"]


def test_a_crashed_replica_fails_open_only_the_calls_routed_to_it_and_every_app_is_scheduled(dev):
    cluster, kube = dev
    eventually(lambda: len(cluster.masters()) == 2, timeout=120, interval=0.5)
    leader = leader_pod(kube)
    pid = next(p["pid"] for p in cluster.masters() if p["name"] == leader)
    names = burst(kube, "crash", 120, threads=8, after=30, action=lambda: os.kill(pid, signal.SIGKILL))
    records = create_records(kube, names)
    assert len(records) == len(names) and all(r["code"] == 201 for r in records.values())  # no write refused
    lost = {n for n, r in records.items() if failed_open(r)}
    apps = {a["metadata"]["name"]: a for a in kube.list(APPLICATIONS, "default")["items"]}
    authorless = {n for n in names if labels.APP_USERNAME not in (apps[n]["metadata"].get("annotations") or {})}
    assert authorless == lost, (authorless, lost)  # the audit log names every app admitted without its author
    # The webhook scheduled the others; the background scheduler (once the other replica leads) schedules the rest.
    eventually(lambda: all(shard_of(a) in SHARDS for a in kube.list(APPLICATIONS, "default")["items"]
                           if a["metadata"]["name"] in set(names)), timeout=120, interval=1.0)
    for name in lost:  # they act as the default user, and say why
        message = eventually(lambda: next((c["message"] for c in (kube.get(APPLICATIONS, name, "default").get(
            "status") or {}).get("conditions") or [] if c["type"] == "Authorized" and c["status"] == "False"), None),
            timeout=120, interval=1.0)
        assert "no author was recorded on this application" in message, message
