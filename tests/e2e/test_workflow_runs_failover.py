"""WorkflowRuns on a sharded fleet installed by the chart (real Helm, its RBAC and ServiceAccounts): a master with
its webhooks and two slave shards as processes.

- a tenant's WorkflowRun is recorded as the tenant's, placed by the webhook, and can do only what the tenant may;
  the tenant can neither pick its shard nor forge its author;
- 60 runs waiting at their gates (suspended or running) through a shard's pause and another shard's crash
  (hack/workflowrun_failover.py's scenario; `python hack/workflowrun_failover.py --runs 200` measures 200): they
  continue on the shard left, each step run once, and the paused shard writes nothing after its runs moved.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.request

import pytest

from hack.workflowrun_failover import LEASE, GRACE, SHARDS, problems, scenario
from tests.e2e.helpers import (RUNTIME_NS, chart_identities, free_port, shard_of, shard_pod, stop_processes,
                               wait_for_shard_leases)
from tests.e2e.test_tenant_steps import tenant_client
from tests.integration.helpers import eventually
from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS, WORKFLOW_RUNS
from velashard.core.install import install
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.resources import CONFIGMAPS, MUTATING_WEBHOOKS, NAMESPACES

pytest.importorskip("helm_python", reason="helm-python-sdk is installed by the test extra")

TEAM, OTHER = "team-a", "team-b"


class ChartFleet:
    def __init__(self, server, client: KubeClient, procs: dict[str, subprocess.Popen], health: dict[str, int]):
        self.server, self.client, self.procs, self.health = server, client, procs, health

    def audit(self, since: int) -> dict:
        return self.server.audit.since(since)

    def signal(self, shard: str, sig: int) -> None:
        self.procs[shard].send_signal(sig)
        if sig == signal.SIGKILL:
            self.procs[shard].wait(10)

    def shard_pod(self, shard: str, ready: bool, terminated: bool = False) -> None:
        shard_pod(self.client, shard, ready, terminated)

    def ready(self, shard: str) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health[shard]}/readyz", timeout=2) as answer:
                return answer.status == 200
        except OSError:
            return False


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    from velashard.apiserver.http.server import APIServer
    from tests.e2e.test_sharding import webhook_serving

    server = APIServer(port=0, simulate_workloads=True).start()
    directory = tmp_path_factory.mktemp("runs")
    admin = KubeClient.from_kubeconfig(server.write_kubeconfig(str(directory / "admin")), shard_id="test",
                                       qps=500, burst=500)
    install(admin)
    for ns in (TEAM, OTHER):
        admin.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    master_kubeconfig, shard_kubeconfig = chart_identities(server, admin, directory)
    webhook_port = free_port()
    procs: dict[str, subprocess.Popen] = {}
    health: dict[str, int] = {}
    for shard in ("master", *SHARDS):
        master = shard == "master"
        health[shard] = free_port()
        extra = ["--webhook-port", str(webhook_port), "--webhook-url", f"https://127.0.0.1:{webhook_port}",
                 "--controller-identity", f"system:serviceaccount:{RUNTIME_NS}:kubevela-velashard",
                 "--orphan-grace-period", GRACE, "--reschedule-period", "1"] if master else []
        procs[shard] = subprocess.Popen(
            [sys.executable, "-m", "velashard.cli.main", "--kubeconfig", master_kubeconfig if master else
             shard_kubeconfig, "--enable-sharding", "--shard-id", shard, "--namespace", RUNTIME_NS,
             "--metrics-addr", "127.0.0.1:0", "--health-addr", f"127.0.0.1:{health[shard]}", *LEASE, *extra],
            stdout=open(directory / f"{shard}.log", "ab"), stderr=subprocess.STDOUT, start_new_session=master)
    try:
        for shard in ("master", *SHARDS):
            shard_pod(admin, shard, True)
        wait_for_shard_leases(admin, "master", *SHARDS)
        eventually(lambda: admin.list(MUTATING_WEBHOOKS)["items"], timeout=90)
        eventually(webhook_serving(webhook_port), timeout=90)
        yield ChartFleet(server, admin, procs, health), directory
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
        stop_processes(list(procs.values()))
        server.stop()


def test_a_tenants_run_does_only_what_the_tenant_may(fleet):
    chart, directory = fleet
    admin = chart.client
    tenant = tenant_client(chart.server, admin, directory, TEAM)
    admin.request("create", "POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{TEAM}/rolebindings", body={
        "metadata": {"name": "tenant-runs"},
        "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": TEAM}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "kubevela-velashard-app-author"}})

    def configmap(name: str, ns: str) -> dict:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}}
    run = {"apiVersion": "core.oam.dev/v1alpha1", "kind": "WorkflowRun", "metadata": {"name": "reach", "namespace": TEAM},
           "spec": {"workflowSpec": {"steps": [
               {"name": "mine", "type": "apply-object", "properties": {"value": configmap("mine", TEAM)}},
               {"name": "theirs", "type": "apply-object", "properties": {"value": configmap("theirs", OTHER)}}]}}}
    tenant.create(WORKFLOW_RUNS, run)
    stored = admin.get(WORKFLOW_RUNS, "reach", TEAM)
    assert stored["metadata"]["annotations"][labels.APP_USERNAME] == f"system:serviceaccount:{TEAM}:tenant"
    assert shard_of(stored) in SHARDS and stored["metadata"]["annotations"][labels.ASSIGNMENT_PROOF]

    def step(name: str) -> dict:
        status = admin.get(WORKFLOW_RUNS, "reach", TEAM).get("status") or {}
        return next((s for s in status.get("steps") or [] if s["name"] == name), {})
    eventually(lambda: step("theirs").get("phase") == "failed", timeout=60)
    assert admin.get(CONFIGMAPS, "mine", TEAM)
    assert "tenant" in step("theirs")["message"] and "forbidden" in step("theirs")["message"].lower()
    with pytest.raises(errors.NotFound):
        admin.get(CONFIGMAPS, "theirs", OTHER)
    # the tenant can neither choose its shard nor name another author: the webhook records who writes a run
    chosen = dict(run, metadata={"name": "chosen", "namespace": TEAM,
                                 "labels": {labels.SCHEDULED_SHARD_ID: SHARDS[0]}})
    with pytest.raises(errors.KubeError) as refused:
        tenant.create(WORKFLOW_RUNS, chosen)
    assert f'may not choose shard "{SHARDS[0]}"' in refused.value.message
    live = tenant.get(WORKFLOW_RUNS, "reach", TEAM)
    live["metadata"]["annotations"][labels.APP_USERNAME] = "admin"
    updated = tenant.update(WORKFLOW_RUNS, live)
    assert updated["metadata"]["annotations"][labels.APP_USERNAME] == f"system:serviceaccount:{TEAM}:tenant"


def test_workflows_create_applications_that_the_scheduler_places(fleet):
    chart, _ = fleet
    admin = chart.client

    def child(name: str) -> dict:
        return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": {"name": name},
                "spec": {"components": [{"name": name, "type": "worker", "properties": {"image": "busybox"}}]}}
    admin.create(APPLICATIONS, {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
                                "metadata": {"name": "parent", "namespace": OTHER}, "spec": {"components": [],
                                "workflow": {"steps": [{"name": "make", "type": "apply-app",
                                                        "properties": {"data": child("from-app")}}]}}})
    admin.create(WORKFLOW_RUNS, {"apiVersion": "core.oam.dev/v1alpha1", "kind": "WorkflowRun",
                                 "metadata": {"name": "maker", "namespace": OTHER}, "spec": {"workflowSpec": {
                                     "steps": [{"name": "make", "type": "apply-app",
                                                "properties": {"data": child("from-run")}}]}}})
    def running(name: str) -> dict | None:
        found = [a for a in admin.list(APPLICATIONS, "default")["items"] if a["metadata"]["name"] == name]
        return found[0] if found and (found[0].get("status") or {}).get("status") == "running" else None
    for name in ("from-app", "from-run"):  # apply-app puts an application without a namespace in default
        made = eventually(lambda: running(name), timeout=90)
        assert shard_of(made) in SHARDS and made["metadata"]["annotations"][labels.ASSIGNMENT_PROOF]
    eventually(lambda: (admin.get(WORKFLOW_RUNS, "maker", OTHER).get("status") or {}).get("status") == "succeeded",
               timeout=60)


def test_runs_go_on_once_through_a_pause_and_a_crash(fleet):
    chart, _ = fleet
    result = scenario(chart, 60, timeout=300)
    assert not problems(result), result
    assert result["pause_moved_seconds"] <= 4.0 + 10.0, result  # lease duration, then the master's next pass
