"""Forged shard assignments are undone, webhook-placed apps never move, and the steady state sends nothing but
lease renewals and re-watches.

Real Helm installs helm/velashard with sharding (its RBAC, ServiceAccounts and shard-label guard) into the
embedded API server; a master and two shards run as processes with the chart's ServiceAccounts' tokens, with
their default periods. The tenant is a ServiceAccount that may edit Applications in its namespace, nothing
more. While the master is down the tenant labels new apps for the master and for a shard, with the webhook's
mark and a proof copied from another app: the guard lets the labels through (the mark is what it trusts),
the shards do not run them, and the master's return re-places them with valid proofs.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter

import pytest

from tests.e2e.helpers import (RUNTIME_NS, chart_identities, free_port, shard_of, shard_pod, stop_processes,
                               wait_for_shard_leases)
from tests.e2e.test_master_down import refuses
from tests.e2e.test_sharding import webhook_serving
from tests.integration.helpers import eventually
from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.core.events import EVENTS
from velashard.core.install import install
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.kubeconfig import write_kubeconfig
from velashard.kube.resources import CONFIGMAPS, MUTATING_WEBHOOKS, NAMESPACES, SECRETS, SERVICEACCOUNTS
from velashard.sharding.keys import PUBLIC_KEY_FIELD, SIGNING_KEY_SECRET, VERIFYING_KEY_CONFIGMAP
from velashard.sharding.proof import load_public_pem, verify

pytest.importorskip("helm_python", reason="helm-python-sdk is installed by the test extra")

APPS = 200
NS = "tenant-apps"
SHARDS = ("shard-a", "shard-b")
STATE_KEEP, RESCHEDULE = "15s", "10s"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def tenant_client(server, admin: KubeClient, directory) -> KubeClient:
    """A ServiceAccount that may read and write Applications in its own namespace, and the Deployments its apps
    render (they act as it), as a platform grants it."""
    admin.create(SERVICEACCOUNTS, {"apiVersion": "v1", "kind": "ServiceAccount",
                                   "metadata": {"name": "tenant", "namespace": NS}})
    admin.request("create", "POST", f"{RBAC}/namespaces/{NS}/roles", body={
        "metadata": {"name": "app-editor"}, "rules": [{"apiGroups": ["core.oam.dev"], "resources": ["applications"],
                                                       "verbs": ["get", "list", "watch", "create", "update",
                                                                 "patch"]},
                                                      {"apiGroups": ["apps"], "resources": ["deployments"],
                                                       "verbs": ["*"]}]})
    admin.request("create", "POST", f"{RBAC}/namespaces/{NS}/rolebindings", body={
        "metadata": {"name": "tenant-app-editor"},
        "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": NS}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "app-editor"}})
    token = admin.request("create", "POST", f"/api/v1/namespaces/{NS}/serviceaccounts/tenant/token",
                          body={"spec": {"expirationSeconds": 3600}})["status"]["token"]
    doc = server.kubeconfig_document()
    doc["users"][0]["user"]["token"] = token
    return KubeClient.from_kubeconfig(write_kubeconfig(str(directory / "tenant.kubeconfig"), doc),
                                      shard_id="tenant", qps=500, burst=500)


def app(name: str) -> dict:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": {"name": name, "namespace": NS},
            "spec": {"components": [{"name": name, "type": "worker", "properties": {"image": "busybox"}}]}}


def metric(port: int, name: str, **match: str) -> float:
    """The sum of a metric's samples whose labels include `match`."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    total = 0.0
    for found_labels, value in re.findall(rf"^{name}(?:{{([^}}]*)}})? ([0-9.e+-]+)$", text, re.M):
        if all(f'{k}="{v}"' in (found_labels or "") for k, v in match.items()):
            total += float(value)
    return total


def running(kube: KubeClient) -> list[dict]:
    items = kube.list(APPLICATIONS, NS)["items"]
    return items if len(items) == APPS and all((a.get("status") or {}).get("status") == "running"
                                               and shard_of(a) in SHARDS for a in items) else []


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Chart, master, two shards, and the tenant's 200 apps placed by the webhook and running."""
    from velashard.apiserver.http.server import APIServer

    server = APIServer(port=0, simulate_workloads=True).start()
    directory = tmp_path_factory.mktemp("forged")
    admin = KubeClient.from_kubeconfig(server.write_kubeconfig(str(directory / "admin")), shard_id="test",
                                       qps=500, burst=500)
    install(admin)
    admin.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    master_kubeconfig, shard_kubeconfig = chart_identities(server, admin, directory)
    tenant = tenant_client(server, admin, directory)
    webhook_port = free_port()
    procs: dict[str, subprocess.Popen] = {}
    metrics = {shard: free_port() for shard in ("master", *SHARDS)}

    def start(shard: str) -> None:
        master = shard == "master"
        extra = ["--webhook-port", str(webhook_port), "--webhook-url", f"https://127.0.0.1:{webhook_port}"] \
            if master else []
        procs[shard] = subprocess.Popen(
            [sys.executable, "-m", "velashard.cli.main", "--kubeconfig", master_kubeconfig if master else
             shard_kubeconfig, "--enable-sharding", "--shard-id", shard, "--namespace", RUNTIME_NS,
             "--metrics-addr", f"127.0.0.1:{metrics[shard]}", "--health-addr", "127.0.0.1:0",
             # the periodic passes (60 s and 30 s by default) shortened, so that the steady-state window sees each
             # of them more than once
             "--state-keep-interval", STATE_KEEP, "--reschedule-period", RESCHEDULE, *extra],
            stdout=open(directory / f"{shard}.log", "ab"), stderr=subprocess.STDOUT,
            start_new_session=master)  # its own group: killing it kills its webhook server too

    try:
        for shard in ("master", *SHARDS):
            start(shard)
            shard_pod(admin, shard, True)
        wait_for_shard_leases(admin, "master", *SHARDS)
        eventually(lambda: admin.list(MUTATING_WEBHOOKS)["items"], timeout=90)
        eventually(webhook_serving(webhook_port), timeout=90)
        for i in range(APPS):
            assert shard_of(tenant.create(APPLICATIONS, app(f"app-{i}"))) in SHARDS  # placed at admission
        eventually(lambda: running(admin), timeout=180, interval=1.0)
        yield server, admin, tenant, procs, metrics, start, webhook_port
    finally:
        stop_processes(list(procs.values()))
        server.stop()


def test_at_steady_state_the_only_requests_are_lease_renewals_and_rewatches(cluster):
    server, *_ = cluster
    time.sleep(10)  # the last status writes land
    window = 32.0  # two state-keep passes of every process, three of the master's scheduler
    since = server.audit.since(1 << 62)["lastSeq"]
    time.sleep(window)
    records = [r for r in server.audit.since(since)["items"]
               if "velashard/" in r["userAgent"] and "shard=" in r["userAgent"]
               and not re.search(r"shard=(test|tenant)\)", r["userAgent"])]
    kinds = Counter((r["verb"], r["resource"]) for r in records)
    other = {k: n for k, n in kinds.items() if k != ("update", "leases") and k[0] != "watch"}
    assert other == {}, other
    # Every process renews its shard Lease every retry period (2 s): three processes, about 48 in 32 s (fewer
    # when the machine is busy).
    assert 25 <= kinds[("update", "leases")] <= 60, kinds


def test_a_forged_assignment_is_undone_and_webhook_placed_apps_never_move(cluster):
    server, admin, tenant, procs, metrics, start, webhook_port = cluster
    placed = {a["metadata"]["name"]: shard_of(a) for a in running(admin)}
    assert metric(metrics["master"], "velashard_schedule_total", result="scheduled") == 0  # all by the webhook
    for shard in ("master", *SHARDS):
        assert metric(metrics[shard], "velashard_shard_assignments_rejected_total") == 0

    os.killpg(procs["master"].pid, signal.SIGKILL)
    procs["master"].wait(10)
    eventually(lambda: refuses(webhook_port), timeout=10, interval=0.1)
    copied = tenant.get(APPLICATIONS, "app-0", NS)["metadata"]["annotations"][labels.ASSIGNMENT_PROOF]
    forged = {}
    for name, shard in (("forged-master", "master"), ("forged-shard", "shard-a")):
        body = app(name)
        body["metadata"]["labels"] = {labels.SCHEDULED_SHARD_ID: shard}
        body["metadata"]["annotations"] = {labels.ASSIGNED_BY_WEBHOOK: shard, labels.ASSIGNMENT_PROOF: copied}
        forged[name] = tenant.create(APPLICATIONS, body)
        assert shard_of(forged[name]) == shard  # the guard trusts the webhook's mark, which nobody strips now
    with pytest.raises(errors.Forbidden):
        tenant.get(SECRETS, SIGNING_KEY_SECRET, RUNTIME_NS)  # the key that makes proofs stays out of reach
    # The shard does not run it: it hands it back, and it waits unscheduled for the master.
    handed_back = eventually(lambda: (lambda a: a if shard_of(a) is None else None)(
        admin.get(APPLICATIONS, "forged-shard", NS)), timeout=20)
    assert not handed_back.get("status") and not handed_back["metadata"].get("finalizers")
    # Counted once the hand-back's write has returned to the shard, which may be a moment after the test saw it.
    eventually(lambda: metric(metrics["shard-a"], "velashard_shard_assignments_rejected_total",
                              reason="invalid") == 1, timeout=10, interval=0.1)

    start("master")
    returned = time.monotonic()
    key = load_public_pem(admin.get(CONFIGMAPS, VERIFYING_KEY_CONFIGMAP, RUNTIME_NS)["data"][PUBLIC_KEY_FIELD])

    def replaced(name: str) -> dict | None:
        got = admin.get(APPLICATIONS, name, NS)
        shard = shard_of(got)
        proof = (got["metadata"].get("annotations") or {}).get(labels.ASSIGNMENT_PROOF, "")
        return got if shard in SHARDS and verify(key, NS, name, shard, proof) and \
            (got.get("status") or {}).get("status") == "running" else None

    for name in forged:
        eventually(lambda name=name: replaced(name), timeout=max(1.0, 30 - (time.monotonic() - returned)),
                   interval=0.2)
    undone_in = time.monotonic() - returned
    assert undone_in <= 30, undone_in
    # Each hand-back recorded its Event before the app left the shard (a read here, once both are re-placed).
    events = [e for e in admin.list(EVENTS, NS)["items"] if e["involvedObject"]["name"] in forged]
    assert {e["involvedObject"]["name"] for e in events if e["reason"] == "UnprovenShardAssignment"} == set(forged)
    eventually(lambda: metric(metrics["master"], "velashard_shard_assignments_rejected_total",
                              reason="invalid") == 1, timeout=10, interval=0.1)

    # The check moved none of the webhook's apps, before the master's return or after it.
    time.sleep(3)
    after = {a["metadata"]["name"]: shard_of(a) for a in admin.list(APPLICATIONS, NS)["items"]
             if a["metadata"]["name"] not in forged}
    moves = sum(1 for name, shard in placed.items() if after.get(name) != shard)
    assert moves == 0
    assert metric(metrics["master"], "velashard_schedule_total", result="scheduled") == len(forged)
    assert metric(metrics["shard-a"], "velashard_shard_assignments_rejected_total") == 1  # forged-shard only
    assert metric(metrics["shard-b"], "velashard_shard_assignments_rejected_total") == 0
