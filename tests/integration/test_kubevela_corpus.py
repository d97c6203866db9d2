"""KubeVela-style Applications (tests/integration/corpus/, written by us: one feature each plus realistic mixes)
run unchanged: each reaches `running` and produces the objects named on its first line (`# expect: Kind/name`)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import yaml

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.apiserver.http.server import APIServer
from velashard.core.controller import ApplicationController, Options
from velashard.core.install import install
from velashard.kube.client import KubeClient
from velashard.kube.manager import Manager
from velashard.kube.resources import (CONFIGMAPS, DAEMONSETS, DEPLOYMENTS, JOBS, NAMESPACES, SECRETS, SERVICEACCOUNTS,
                                      SERVICES, STATEFULSETS, Resource)
from tests.integration.helpers import trust_authorless_apps, update_latest

CORPUS = sorted(Path(__file__).parent.joinpath("corpus").glob("*.yaml"))
RESOURCES = {r.kind: r for r in (CONFIGMAPS, DAEMONSETS, DEPLOYMENTS, JOBS, SECRETS, SERVICEACCOUNTS, SERVICES,
                                 STATEFULSETS,
                                 Resource("batch", "v1", "cronjobs", "CronJob"),
                                 Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim"),
                                 Resource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler"),
                                 Resource("networking.k8s.io", "v1", "ingresses", "Ingress"))}


def _case(path: Path) -> tuple[dict, list[tuple[str, str]]]:
    first, _, rest = path.read_text().partition("\n")
    assert first.startswith("# expect: "), f"{path.name} must start with '# expect: Kind/name, ...'"
    expect = [tuple(item.strip().split("/", 1)) for item in first[len("# expect: "):].split(",")]
    return yaml.safe_load(rest), expect  # type: ignore[return-value]


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory):
    """Every corpus app applied at once into its own namespace; returns (kube, {name: status})."""
    server = APIServer(port=0, simulate_workloads=True).start()
    server.write_kubeconfig(str(tmp_path_factory.mktemp("corpus") / "kubeconfig"))
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test", qps=1000, burst=1000)
    trust_authorless_apps(kube)
    install(kube)
    manager = Manager(kube, "master")
    ApplicationController(manager, Options(workers=4, state_keep_interval=1.0, waiting_requeue=0.3))
    stop = threading.Event()
    thread = threading.Thread(target=manager.run, args=(stop,), daemon=True)
    thread.start()
    apps = {}
    for path in CORPUS:
        app, expect = _case(path)
        ns = f"corpus-{path.stem}"
        kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        if path.stem == "ref-objects":
            kube.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "seed"},
                                     "data": {"x": "1"}}, ns)
        app["metadata"]["namespace"] = ns
        kube.create(APPLICATIONS, app)
        apps[path.stem] = (ns, app["metadata"]["name"], expect)
    deadline = time.monotonic() + 60
    statuses: dict[str, dict] = {}
    while time.monotonic() < deadline:
        statuses = {stem: kube.get(APPLICATIONS, name, ns).get("status") or {} for stem, (ns, name, _) in apps.items()}
        if all(s.get("status") == "running" for s in statuses.values()):
            break
        time.sleep(0.5)
    yield kube, apps, statuses
    stop.set()
    thread.join(15)
    server.stop()


def test_corpus_is_large_enough():
    assert len(CORPUS) >= 30


@pytest.mark.parametrize("stem", [p.stem for p in CORPUS])
def test_app_runs_and_produces_its_objects(corpus_run, stem):
    kube, apps, statuses = corpus_run
    ns, name, expect = apps[stem]
    status = statuses[stem]
    assert status.get("status") == "running", f"{stem}: {status.get('status')}: {status.get('conditions')}"
    assert all(s["healthy"] for s in status["services"]), status["services"]
    for kind, obj_name in expect:
        obj = kube.get(RESOURCES[kind], obj_name, ns)
        assert obj["metadata"]["labels"][labels.APP_NAME] == name, f"{kind}/{obj_name}"
    # KubeVela's status shape, as scripts read it with kubectl -o jsonpath
    assert {s["namespace"] for s in status["services"]} == {ns} and status["services"][0]["cluster"] == "local"
    workflow = status["workflow"]
    assert workflow["finished"] and not workflow["terminated"] and workflow["mode"] == "StepByStep-DAG"
    assert workflow["appRevision"] == status["latestRevision"]["name"]
    assert all({"id", "name", "type", "phase", "firstExecuteTime", "lastExecuteTime"} <= set(step)
               for step in workflow["steps"])
    assert {(r["kind"], r["name"]) for r in status["appliedResources"]} >= set(expect)
    assert all(r["creator"] == "workflow" for r in status["appliedResources"])


def test_workflow_steps_outcomes(corpus_run):
    kube, apps, statuses = corpus_run
    steps = {s["name"]: s for s in statuses["workflow-steps"]["workflow"]["steps"]}
    assert steps["on-failure-only"]["phase"] == "skipped"
    assert [(s["name"], s["phase"]) for s in steps["rollout"]["subSteps"]] == [
        ("copy", "succeeded"), ("canary", "succeeded"), ("jobs", "succeeded")]
    copied = kube.get(CONFIGMAPS, "copied-level", "corpus-workflow-steps")
    assert copied["data"] == {"level": "http://api:8080"}  # read-object's output became apply-object's input


def test_resource_policies_take_effect(corpus_run):
    kube, apps, _ = corpus_run
    ns = "corpus-resource-policies"
    # apply-once on spec.replicas: a change made in the cluster (say, by an autoscaler) is left alone
    kube.patch(DEPLOYMENTS, "web", {"spec": {"replicas": 5}}, ns)
    # garbage-collect `never` keeps the ConfigMap when its component leaves the app
    update_latest(kube, APPLICATIONS, "resource-policies", ns, lambda app: app["spec"].update(
        components=[c for c in app["spec"]["components"] if c["name"] != "settings"]))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status = kube.get(APPLICATIONS, "resource-policies", ns).get("status") or {}
        if status.get("latestRevision", {}).get("revision") == 2 and status.get("status") == "running":
            break
        time.sleep(0.3)
    assert status.get("status") == "running"
    assert kube.get(CONFIGMAPS, "settings", ns)["data"] == {"level": "info"}
    assert kube.get(DEPLOYMENTS, "web", ns)["spec"]["replicas"] == 5


def test_failures_end_the_workflow_with_kubevela_status(corpus_run):
    kube = corpus_run[0]
    ns = "corpus-failures"
    kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    timeout_app = {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
                   "metadata": {"name": "waits-too-long", "namespace": ns},
                   "spec": {"components": [{"name": "w", "type": "worker", "properties": {"image": "busybox"}}],
                            "workflow": {"steps": [
                                {"name": "wait", "type": "depends-on-app", "timeout": "1s",
                                 "properties": {"name": "absent"}},
                                {"name": "deploy", "type": "deploy"},
                                {"name": "report", "type": "export2config", "if": "status.wait.timeout",
                                 "properties": {"configName": "timed-out", "data": {"step": "wait"}}}]}}}
    read_only_app = {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
                     "metadata": {"name": "reads-missing", "namespace": ns},
                     "spec": {"components": [{"name": "cfg", "type": "k8s-objects", "properties": {"objects": [
                         {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owned-elsewhere"}}]}}],
                              "policies": [{"name": "ro", "type": "read-only", "properties": {
                                  "rules": [{"selector": {"resourceTypes": ["ConfigMap"]}}]}}]}}
    kube.create(APPLICATIONS, timeout_app)
    kube.create(APPLICATIONS, read_only_app)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        a, b = (kube.get(APPLICATIONS, n, ns).get("status") or {} for n in ("waits-too-long", "reads-missing"))
        if a.get("status") == "workflowFailed" and b.get("status") == "workflowFailed":
            break
        time.sleep(0.3)
    assert a.get("status") == "workflowFailed", a.get("workflow")
    steps = {s["name"]: s for s in a["workflow"]["steps"]}
    assert (steps["wait"]["phase"], steps["wait"]["reason"]) == ("failed", "Timeout")
    assert steps["deploy"]["phase"] == "skipped" and steps["report"]["phase"] == "succeeded"
    assert a["workflow"]["terminated"] and a["workflow"]["finished"]
    assert kube.get(CONFIGMAPS, "timed-out", ns)["data"] == {"step": "wait"}
    assert b.get("status") == "workflowFailed"
    assert "read-only ConfigMap owned-elsewhere does not exist" in b["workflow"]["message"]
