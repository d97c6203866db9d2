"""Day 2 on a running fleet, in one `velashard dev` as a user runs it (issue 44, items 2, 5 and 7).

The chart as users install it, by real Helm: two master replicas (`replicaCount: 2`), the webhook's certificate
from a Secret that the test makes and renews as cert-manager would (`webhook.certificate.secretName`, mounted
into the pods by the local kubelet as a kubelet does), three shard pods from the addon of which the master
schedules to two (`sharding.schedulableShards`) with the consistent-hash scheduler, and dev's 100 sample apps.
Everything is measured from the API server (objects, resourceVersions, the Lease, the audit log), from each
webhook replica's own metrics, and from callers that make admission calls straight to each replica.

- Item 2: admission calls spread over both replicas; the leader's pod deleted in the middle of a burst of
  creates (as `kubectl delete pod` or a rollout stops it: out of the Service, then SIGTERM) costs no call, and
  every app gets its shard and its author, with a proof of the one signing key both replicas share. A crash
  (SIGKILL) fails the calls routed to the dead replica until its endpoint is dropped: the audit log names them
  (failed-open), exactly those apps lack an author and say so, and every app is still scheduled.
- Item 5: the certificate renewed three times while apps are created and admission calls are made on new
  connections: none fails, each replica serves the newest certificate from the same server process, and a new
  CA is registered beside the one it replaced.
- Item 7: `helm upgrade` (image tag, a resource limit, the shard list two to three) with the sample apps
  running: no new revision, no workflow run again, no app Deployment rolled or (if its app did not move) written
  at all, and the new shard takes its share, every move through the drain handshake.
"""

from __future__ import annotations

import base64
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from hack.bench_chart_upgrade import UPGRADE, handshakes, shard_of, snapshot
from tests.e2e.helpers import RUNTIME_NS, Dev, leader_pod, webhook_calls
from tests.integration.helpers import AdmissionCaller, eventually, serial
from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.core.events import EVENTS
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.resources import CONFIGMAPS, DEPLOYMENTS, MUTATING_WEBHOOKS, NAMESPACES, PODS, SECRETS
from velashard.sharding.keys import PUBLIC_KEY_FIELD, VERIFYING_KEY_CONFIGMAP
from velashard.sharding.proof import load_public_pem, verify
from velashard.webhook.certificates import KeyPair, make_ca, make_serving_cert

helm = pytest.importorskip("helm_python", reason="helm-python-sdk is installed by the test extra")

SAMPLES = 100
SECRET = "velashard-webhook-tls"
HOSTS = ["velashard.vela-system.svc", "velashard.vela-system.svc.cluster.local", "127.0.0.1"]
LISTED = {"shard-0", "shard-1"}


def certificate_secret(ca: KeyPair, serving: KeyPair) -> dict:
    """What a cert-manager Certificate with a CA issuer writes."""
    data = {"ca.crt": ca.cert_pem, "tls.crt": serving.cert_pem, "tls.key": serving.key_pem}
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": SECRET, "namespace": RUNTIME_NS},
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()}}


def app(name: str) -> dict:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": {"name": name, "namespace": "default"},
            "spec": {"components": [{"name": name, "type": "worker", "properties": {"image": "busybox"}}]}}


def samples_running(kube: KubeClient) -> bool:
    apps = [a for a in kube.list(APPLICATIONS, "default")["items"] if a["metadata"]["name"].startswith("sample-")]
    return len(apps) == SAMPLES and all((a.get("status") or {}).get("status") == "running" for a in apps)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    directory = tmp_path_factory.mktemp("day2") / "dev"
    ca = make_ca()
    cluster = Dev(directory, "--shards", "3", "--apps", str(SAMPLES), "--set", "replicaCount=2",
                  "--set", f"webhook.certificate.secretName={SECRET}",
                  "--set", "sharding.schedulableShards=shard-0,shard-1", "--set", "sharding.scheduler=consistent-hash",
                  "--set", "sharding.orphanGracePeriod=60")
    try:
        # The pods wait for the certificate Secret, as they would for a Certificate's: made once the chart made
        # the namespace.
        eventually(lambda: (directory / "kubeconfig").exists(), timeout=120, interval=0.2)
        admin = KubeClient.from_kubeconfig(str(directory / "kubeconfig"), shard_id="test")

        def namespace_made() -> bool:
            try:
                return bool(admin.get(NAMESPACES, RUNTIME_NS))
            except errors.NotFound:
                return False

        eventually(namespace_made, timeout=120, interval=0.2)
        admin.create(SECRETS, certificate_secret(ca, make_serving_cert(ca, HOSTS)))
        kube = cluster.wait_started()
        eventually(lambda: len(cluster.masters()) == 2, timeout=120, interval=0.5)
        yield cluster, kube, {"ca": ca}
    finally:
        out = cluster.stop()
    assert cluster.proc.returncode == 0, out


# --- item 2: every replica admits -----------------------------------------------------------------------------

def burst(kube: KubeClient, prefix: str, count: int, threads: int, after: int = -1, action: Any = None) -> list[str]:
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


def create_records(kube: KubeClient, names: list[str], since: int = 0) -> dict[str, dict]:
    records = kube.request("get", "GET", "/debug/audit", query={"since": str(since)})["items"]
    wanted = set(names)
    return {r["name"]: r for r in records if r["resource"] == "applications" and r["verb"] == "create"
            and r["namespace"] == "default" and r["name"] in wanted}


def failed_open(record: dict) -> bool:
    return any(key.startswith("failed-open.") for key in record.get("annotations") or {})


def test_every_replica_admits_and_the_leaders_pod_deleted_mid_burst_costs_no_call(fleet):
    cluster, kube, certs = fleet
    key = load_public_pem(kube.get(CONFIGMAPS, VERIFYING_KEY_CONFIGMAP, RUNTIME_NS)["data"][PUBLIC_KEY_FIELD])
    masters = {p["name"]: p for p in cluster.masters()}
    before = {name: webhook_calls(p["ports"]["webhook"], certs["ca"].cert_pem) for name, p in masters.items()}
    spread = burst(kube, "spread", 48, threads=16)
    answered = {name: webhook_calls(p["ports"]["webhook"], certs["ca"].cert_pem) - before[name]
                for name, p in masters.items()}
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
        assert shard_of(apps[name]) in LISTED, meta  # placed at admission, by whichever replica answered
        # Both replicas sign with the one key.
        assert verify(key, "default", name, shard_of(apps[name]), meta["annotations"][labels.ASSIGNMENT_PROOF])
    # The other replica leads now; the Deployment has its second replica again, admitting too.
    eventually(lambda: leader_pod(kube) in {p["name"] for p in cluster.masters()} and leader_pod(kube) != leader,
               timeout=60, interval=0.5)
    eventually(lambda: len(cluster.masters()) == 2 and leader not in {p["name"] for p in cluster.masters()},
               timeout=120, interval=0.5)
    # The deleted pod's volumes (its cache's emptyDir, its certificate's copy) went with it; the new pod has its own.
    volumes = cluster.directory / "volumes"
    eventually(lambda: not (volumes / leader).exists(), timeout=60, interval=0.5)
    assert all((volumes / p["name"] / "cache").is_dir() for p in cluster.masters())
    # Every app runs on its shard: none was handed back for a proof the shard did not accept.
    eventually(lambda: all((a.get("status") or {}).get("status") == "running" for a in kube.list(
        APPLICATIONS, "default")["items"] if a["metadata"]["name"] in set(names)), timeout=180, interval=1.0)
    assert not [e for e in kube.list(EVENTS, "default")["items"] if e["reason"] == "UnprovenShardAssignment"]


def test_a_crashed_replica_fails_open_only_the_calls_routed_to_it_and_every_app_is_scheduled(fleet):
    cluster, kube, _ = fleet
    eventually(lambda: len(cluster.masters()) == 2, timeout=120, interval=0.5)
    leader = leader_pod(kube)
    pid = next(p["pid"] for p in cluster.masters() if p["name"] == leader)
    # The leader keeps its caches in its pod's emptyDir (the chart's cacheDir), written once they were quiet.
    snapshot_file = cluster.directory / "volumes" / leader / "cache" / "master.cache"
    eventually(snapshot_file.exists, timeout=90, interval=0.5)
    names = burst(kube, "crash", 120, threads=8, after=30, action=lambda: os.kill(pid, signal.SIGKILL))
    records = create_records(kube, names)
    assert len(records) == len(names) and all(r["code"] == 201 for r in records.values())  # no write refused
    lost = {n for n, r in records.items() if failed_open(r)}
    apps = {a["metadata"]["name"]: a for a in kube.list(APPLICATIONS, "default")["items"]}
    authorless = {n for n in names if labels.APP_USERNAME not in (apps[n]["metadata"].get("annotations") or {})}
    assert authorless == lost, (authorless, lost)  # the audit log names every app admitted without its author
    # The webhook scheduled the others; the background scheduler (once the other replica leads) schedules the rest.
    eventually(lambda: all(shard_of(a) in LISTED for a in kube.list(APPLICATIONS, "default")["items"]
                           if a["metadata"]["name"] in set(names)), timeout=120, interval=1.0)
    for name in lost:  # they act as the default user, and say why
        message = eventually(lambda: next((c["message"] for c in (kube.get(APPLICATIONS, name, "default").get(
            "status") or {}).get("conditions") or [] if c["type"] == "Authorized" and c["status"] == "False"), None),
            timeout=120, interval=1.0)
        assert "no author was recorded on this application" in message, message
    # The crashed container was restarted in its pod, whose emptyDir kept the snapshot: the new process read it.
    crashed = next(p for p in cluster.processes() if p["name"] == leader)
    eventually(lambda: "cache snapshot restored" in open(crashed["log"]).read(), timeout=60, interval=0.5)
    assert snapshot_file.exists()


# --- item 5: certificates rotate without a restart -----------------------------------------------------------

def webhook_server(master_pid: int) -> set[int]:
    """The master process's children: its webhook server (gunicorn's arbiter)."""
    with open(f"/proc/{master_pid}/task/{master_pid}/children") as fh:
        return {int(pid) for pid in fh.read().split()}


def registered_cas(kube: KubeClient) -> set[bytes]:
    hook = kube.get(MUTATING_WEBHOOKS, "velashard-mutating")["webhooks"][0]
    return {c.public_bytes(serialization.Encoding.PEM)
            for c in x509.load_pem_x509_certificates(base64.b64decode(hook["clientConfig"]["caBundle"]))}


def renew(kube: KubeClient, ca: KeyPair, serving: KeyPair) -> None:
    body = certificate_secret(ca, serving)
    body["metadata"]["resourceVersion"] = kube.get(SECRETS, SECRET, RUNTIME_NS)["metadata"]["resourceVersion"]
    kube.update(SECRETS, body)


def test_a_certificate_renewed_while_apps_are_admitted_is_served_without_a_restart(fleet):
    cluster, kube, certs = fleet
    ca = certs["ca"]
    eventually(lambda: len(cluster.masters()) == 2, timeout=120, interval=0.5)
    assert registered_cas(kube) == {ca.cert_pem}
    masters = cluster.masters()
    ports = [p["ports"]["webhook"] for p in masters]
    servers = [webhook_server(p["pid"]) for p in masters]
    created: list[str] = []
    stop = threading.Event()

    def create_apps() -> None:
        while not stop.is_set():
            kube.create(APPLICATIONS, app(f"rotate-{len(created)}"))
            created.append(f"rotate-{len(created)}")
            stop.wait(0.05)

    since = kube.request("get", "GET", "/debug/audit", query={"since": "0"})["lastSeq"]
    writer = threading.Thread(target=create_apps, daemon=True)
    with AdmissionCaller(ports[0], ca.cert_pem) as first, AdmissionCaller(ports[1], ca.cert_pem) as second:
        writer.start()
        for _ in range(3):
            eventually(lambda: len(first.serials) > 5 and len(second.serials) > 5, timeout=30)
            newest = make_serving_cert(ca, HOSTS)
            renew(kube, ca, newest)
            # Each replica serves it from its next connection on (the kubelet projects the Secret's new version).
            eventually(lambda: first.serials[-1] == serial(newest.cert_pem) == second.serials[-1], timeout=60,
                       interval=0.1)
            first.serials.clear()
            second.serials.clear()
        stop.set()
        writer.join(30)
    assert first.failures == [] and second.failures == [], (first.failures[:3], second.failures[:3])
    records = create_records(kube, created, since)
    assert len(records) == len(created) >= 10 and not [n for n, r in records.items() if failed_open(r)]
    apps = {a["metadata"]["name"]: a for a in kube.list(APPLICATIONS, "default")["items"]}
    assert all((apps[n]["metadata"].get("annotations") or {}).get(labels.APP_USERNAME) == "admin" for n in created)
    assert [webhook_server(p["pid"]) for p in masters] == servers  # the same server processes throughout
    # A new CA: the leader puts it into the webhook configurations, beside the one it replaced.
    new_ca = make_ca(common_name="rotated-ca")
    renew(kube, new_ca, make_serving_cert(new_ca, HOSTS))
    eventually(lambda: registered_cas(kube) == {ca.cert_pem, new_ca.cert_pem}, timeout=60, interval=0.5)


# --- item 7: a chart upgrade keeps apps running ---------------------------------------------------------------

def test_a_chart_upgrade_keeps_apps_running_and_the_new_shard_takes_its_share_by_drain(fleet):
    cluster, kube, _ = fleet
    eventually(lambda: samples_running(kube) and len(cluster.masters()) == 2, timeout=240, interval=1.0)
    time.sleep(3)  # the last status writes land
    samples = sorted(n for n in snapshot(kube)["apps"] if n.startswith("sample-"))
    # Every controller process keeps its caches in a file of its shard id in its own pod's emptyDir: the
    # addon's shards inherit the volume and the flag from the master's Deployment.
    volumes = cluster.directory / "volumes"
    shard_pods = {p["name"]: "-".join(p["name"].split("-")[1:3]) for p in cluster.processes()
                  if p["name"].startswith("velashard-shard-") and not p.get("terminating")}
    assert sorted(shard_pods.values()) == ["shard-0", "shard-1", "shard-2"], shard_pods
    assert all((volumes / pod / "cache").is_dir() for pod in shard_pods)
    # (shard-2 has no apps yet, so nothing to write)
    eventually(lambda: all((volumes / pod / "cache" / f"{shard}.cache").exists() for pod, shard in shard_pods.items()
                           if shard in LISTED), timeout=90, interval=0.5)
    before = snapshot(kube)
    old_masters = {p["name"] for p in cluster.masters()}
    since = kube.request("get", "GET", "/debug/audit", query={"since": "0"})["lastSeq"]
    release = helm.Config(kubeconfig_path=str(cluster.directory / "kubeconfig"), namespace=RUNTIME_NS,
                          storage_driver="secret")
    try:
        release.upgrade(os.path.join(os.path.dirname(__file__), "..", "..", "helm", "velashard"), "velashard",
                        UPGRADE, namespace=RUNTIME_NS, reuse_values=True, timeout=300)
    finally:
        release.close()
    # Both master replicas rolled; the new shard has its share of the samples; every drain was answered.
    eventually(lambda: len(cluster.masters()) == 2 and not {p["name"] for p in cluster.masters()} & old_masters,
               timeout=240, interval=1.0)
    # A rollout makes new pods: each starts with an empty cache directory of its own (the cold path; a snapshot of
    # the old version would be ignored anyway), and the old pods' went with them.
    volumes = cluster.directory / "volumes"
    assert all((volumes / p["name"] / "cache").is_dir() for p in cluster.masters())
    eventually(lambda: not any((volumes / name).exists() for name in old_masters), timeout=60, interval=0.5)

    def rebalanced() -> bool:
        apps = snapshot(kube)["apps"]
        return samples_running(kube) and not any(labels.DRAIN in (a["metadata"].get("labels") or {}) or
                                                 shard_of(a) is None for a in apps.values()) and \
            sum(1 for n in samples if shard_of(apps[n]) == "shard-2") >= SAMPLES // 6

    eventually(rebalanced, timeout=240, interval=2.0)
    time.sleep(3)
    after = snapshot(kube)
    records = kube.request("get", "GET", "/debug/audit", query={"since": str(since)})["items"]
    moved = {n: (shard_of(before["apps"][n]), shard_of(after["apps"][n])) for n in samples
             if shard_of(before["apps"][n]) != shard_of(after["apps"][n])}
    assert moved and all(new == "shard-2" for _, new in moved.values()), moved  # consistent hashing: only to it
    assert handshakes(records, moved) == len(moved)  # the master asked, the old shard let go, the master placed
    for name in samples:
        old, new = before["apps"][name], after["apps"][name]
        assert after["revisions"][name] == before["revisions"][name]  # no new revision
        assert (old["status"]["workflow"]["startTime"], old["status"]["workflow"]["appRevision"]) == \
            (new["status"]["workflow"]["startTime"], new["status"]["workflow"]["appRevision"])  # not run again
        deployment, was = after["deployments"][name], before["deployments"][name]
        assert deployment["metadata"]["generation"] == was["metadata"]["generation"]  # not rolled
        assert deployment["spec"]["template"] == was["spec"]["template"]
        if name not in moved:
            assert deployment["metadata"]["resourceVersion"] == was["metadata"]["resourceVersion"]  # not written
    # The shards run the new template too (the addon's app clones the master Deployment).
    eventually(lambda: all(d["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":0.1.1-upgraded")
                           for d in kube.list(DEPLOYMENTS, RUNTIME_NS)["items"]), timeout=120, interval=1.0)
