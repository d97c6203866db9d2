"""The chart's least-privilege RBAC is enough to run a sharded velashard, and it is enforced.

Real Helm installs helm/velashard into the embedded API server; the master and a slave shard run
as separate processes with tokens of the chart's ServiceAccounts (not admin), and the master learns
its identity from a SelfSubjectReview (no --controller-identity).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.e2e.helpers import (CHART, CHART_RELEASE as RELEASE, MASTER_SA, RUNTIME_NS, SHARD_SA, free_port, shard_of,
                               shard_pod, stop_processes, token_kubeconfig)
from tests.e2e.test_sharding import app, webhook_serving
from tests.integration.helpers import eventually, trust_authorless_apps
from velashard.apis.oam import APPLICATIONS
from velashard.core.install import install
from velashard.kube.client import KubeClient
from velashard.kube.resources import MUTATING_WEBHOOKS, NAMESPACES

helm = pytest.importorskip("helm_python", reason="helm-python-sdk is installed by the test extra")

CONTROLLER_ROLE = f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{RELEASE}-velashard-application-controller"


@pytest.fixture(scope="module")
def chart_cluster(tmp_path_factory):
    from velashard.apiserver.http.server import APIServer
    server = APIServer(port=0, simulate_workloads=True).start()
    directory = tmp_path_factory.mktemp("chart-rbac")
    admin = KubeClient.from_kubeconfig(server.write_kubeconfig(str(directory / "admin")), shard_id="test")
    install(admin, definitions=False)  # the chart installs the built-in definitions, as for users
    trust_authorless_apps(admin, "admin")  # the apps here are admin's: they act as admin
    # Release records are Secrets that Helm sends as protobuf; the embedded server keeps them in memory.
    release = helm.Config(kubeconfig_path=server.kubeconfig, namespace=RUNTIME_NS, storage_driver="memory")
    release.install(CHART, RELEASE, {"sharding": {"enabled": True}, "webhook": {"enabled": False}},
                    namespace=RUNTIME_NS, create_namespace=True, timeout=60)
    admin.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}})
    webhook_port = free_port()
    started = server.audit.since(0)["lastSeq"]  # every request of the processes comes after this
    procs: list[subprocess.Popen] = []
    try:
        for shard, service_account, extra in (
                ("master", MASTER_SA, ["--reschedule-period", "1", "--webhook-port", str(webhook_port),
                                       "--webhook-url", f"https://127.0.0.1:{webhook_port}"]),
                ("shard-a", SHARD_SA, [])):
            kubeconfig = token_kubeconfig(server, admin, service_account, directory / f"{shard}.kubeconfig")
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "velashard.cli.main", "--kubeconfig", kubeconfig, "--enable-sharding",
                 "--shard-id", shard, "--namespace", RUNTIME_NS, "--metrics-addr", "127.0.0.1:0",
                 "--health-addr", "127.0.0.1:0", "--state-keep-interval", "5", *extra],
                stdout=open(directory / f"{shard}.log", "wb"), stderr=subprocess.STDOUT))
            shard_pod(admin, shard, True)
        eventually(lambda: admin.list(MUTATING_WEBHOOKS)["items"], timeout=90)
        eventually(webhook_serving(webhook_port), timeout=90)
        yield server, admin, directory, started
    finally:  # a setup that fails must not leave the processes running
        stop_processes(procs)
    release.close()
    server.stop()


def running(admin: KubeClient, name: str) -> dict | None:
    got = admin.get(APPLICATIONS, name, "apps")
    return got if (got.get("status") or {}).get("status") == "running" and shard_of(got) == "shard-a" else None


def test_chart_rbac_runs_the_master_and_a_shard_without_admin(chart_cluster):
    server, admin, directory, started = chart_cluster
    for i in range(4):
        admin.create(APPLICATIONS, app(f"rbac-{i}"))
    for i in range(4):
        eventually(lambda i=i: running(admin, f"rbac-{i}"), timeout=60, interval=0.5)
    # From the processes' start: each has made requests by now (its Lease at least), whatever it did since.
    records = [r for r in server.audit.since(started)["items"] if "velashard/" in r["userAgent"]]
    users: dict[str, set[str]] = {}
    for r in records:
        if "shard=" in r["userAgent"]:
            users.setdefault(r["userAgent"].split("shard=")[1].rstrip(")"), set()).add(r["user"])
    assert users["master"] == {f"system:serviceaccount:{RUNTIME_NS}:{MASTER_SA}"}
    assert users["shard-a"] == {f"system:serviceaccount:{RUNTIME_NS}:{SHARD_SA}"}
    denied = [(r["verb"], r["resource"], r["subresource"]) for r in records if r["code"] == 403]
    assert denied == [], denied  # nothing the processes do is missing from the chart's roles
    # The master trusts itself as the identity a SelfSubjectReview gave it.
    log_text = (directory / "master.log").read_text()
    assert f"system:serviceaccount:{RUNTIME_NS}:{MASTER_SA}" in log_text


def test_removing_a_verb_from_the_shard_role_fails_its_reconciles_until_restored(chart_cluster):
    """Apps act as their authors, so the verb a shard cannot work without is `impersonate`."""
    server, admin, _, _ = chart_cluster
    since = server.audit.since(0)["lastSeq"]
    role = admin.request("get", "GET", CONTROLLER_ROLE)
    original = json.loads(json.dumps(role["rules"]))
    role["rules"] = [rule for rule in role["rules"] if "impersonate" not in rule["verbs"]]
    admin.request("update", "PUT", CONTROLLER_ROLE, body=role)
    admin.create(APPLICATIONS, {**app("blocked"), "spec": {"components": [
        {"name": "blocked", "type": "webservice", "properties": {"image": "nginx"}}]}})

    def refused() -> list[dict]:
        return [r for r in server.audit.since(since, 0)["items"]
                if r["code"] == 403 and r["user"] == f"system:serviceaccount:{RUNTIME_NS}:{SHARD_SA}"]

    eventually(refused, timeout=60, interval=0.5)  # its reconciles fail: RBAC refuses the impersonation
    assert running(admin, "blocked") is None
    role = admin.request("get", "GET", CONTROLLER_ROLE)
    role["rules"] = original
    admin.request("update", "PUT", CONTROLLER_ROLE, body=role)
    eventually(lambda: running(admin, "blocked"), timeout=60, interval=0.5)
