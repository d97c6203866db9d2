"""WorkflowRuns and Workflows (kubevela/workflow's core.oam.dev/v1alpha1 API) run by the controller beside the
applications: a run's steps, its status as KubeVela writes it, a run of a Workflow template with its own context,
suspend/resume/terminate/restart through `velashard workflow` and through status patches (what kubectl does), and
a run acting as its author and no further."""

from __future__ import annotations

import subprocess
import sys

import pytest

from velashard.apis import labels
from velashard.apis.oam import WORKFLOW_RUNS, WORKFLOWS
from velashard.kube import errors
from velashard.kube.resources import CONFIGMAPS, EVENTS
from tests.integration.helpers import AUTHOR, CONFIGMAP_RULES, controller_cluster, eventually, namespace_for_test

@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from controller_cluster(tmp_path_factory, workflow_runs=True, author_rules=CONFIGMAP_RULES)


@pytest.fixture
def ns(cluster, request):
    return namespace_for_test(cluster[1], request, "wr-")


def workflow_run(name: str, ns: str, steps: list[dict] | None = None, **spec) -> dict:
    body = {"apiVersion": "core.oam.dev/v1alpha1", "kind": "WorkflowRun", "metadata": {"name": name, "namespace": ns},
            "spec": dict(spec)}
    if steps is not None:
        body["spec"]["workflowSpec"] = {"steps": steps}
    return body


def configmap(name: str, ns: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}


def status(kube, name: str, ns: str) -> dict:
    return kube.get(WORKFLOW_RUNS, name, ns).get("status") or {}


def phase(kube, name: str, ns: str) -> str:
    return status(kube, name, ns).get("status", "")


def steps(kube, name: str, ns: str) -> dict[str, dict]:
    return {s["name"]: s for top in status(kube, name, ns).get("steps") or []
            for s in (top, *(top.get("subSteps") or []))}


def cli(server, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "velashard.cli.main", "--kubeconfig", server.kubeconfig,
                           "workflow", *args], capture_output=True, text=True, timeout=60)


def test_a_run_applies_suspends_is_resumed_and_succeeds(cluster, ns):
    server, kube = cluster
    kube.create(WORKFLOW_RUNS, workflow_run("release", ns, [
        {"name": "write", "type": "apply-object", "properties": {"value": configmap("made", ns, size="large")}},
        {"type": "suspend"},
        {"name": "tell", "type": "print-message-in-status", "properties": {"message": "released"}}]))
    eventually(lambda: phase(kube, "release", ns) == "suspending", timeout=30)
    assert steps(kube, "release", ns)["step-1"]["phase"] == "suspending"  # KubeVela's name for an unnamed step
    made = kube.get(CONFIGMAPS, "made", ns)
    assert made["metadata"]["labels"][labels.WORKFLOW_RUN_NAME] == "release"
    out = cli(server, "resume", "release", "-n", ns)
    assert out.returncode == 0 and "Successfully resume workflow: release" in out.stdout, out.stderr
    eventually(lambda: phase(kube, "release", ns) == "succeeded", timeout=30)
    final = status(kube, "release", ns)
    assert final["finished"] and not final["suspend"] and not final["terminated"] and final["endTime"]
    assert final["mode"] == {"steps": "StepByStep", "subSteps": "DAG"}
    assert steps(kube, "release", ns)["tell"]["message"] == "released"
    ready = next(c for c in final["conditions"] if c["type"] == "WorkflowRun")
    assert (ready["status"], ready["reason"]) == ("True", "Available")
    assert final["contextBackend"]["name"] == "workflow-release-context"
    # kubevela/workflow's Event on the run itself (core/events.py resolves the involved object by kind)
    execute = eventually(lambda: [e for e in kube.list_all(EVENTS, ns)[0] if e["reason"] == "Execute"], timeout=30)
    assert [(e["involvedObject"]["kind"], e["involvedObject"]["apiVersion"], e["involvedObject"]["name"], e["type"])
            for e in execute] == [("WorkflowRun", "core.oam.dev/v1alpha1", "release", "Normal")]


def test_a_run_of_a_template_sees_its_context_and_waits_for_the_template(cluster, ns):
    _, kube = cluster
    kube.create(WORKFLOW_RUNS, workflow_run("deploy-run", ns, workflowRef="deploy-template", context={"env": "test"}))
    eventually(lambda: phase(kube, "deploy-run", ns) == "initializing", timeout=30)
    waiting = next(c for c in status(kube, "deploy-run", ns)["conditions"] if c["type"] == "WorkflowRun")
    assert waiting["status"] == "False" and 'Workflow "deploy-template" not found' in waiting["message"]
    kube.create(WORKFLOWS, {"apiVersion": "core.oam.dev/v1alpha1", "kind": "Workflow",
                            "metadata": {"name": "deploy-template", "namespace": ns},
                            "mode": {"steps": "DAG"},
                            "steps": [{"name": "dev", "type": "apply-object", "if": 'context.env == "dev"',
                                       "properties": {"value": configmap("dev", ns)}},
                                      {"name": "test", "type": "apply-object",
                                       "if": 'context.env == "test" && context.name == "deploy-run"',
                                       "properties": {"value": configmap("for-test", ns)}}]})
    eventually(lambda: phase(kube, "deploy-run", ns) == "succeeded", timeout=30)
    found = steps(kube, "deploy-run", ns)
    assert (found["dev"]["phase"], found["test"]["phase"]) == ("skipped", "succeeded")
    final = status(kube, "deploy-run", ns)
    assert final["mode"] == {"steps": "DAG", "subSteps": "DAG"}
    assert [c["status"] for c in final["conditions"] if c["type"] == "WorkflowRun"] == ["True"]
    assert kube.get(CONFIGMAPS, "for-test", ns)
    with pytest.raises(errors.NotFound):
        kube.get(CONFIGMAPS, "dev", ns)


def test_terminate_restart_and_status_patches_as_kubectl_sends_them(cluster, ns):
    server, kube = cluster
    kube.create(WORKFLOW_RUNS, workflow_run("gated", ns, [
        {"name": "gate", "type": "wait-for-config", "properties": {"name": "go"}}]))
    eventually(lambda: steps(kube, "gated", ns).get("gate", {}).get("reason") == "Wait", timeout=30)
    assert cli(server, "terminate", "gated", "-n", ns, "--type", "workflow").returncode == 0
    eventually(lambda: phase(kube, "gated", ns) == "terminated", timeout=30)
    gate = steps(kube, "gated", ns)["gate"]
    assert (gate["phase"], gate["reason"]) == ("failed", "Terminate")
    first = status(kube, "gated", ns)["startTime"]
    out = cli(server, "restart", "gated", "-n", ns)
    assert out.returncode == 0, out.stderr
    eventually(lambda: steps(kube, "gated", ns).get("gate", {}).get("reason") == "Wait" and
               not status(kube, "gated", ns).get("finished"), timeout=30)
    assert status(kube, "gated", ns)["startTime"] >= first
    # kubectl patch workflowrun gated --subresource status --type merge -p '{"status":{"suspend":true}}'
    kube.patch(WORKFLOW_RUNS, "gated", {"status": {"suspend": True}}, ns, subresource="status")
    eventually(lambda: phase(kube, "gated", ns) == "suspending", timeout=30)
    kube.create(CONFIGMAPS, configmap("go", ns, ready="true"))
    kube.patch(WORKFLOW_RUNS, "gated", {"status": {"suspend": False}}, ns, subresource="status")
    eventually(lambda: phase(kube, "gated", ns) == "succeeded", timeout=30)
    assert cli(server, "rollback", "gated", "-n", ns).stderr.strip().endswith("can not rollback a WorkflowRun")


def test_a_run_acts_as_its_author_and_no_further(cluster):
    _, kube = cluster
    run = workflow_run("janes", "authored", [
        {"name": "here", "type": "apply-object", "properties": {"value": configmap("mine", "authored")}},
        {"name": "there", "type": "apply-object", "properties": {"value": configmap("theirs", "elsewhere")}}])
    run["metadata"]["annotations"] = {labels.APP_USERNAME: AUTHOR}  # what the master's webhook records
    kube.create(WORKFLOW_RUNS, run)
    eventually(lambda: steps(kube, "janes", "authored").get("there", {}).get("phase") == "failed", timeout=30)
    assert kube.get(CONFIGMAPS, "mine", "authored")
    there = steps(kube, "janes", "authored")["there"]
    assert AUTHOR in there["message"] and "forbidden" in there["message"].lower(), there
    with pytest.raises(errors.NotFound):
        kube.get(CONFIGMAPS, "theirs", "elsewhere")
    authorized = eventually(lambda: next((c for c in status(kube, "janes", "authored").get("conditions") or []
                                          if c["type"] == "Authorized" and c["status"] == "False"), None),
                            timeout=30)
    assert AUTHOR in authorized["message"]
