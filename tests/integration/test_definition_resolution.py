"""Definitions as KubeVela resolves them, against the embedded API server with the Application controller: the
app's namespace first, then vela-system, never another namespace (a tenant's same-named type reaches only its
own apps), for the controller, the webhook's component check and the CLI alike; and a definition's change makes a
revision for exactly the apps that use it, measured from the API server (revisions, resourceVersions, the audit
log), never asking an approval twice."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from velashard.apis.oam import (APPLICATION_REVISIONS, APPLICATIONS, COMPONENT_DEFINITIONS, SYSTEM_NAMESPACE,
                                TRAIT_DEFINITIONS, WORKFLOW_STEP_DEFINITIONS)
from velashard.apiserver.http.server import APIServer
from velashard.cli.main import main
from velashard.core.controller import ApplicationController, Options
from velashard.core.install import install
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.manager import Manager
from velashard.kube.resources import CONFIGMAPS, DEPLOYMENTS, NAMESPACES, SERVICES
from velashard.webhook.lookups import ClusterLookups
from tests.integration.helpers import eventually, trust_authorless_apps, update_latest

# What a tenant who may write ComponentDefinitions in team-a tries: a `webservice` of its own that copies an app's
# properties into a ConfigMap in team-a.
LEAK = """
parameter: {image: string, ...}
output: {apiVersion: "v1", kind: "ConfigMap", metadata: {name: "leak-" + context.appName, namespace: "team-a"},
	data: image: parameter.image}
"""
MORE_REPLICAS = "parameter: replicas: *1 | int\npatch: spec: replicas: 9\n"


def definition(kind: str, name: str, namespace: str, template: str) -> dict:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": kind, "metadata": {"name": name, "namespace": namespace},
            "spec": {"schematic": {"cue": {"template": template}}}}


def application(name: str, ns: str, ctype: str = "webservice", traits: list | None = None, **extra) -> dict:
    meta = {"name": name, "namespace": ns, **({"annotations": extra.pop("annotations")} if "annotations" in extra
                                               else {})}
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": meta,
            "spec": {"components": [{"name": name, "type": ctype, "properties": {"image": "nginx:1"},
                                     "traits": traits or []}], **extra}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    server = APIServer(port=0, simulate_workloads=True).start()
    kubeconfig = server.write_kubeconfig(str(tmp_path_factory.mktemp("defres") / "kubeconfig"))
    kube = KubeClient.from_kubeconfig(kubeconfig, shard_id="test", qps=500, burst=500)
    trust_authorless_apps(kube)
    install(kube)
    for ns in ("team-a", "team-b", "fleet"):
        kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    manager = Manager(kube, "master")
    ApplicationController(manager, Options(workers=2, waiting_requeue=0.5))
    stop = threading.Event()
    thread = threading.Thread(target=manager.run, args=(stop,), daemon=True)
    thread.start()
    yield server, kube, kubeconfig
    stop.set()
    thread.join(15)
    server.stop()


def status(kube: KubeClient, name: str, ns: str) -> dict:
    return kube.get(APPLICATIONS, name, ns).get("status") or {}


def running(kube: KubeClient, name: str, ns: str) -> dict | None:
    got = status(kube, name, ns)
    return got if got.get("status") == "running" else None


def absent(kube: KubeClient, res, name: str, ns: str) -> bool:
    try:
        kube.get(res, name, ns)
    except errors.NotFound:
        return True
    return False


def test_a_tenants_same_named_types_reach_only_its_own_apps(cluster):
    _, kube, _ = cluster
    kube.create(APPLICATIONS, application("shop", "team-b", traits=[{"type": "scaler", "properties": {"replicas": 2}}]))
    before = eventually(lambda: running(kube, "shop", "team-b"), timeout=30)
    deployment = kube.get(DEPLOYMENTS, "shop", "team-b")
    assert deployment["spec"]["replicas"] == 2
    kube.create(COMPONENT_DEFINITIONS, definition("ComponentDefinition", "webservice", "team-a", LEAK))
    kube.create(TRAIT_DEFINITIONS, definition("TraitDefinition", "scaler", "team-a", MORE_REPLICAS))
    # team-a's own apps use team-a's types; a type team-a does not define comes from vela-system
    kube.create(APPLICATIONS, application("own", "team-a", traits=[{"type": "scaler"}]))
    kube.create(APPLICATIONS, application("fallback", "team-a", ctype="worker", traits=[{"type": "scaler"}]))
    eventually(lambda: running(kube, "own", "team-a") and running(kube, "fallback", "team-a"), timeout=30)
    assert kube.get(CONFIGMAPS, "leak-own", "team-a")["data"] == {"image": "nginx:1"}
    assert absent(kube, DEPLOYMENTS, "own", "team-a")
    assert kube.get(DEPLOYMENTS, "fallback", "team-a")["spec"]["replicas"] == 9  # team-a's scaler
    time.sleep(1.0)  # whatever the tenant's definitions would have woken in team-b had its turn
    # team-b's app never saw them: same revision, its Deployment untouched, nothing copied into team-a
    after = status(kube, "shop", "team-b")
    assert after["latestRevision"] == before["latestRevision"]
    assert kube.get(DEPLOYMENTS, "shop", "team-b")["metadata"]["resourceVersion"] == \
        deployment["metadata"]["resourceVersion"]
    assert absent(kube, CONFIGMAPS, "leak-shop", "team-a")
    # the tenant removes its webservice: its app falls back to vela-system's, in a new revision
    kube.delete(COMPONENT_DEFINITIONS, "webservice", "team-a")
    eventually(lambda: not absent(kube, DEPLOYMENTS, "own", "team-a") and absent(kube, CONFIGMAPS, "leak-own",
                                                                                  "team-a"), timeout=30)
    assert status(kube, "own", "team-a")["latestRevision"]["revision"] == 2
    assert status(kube, "shop", "team-b")["latestRevision"] == before["latestRevision"]


def test_the_webhooks_component_check_and_the_cli_resolve_as_the_controller(cluster, tmp_path, capsys):
    _, kube, kubeconfig = cluster
    kube.create(COMPONENT_DEFINITIONS, definition("ComponentDefinition", "only-a", "team-a", LEAK))
    lookups = ClusterLookups(kube, SYSTEM_NAMESPACE, ttl=0.01)
    assert lookups.check_components(application("x", "team-a", ctype="only-a")) is None
    assert 'unknown component type "only-a"' in lookups.check_components(application("x", "team-b", ctype="only-a"))
    assert lookups.check_components(application("x", "team-b", ctype="worker")) is None  # vela-system's

    assert main(["def", "show", "only-a", "-n", "team-a", "--kubeconfig", kubeconfig]) == 0
    assert "(component, namespace team-a)" in capsys.readouterr().out
    assert main(["def", "show", "worker", "-n", "team-a", "--kubeconfig", kubeconfig]) == 0
    assert "(component, namespace vela-system)" in capsys.readouterr().out  # the fallback
    assert main(["def", "show", "only-a", "-n", "team-b", "--kubeconfig", kubeconfig]) == 2
    assert 'no definition named "only-a"' in capsys.readouterr().err

    path = tmp_path / "app.yaml"
    path.write_text('{"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": {"name": "d"}, '
                    '"spec": {"components": [{"name": "d", "type": "only-a", "properties": {"image": "i"}}]}}')
    assert main(["dry-run", "-f", str(path), "-n", "team-a", "--kubeconfig", kubeconfig]) == 0
    assert "name: leak-d" in capsys.readouterr().out
    assert main(["dry-run", "-f", str(path), "-n", "team-b", "--kubeconfig", kubeconfig]) == 2
    assert 'unknown component type "only-a"' in capsys.readouterr().err


def workflow_cli(kubeconfig: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "velashard.cli.main", "workflow", *args, "--kubeconfig",
                           kubeconfig], capture_output=True, text=True, timeout=60)


def with_steps(name: str, *steps: dict) -> dict:
    body = application(name, "fleet")
    body["spec"]["workflow"] = {"steps": [{"name": "deploy", "type": "apply-component",
                                           "properties": {"component": name}}, *steps]}
    return body


def gated(name: str) -> dict:
    return with_steps(name, {"name": "approve", "type": "suspend"})


def revisions(kube: KubeClient) -> dict[str, int]:
    return {r["metadata"]["name"]: r["spec"]["revision"] for r in kube.list(APPLICATION_REVISIONS, "fleet")["items"]}


def test_a_definition_edit_makes_revisions_for_exactly_its_users_and_asks_no_approval_twice(cluster):
    server, kube, kubeconfig = cluster
    kube.create(APPLICATIONS, application("plain", "fleet"))
    kube.create(APPLICATIONS, application("scaled", "fleet", traits=[{"type": "scaler", "properties": {"replicas": 2}}]))
    kube.create(APPLICATIONS, application("pinned", "fleet", traits=[{"type": "scaler"}],
                                          annotations={"app.oam.dev/publishVersion": "v1"}))
    kube.create(APPLICATIONS, gated("waiting"))
    kube.create(APPLICATIONS, gated("approved"))
    kube.create(APPLICATIONS, with_steps("stepper", {"name": "say", "type": "print-message-in-status",
                                                      "properties": {"message": "hello"}}))
    for name in ("plain", "scaled", "pinned", "stepper"):
        eventually(lambda name=name: running(kube, name, "fleet"), timeout=30)
    for name in ("waiting", "approved"):
        eventually(lambda name=name: status(kube, name, "fleet").get("status") == "workflowSuspending", timeout=30)
    out = workflow_cli(kubeconfig, "resume", "approved", "-n", "fleet")
    assert out.returncode == 0, out.stderr
    eventually(lambda: running(kube, "approved", "fleet"), timeout=30)
    time.sleep(1.0)  # the last status writes land
    apps = {a["metadata"]["name"]: a for a in kube.list(APPLICATIONS, "fleet")["items"]}
    objects = {(o["kind"], o["metadata"]["name"]): o["metadata"]["resourceVersion"] for res in (DEPLOYMENTS, SERVICES)
               for o in kube.list(res, "fleet")["items"]}
    recorded = revisions(kube)
    assert recorded == {f"{n}-v1": 1 for n in apps}

    # an unused trait edited, a new unused one, an unused step's definition edited: nothing at all is written
    since = server.audit.since(1 << 62)["lastSeq"]
    update_latest(kube, TRAIT_DEFINITIONS, "hpa", SYSTEM_NAMESPACE,
                  lambda d: d["spec"]["schematic"]["cue"].update(template=d["spec"]["schematic"]["cue"]["template"]
                                                                  + "\n// edited\n"))
    kube.create(TRAIT_DEFINITIONS, definition("TraitDefinition", "brand-new", SYSTEM_NAMESPACE, MORE_REPLICAS))
    update_latest(kube, WORKFLOW_STEP_DEFINITIONS, "notification", SYSTEM_NAMESPACE,
                  lambda d: d["spec"]["schematic"]["cue"].update(template=d["spec"]["schematic"]["cue"]["template"]
                                                                  + "\n// edited\n"))
    time.sleep(3.0)
    writes = [r for r in server.audit.since(since)["items"] if "shard=master" in r["userAgent"]
              and r["verb"] not in ("get", "list", "watch")]
    assert writes == [], [(r["verb"], r["resource"], r.get("name")) for r in writes]
    assert revisions(kube) == recorded

    # scaler edited: exactly its users get a new revision; publishVersion keeps pinned's run
    update_latest(kube, TRAIT_DEFINITIONS, "scaler", SYSTEM_NAMESPACE,
                  lambda d: d["spec"]["schematic"]["cue"].update(template=d["spec"]["schematic"]["cue"]["template"]
                                                                  + "\npatch: metadata: annotations: scaled: \"yes\"\n"))
    eventually(lambda: {"scaled-v2", "pinned-v2"} <= set(revisions(kube)), timeout=30)
    # The revision is recorded before the pass applies what it renders, and the app was running already: wait
    # for the new patch on its Deployment, then for the status to say so.
    eventually(lambda: (kube.get(DEPLOYMENTS, "scaled", "fleet")["metadata"].get("annotations") or {}).get(
        "scaled") == "yes", timeout=30)
    eventually(lambda: running(kube, "scaled", "fleet") and (status(kube, "scaled", "fleet").get(
        "latestRevision") or {}).get("name") == "scaled-v2", timeout=30)
    time.sleep(1.0)
    assert set(revisions(kube)) == set(recorded) | {"scaled-v2", "pinned-v2"}
    now = {a["metadata"]["name"]: a for a in kube.list(APPLICATIONS, "fleet")["items"]}
    pinned = now["pinned"]["status"]["workflow"]
    assert pinned["appRevision"] == "v1" and pinned["startTime"] == apps["pinned"]["status"]["workflow"]["startTime"]
    for name in ("plain", "waiting", "approved", "stepper"):  # not users: their runs and objects as they were
        assert now[name]["status"]["workflow"] == apps[name]["status"]["workflow"], name
        assert now[name]["metadata"]["resourceVersion"] == apps[name]["metadata"]["resourceVersion"], name
    assert now["waiting"]["status"]["status"] == "workflowSuspending"
    assert [s["phase"] for s in now["approved"]["status"]["workflow"]["steps"]] == ["succeeded"] * 2
    current = {(o["kind"], o["metadata"]["name"]): o["metadata"]["resourceVersion"] for res in (DEPLOYMENTS, SERVICES)
               for o in kube.list(res, "fleet")["items"]}
    assert {k: v for k, v in current.items() if k[1] not in ("scaled", "pinned")} == \
        {k: v for k, v in objects.items() if k[1] not in ("scaled", "pinned")}

    # a step's definition edited: a new revision for the app whose workflow runs it, no other
    update_latest(kube, WORKFLOW_STEP_DEFINITIONS, "print-message-in-status", SYSTEM_NAMESPACE,
                  lambda d: d["spec"]["schematic"]["cue"].update(template=d["spec"]["schematic"]["cue"]["template"]
                                                                  + "\n// edited\n"))
    eventually(lambda: "stepper-v2" in revisions(kube), timeout=30)
    eventually(lambda: running(kube, "stepper", "fleet"), timeout=30)
    time.sleep(1.0)
    assert set(revisions(kube)) == set(recorded) | {"scaled-v2", "pinned-v2", "stepper-v2"}
    assert status(kube, "waiting", "fleet")["status"] == "workflowSuspending"
    assert status(kube, "approved", "fleet")["workflow"] == apps["approved"]["status"]["workflow"]
