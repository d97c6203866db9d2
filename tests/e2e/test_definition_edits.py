"""Day 2: a definition edit touches only the apps that use it, and asks no approval twice.

Real Helm installs helm/velashard with sharding and its built-in definitions (as users install it) into the
embedded API server; a master and two shards run as processes with the chart's ServiceAccounts' tokens. Forty
apps run: twenty use the `scaler` trait, eighteen do not, one waits at a `suspend` step and one was resumed
there and finished. The platform team edits the unused `hpa` trait and adds a new trait with `velashard def
apply`: nothing is written for any app (no revision, no workflow run, no Deployment or Service rewritten, from
the audit log). It then edits `scaler`: exactly its twenty users get a new revision; the waiting app still waits
at the same step and the finished one stays finished.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.e2e.helpers import (CHART, CHART_RELEASE, MASTER_SA, RUNTIME_NS, SHARD_SA, free_port, shard_of, shard_pod,
                               stop_processes, token_kubeconfig, wait_for_shard_leases)
from tests.e2e.test_sharding import webhook_serving
from tests.integration.helpers import eventually, trust_authorless_apps
from velashard.apis.oam import APPLICATION_REVISIONS, APPLICATIONS
from velashard.cli.main import main
from velashard.core.install import install
from velashard.kube.client import KubeClient
from velashard.kube.resources import MUTATING_WEBHOOKS, NAMESPACES

helm = pytest.importorskip("helm_python", reason="helm-python-sdk is installed by the test extra")

NS = "fleet"
SHARDS = ("shard-a", "shard-b")
USERS = [f"scaled-{i}" for i in range(20)]
OTHERS = [f"plain-{i}" for i in range(18)]
# What an app's own processing writes; a definition's own status (TemplateValid) is the checker's bookkeeping.
APP_RESOURCES = {"applications", "applicationrevisions", "resourcetrackers", "deployments", "services", "configmaps"}
NEW_TRAIT = """\
"unused-new": {
	type: "trait"
	description: "Nobody uses this one."
	attributes: appliesToWorkloads: ["deployments.apps"]
}
template: {
	patch: metadata: annotations: unused: parameter.note
	parameter: note: *"none" | string
}
"""


def application(name: str, traits: list | None = None, steps: list | None = None) -> dict:
    spec: dict = {"components": [{"name": name, "type": "webservice",
                                  "properties": {"image": "nginx:1.25", "ports": [{"port": 80, "expose": True}]},
                                  "traits": traits or []}]}
    if steps:
        spec["workflow"] = {"steps": [{"name": "deploy", "type": "apply-component",
                                       "properties": {"component": name}}, *steps]}
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": {"name": name, "namespace": NS},
            "spec": spec}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    from velashard.apiserver.http.server import APIServer

    server = APIServer(port=0, simulate_workloads=True).start()
    directory = tmp_path_factory.mktemp("definition-edits")
    admin_kubeconfig = server.write_kubeconfig(str(directory / "admin"))
    admin = KubeClient.from_kubeconfig(admin_kubeconfig, shard_id="test", qps=500, burst=500)
    install(admin, definitions=False)  # the CRDs served before the processes start; the chart brings definitions
    trust_authorless_apps(admin, "admin")  # the apps are admin's, recorded by the master's webhook
    release = helm.Config(kubeconfig_path=server.kubeconfig, namespace=RUNTIME_NS, storage_driver="memory")
    release.install(CHART, CHART_RELEASE, {"sharding": {"enabled": True}, "webhook": {"enabled": False}},
                    namespace=RUNTIME_NS, create_namespace=True, timeout=60)
    admin.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    webhook_port = free_port()
    procs = []
    try:
        for shard in ("master", *SHARDS):
            master = shard == "master"
            kubeconfig = token_kubeconfig(server, admin, MASTER_SA if master else SHARD_SA,
                                          directory / f"{shard}.kubeconfig")
            extra = ["--webhook-port", str(webhook_port), "--webhook-url", f"https://127.0.0.1:{webhook_port}"] \
                if master else []
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "velashard.cli.main", "--kubeconfig", kubeconfig, "--enable-sharding",
                 "--shard-id", shard, "--namespace", RUNTIME_NS, "--metrics-addr", "127.0.0.1:0",
                 "--health-addr", "127.0.0.1:0", *extra],
                stdout=open(directory / f"{shard}.log", "wb"), stderr=subprocess.STDOUT))
            shard_pod(admin, shard, True)
        wait_for_shard_leases(admin, "master", *SHARDS)
        eventually(lambda: admin.list(MUTATING_WEBHOOKS)["items"], timeout=30)
        eventually(webhook_serving(webhook_port), timeout=30)
        for name in USERS:
            admin.create(APPLICATIONS, application(name, traits=[{"type": "scaler"}]))
        for name in OTHERS:
            admin.create(APPLICATIONS, application(name))
        for name in ("waiting", "approved"):
            admin.create(APPLICATIONS, application(name, steps=[{"name": "approve", "type": "suspend"}]))

        def settled() -> bool:
            apps = {a["metadata"]["name"]: a for a in admin.list(APPLICATIONS, NS)["items"]}
            phases = {n: (a.get("status") or {}).get("status") for n, a in apps.items()}
            return len(apps) == 40 and all(shard_of(a) in SHARDS for a in apps.values()) and \
                all(phases[n] == "running" for n in USERS + OTHERS) and \
                phases["waiting"] == phases["approved"] == "workflowSuspending"
        eventually(settled, timeout=240, interval=1.0)
        resumed = subprocess.run([sys.executable, "-m", "velashard.cli.main", "workflow", "resume", "approved", "-n",
                                  NS, "--kubeconfig", admin_kubeconfig], capture_output=True, text=True, timeout=60)
        assert resumed.returncode == 0, resumed.stderr
        eventually(lambda: (admin.get(APPLICATIONS, "approved", NS).get("status") or {}).get("status") == "running",
                   timeout=60)
        time.sleep(3.0)  # the last status writes land
        yield server, admin, admin_kubeconfig, directory
    finally:
        stop_processes(procs)
        release.close()
        server.stop()


def snapshot(admin: KubeClient) -> tuple[dict, dict]:
    apps = {a["metadata"]["name"]: a for a in admin.list(APPLICATIONS, NS)["items"]}
    revisions = {r["metadata"]["name"]: r["spec"]["hash"] for r in admin.list(APPLICATION_REVISIONS, NS)["items"]}
    return apps, revisions


def app_writes(server, since: int) -> list[tuple[str, str, str]]:
    """What the controller processes wrote for apps since `since`, from the API server's audit log."""
    return [(r["verb"], r["resource"], r.get("name", "")) for r in server.audit.since(since)["items"]
            if "velashard/" in r["userAgent"] and "shard=" in r["userAgent"]
            and not any(f"shard={who})" in r["userAgent"] for who in ("test", "cli"))
            and r["verb"] in ("create", "update", "patch", "delete") and r.get("resource") in APP_RESOURCES]


def def_apply(kubeconfig: str, path) -> None:
    assert main(["def", "apply", str(path), "--kubeconfig", kubeconfig]) == 0


def edited(kubeconfig: str, directory, name: str, old: str, new: str, capsys):
    """`velashard def get NAME`, one default changed, as a platform team edits a definition file."""
    assert main(["def", "get", name, "--kubeconfig", kubeconfig]) == 0
    text = capsys.readouterr().out
    assert old in text, text
    path = directory / f"{name}.cue"
    path.write_text(text.replace(old, new))
    return path


def test_an_unused_definition_edit_writes_nothing_and_a_used_one_revises_exactly_its_users(fleet, capsys):
    server, admin, kubeconfig, directory = fleet
    apps, revisions = snapshot(admin)
    assert set(revisions) == {f"{n}-v1" for n in apps}
    waiting = apps["waiting"]["status"]["workflow"]
    assert [(s["name"], s["phase"]) for s in waiting["steps"]] == [("deploy", "succeeded"), ("approve", "suspending")]
    approved = apps["approved"]["status"]["workflow"]
    assert approved["finished"] and [s["phase"] for s in approved["steps"]] == ["succeeded", "succeeded"]

    since = server.audit.since(1 << 62)["lastSeq"]
    def_apply(kubeconfig, edited(kubeconfig, directory, "hpa", "max: *10 | int", "max: *20 | int", capsys))
    (directory / "unused-new.cue").write_text(NEW_TRAIT)
    def_apply(kubeconfig, directory / "unused-new.cue")
    capsys.readouterr()
    time.sleep(10.0)  # far longer than a definition event takes to reach the shards and their reconciles
    assert app_writes(server, since) == []
    after, after_revisions = snapshot(admin)
    assert after_revisions == revisions  # 0 new ApplicationRevisions
    for name, app in after.items():  # 0 workflow runs: every run and app object exactly as it was
        assert app["metadata"]["resourceVersion"] == apps[name]["metadata"]["resourceVersion"], name

    since = server.audit.since(1 << 62)["lastSeq"]
    def_apply(kubeconfig, edited(kubeconfig, directory, "scaler", "replicas: *1 | int", "replicas: *2 | int",
                                 capsys))
    expected = set(revisions) | {f"{n}-v2" for n in USERS}
    eventually(lambda: set(snapshot(admin)[1]) == expected, timeout=120, interval=1.0)
    eventually(lambda: all((a.get("status") or {}).get("status") == "running" and a["status"]["latestRevision"][
        "revision"] == 2 for a in admin.list(APPLICATIONS, NS)["items"] if a["metadata"]["name"] in USERS),
        timeout=120, interval=1.0)
    time.sleep(3.0)  # anything that would follow has its turn
    assert set(snapshot(admin)[1]) == expected  # new revisions for exactly scaler's users
    after, _ = snapshot(admin)
    for name in OTHERS + ["waiting", "approved"]:
        assert after[name]["metadata"]["resourceVersion"] == apps[name]["metadata"]["resourceVersion"], name
    assert after["waiting"]["status"]["workflow"] == waiting  # still waiting at the same step
    assert after["approved"]["status"]["workflow"] == approved  # still finished: no approval asked again
    written = app_writes(server, since)
    touched = {name for _, resource, name in written if resource in ("deployments", "services")}
    assert touched and touched <= set(USERS), touched - set(USERS)
    assert {name for verb, resource, name in written if resource == "applicationrevisions" and verb == "create"} == \
        {f"{n}-v2" for n in USERS}
