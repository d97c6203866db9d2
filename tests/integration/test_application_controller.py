"""The Application controller end to end against the embedded API server with simulated workloads."""

from __future__ import annotations


import pytest

from velashard.apis import labels
from velashard.apis.oam import (APPLICATION_REVISIONS, APPLICATIONS, POLICY_DEFINITIONS, RESOURCE_TRACKERS,
                                SYSTEM_NAMESPACE)
from velashard.core.install import install
from velashard.kube import errors
from velashard.kube.resources import CONFIGMAPS, DEPLOYMENTS, JOBS, SERVICES
from velashard.workflow import operations
from tests.integration.helpers import controller_cluster, eventually, namespace_for_test, update_latest


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from controller_cluster(tmp_path_factory)


@pytest.fixture
def ns(cluster, request):
    return namespace_for_test(cluster[1], request, "app-")


def application(name: str, ns: str, components: list[dict], **spec) -> dict:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": name, "namespace": ns}, "spec": {"components": components, **spec}}


def webservice(image: str = "nginx:1.25", traits: list | None = None, name: str = "web") -> dict:
    return {"name": name, "type": "webservice", "properties": {"image": image, "ports": [{"port": 80}]},
            "traits": traits or []}


def app_status(kube, name, ns) -> dict:
    return kube.get(APPLICATIONS, name, ns).get("status") or {}


def wait_phase(kube, name, ns, phase, timeout=20.0) -> dict:
    return eventually(lambda: (lambda s: s if s.get("status") == phase else None)(app_status(kube, name, ns)),
                      timeout=timeout)


def missing(kube, res, name, ns) -> bool:
    try:
        kube.get(res, name, ns)
    except errors.NotFound:
        return True
    return False


def test_webservice_with_scaler_and_expose_lifecycle(cluster, ns):
    _, kube = cluster
    kube.create(APPLICATIONS, application("demo", ns, [webservice(traits=[
        {"type": "scaler", "properties": {"replicas": 3}}, {"type": "expose", "properties": {"port": [8080]}}])]))
    status = wait_phase(kube, "demo", ns, "running")
    assert status["services"][0]["healthy"] is True
    assert status["latestRevision"]["revision"] == 1
    deploy = kube.get(DEPLOYMENTS, "web", ns)
    assert deploy["spec"]["replicas"] == 3
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.25"
    assert deploy["metadata"]["labels"][labels.APP_NAME] == "demo"
    assert deploy["metadata"]["labels"][labels.APP_COMPONENT] == "web"
    svc = kube.get(SERVICES, "web", ns)
    assert svc["spec"]["ports"][0]["port"] == 8080
    revision = kube.get(APPLICATION_REVISIONS, "demo-v1", ns)
    assert revision["metadata"]["labels"] == {labels.APP_NAME: "demo", labels.APP_NAMESPACE: ns}
    assert revision["metadata"]["ownerReferences"][0]["name"] == "demo"
    tracker = kube.get(RESOURCE_TRACKERS, f"demo-{ns}")
    assert {(r["kind"], r["name"]) for r in tracker["spec"]["managedResources"]} == {("Deployment", "web"),
                                                                                     ("Service", "web")}

    # Edit: new image, expose removed -> revision 2, Deployment updated, Service garbage-collected.
    update_latest(kube, APPLICATIONS, "demo", ns, lambda app: app["spec"].update(components=[
        webservice(image="nginx:1.26", traits=[{"type": "scaler", "properties": {"replicas": 3}}])]))
    eventually(lambda: app_status(kube, "demo", ns).get("latestRevision", {}).get("revision") == 2)
    eventually(lambda: missing(kube, SERVICES, "web", ns))
    assert kube.get(DEPLOYMENTS, "web", ns)["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.26"
    wait_phase(kube, "demo", ns, "running")

    # A deleted managed Deployment comes back.
    kube.delete(DEPLOYMENTS, "web", ns)
    eventually(lambda: not missing(kube, DEPLOYMENTS, "web", ns))

    # Fields set by others survive re-applies.
    kube.patch(DEPLOYMENTS, "web", {"metadata": {"annotations": {"someone/else": "x"}}}, ns)
    kube.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "unrelated", "namespace": ns}})
    kube.delete(APPLICATIONS, "demo", ns)
    eventually(lambda: missing(kube, APPLICATIONS, "demo", ns))
    assert missing(kube, DEPLOYMENTS, "web", ns)
    assert missing(kube, RESOURCE_TRACKERS, f"demo-{ns}", None)
    assert missing(kube, APPLICATION_REVISIONS, "demo-v1", ns) and missing(kube, APPLICATION_REVISIONS, "demo-v2", ns)
    assert not missing(kube, CONFIGMAPS, "unrelated", ns)  # nothing else is deleted


def test_errors_become_conditions(cluster, ns):
    _, kube = cluster
    kube.create(APPLICATIONS, application("unknown", ns, [{"name": "x", "type": "no-such-type"}]))
    kube.create(APPLICATIONS, application("badparam", ns, [{"name": "x", "type": "webservice",
                                                            "properties": {"image": 5}}]))
    kube.create(APPLICATIONS, application("badtrait", ns, [webservice(traits=[{"type": "scaler",
                                                                                "properties": {"replicas": "x"}}])]))
    for name, reason, fragment in [("unknown", "UnknownType", 'unknown component type "no-such-type"'),
                                   ("badparam", "InvalidParameter", 'parameter "image"'),
                                   ("badtrait", "InvalidParameter",
                                    'trait "scaler": trait definition "scaler": parameter "replicas"')]:
        status = wait_phase(kube, name, ns, "rendering")
        rendered = next(c for c in status["conditions"] if c["type"] == "Rendered")
        assert rendered["status"] == "False" and rendered["reason"] == reason and fragment in rendered["message"]


def test_resource_owned_by_another_app_is_not_adopted(cluster, ns):
    _, kube = cluster
    kube.create(APPLICATIONS, application("first", ns, [webservice(name="shared")]))
    wait_phase(kube, "first", ns, "running")
    kube.create(APPLICATIONS, application("second", ns, [webservice(name="shared", image="evil:1")]))
    status = wait_phase(kube, "second", ns, "workflowFailed")
    assert "owned by application" in status["workflow"]["message"]
    deploy = kube.get(DEPLOYMENTS, "shared", ns)
    assert deploy["metadata"]["labels"][labels.APP_NAME] == "first"
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.25"
    kube.delete(APPLICATIONS, "second", ns)
    eventually(lambda: missing(kube, APPLICATIONS, "second", ns))
    assert not missing(kube, DEPLOYMENTS, "shared", ns)  # never deletes another app's resource


def test_ref_objects_clone_a_deployment_with_traits(cluster, ns):
    _, kube = cluster
    kube.create(DEPLOYMENTS, {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
        "name": "vela-core", "namespace": ns, "labels": {"app.kubernetes.io/name": "vela-core",
                                                          "controller.core.oam.dev/shard-id": "master"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": "vela-core"}},
                 "template": {"metadata": {"labels": {"app.kubernetes.io/name": "vela-core"}},
                              "spec": {"containers": [{"name": "vela-core", "image": "velashard:dev",
                                                       "args": ["--enable-sharding", "--schedulable-shards="]}]}}}})
    kube.create(APPLICATIONS, application("shards", ns, [{
        "name": "shard-0", "type": "ref-objects",
        "properties": {"objects": [{"resource": "deployments", "group": "apps", "name": "vela-core"}]},
        "traits": [
            {"type": "command", "properties": {"containerName": "vela-core", "delArgs": ["--schedulable-shards="],
                                               "addArgs": ["--shard-id=shard-0"]}},
            {"type": "json-merge-patch", "properties": {"metadata": {
                "name": "vela-core-shard-0", "labels": {"controller.core.oam.dev/shard-id": "shard-0"}}}},
            {"type": "json-patch", "properties": {"operations": [
                {"op": "replace", "path": "/spec/replicas", "value": 2}]}}]}]))
    wait_phase(kube, "shards", ns, "running")
    clone = kube.get(DEPLOYMENTS, "vela-core-shard-0", ns)
    assert clone["spec"]["template"]["spec"]["containers"][0]["args"] == ["--enable-sharding", "--shard-id=shard-0"]
    assert clone["metadata"]["labels"]["controller.core.oam.dev/shard-id"] == "shard-0"
    assert clone["spec"]["replicas"] == 2
    assert kube.get(DEPLOYMENTS, "vela-core", ns)["metadata"]["labels"]["controller.core.oam.dev/shard-id"] == "master"


def test_workflow_depends_on_and_suspend_resume(cluster, ns):
    _, kube = cluster
    kube.create(APPLICATIONS, application("flow", ns, [webservice(name="db"), webservice(name="api")], workflow={
        "steps": [{"name": "db", "type": "apply-component", "properties": {"component": "db"}},
                  {"name": "approve", "type": "suspend"},
                  {"name": "api", "type": "apply-component", "properties": {"component": "api"}}]}))
    status = wait_phase(kube, "flow", ns, "workflowSuspending")
    # as in KubeVela, a step is in the status once the workflow has reached it
    assert [s["phase"] for s in status["workflow"]["steps"]] == ["succeeded", "suspending"]
    assert missing(kube, DEPLOYMENTS, "api", ns)
    kube.patch_status(APPLICATIONS, "flow", {"status": {"workflow": operations.resume(status["workflow"])}}, ns)
    status = wait_phase(kube, "flow", ns, "running")
    assert [s["phase"] for s in status["workflow"]["steps"]] == ["succeeded"] * 3
    assert not missing(kube, DEPLOYMENTS, "api", ns)


def test_install_is_idempotent(cluster):
    _, kube = cluster
    lines: list[str] = []
    install(kube, report=lines.append)
    assert lines and all(line.endswith(" unchanged") for line in lines), lines


def test_resume_cli_and_kubectl_columns(cluster, ns, tmp_path):
    import shutil
    import subprocess
    import sys

    server, kube = cluster
    kube.create(APPLICATIONS, application("gate", ns, [webservice(name="svc")], workflow={
        "steps": [{"name": "hold", "type": "suspend"}, {"name": "go", "type": "deploy"}]}))
    wait_phase(kube, "gate", ns, "workflowSuspending")
    out = subprocess.run([sys.executable, "-m", "velashard.cli.main", "resume", "gate", "-n", ns, "--kubeconfig",
                          server.kubeconfig], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "resumed" in out.stdout
    wait_phase(kube, "gate", ns, "running")
    missing_app = subprocess.run([sys.executable, "-m", "velashard.cli.main", "resume", "nope", "-n", ns,
                                  "--kubeconfig", server.kubeconfig], capture_output=True, text=True, timeout=60)
    assert missing_app.returncode == 2 and "not found" in missing_app.stderr
    if shutil.which("kubectl"):
        table = subprocess.run(["kubectl", "--kubeconfig", server.kubeconfig, "--cache-dir", str(tmp_path), "get",
                                "app", "-n", ns], capture_output=True, text=True, timeout=60).stdout
        header, row = table.splitlines()[:2]
        assert header.split() == ["NAME", "COMPONENT", "TYPE", "PHASE", "HEALTHY", "STATUS", "AGE"]
        assert row.split()[:5] == ["gate", "svc", "webservice", "running", "true"]


def test_depends_on_override_policy_and_revision_limit(cluster, ns):
    _, kube = cluster
    db = {"name": "db", "type": "task", "properties": {"image": "busybox"}}
    api = {**webservice(name="api"), "dependsOn": ["db"]}
    kube.create(APPLICATIONS, application("stack", ns, [api, db], policies=[
        {"name": "prod", "type": "override", "properties": {"components": [
            {"name": "api", "properties": {"image": "nginx:prod"},
             "traits": [{"type": "scaler", "properties": {"replicas": 2}}]}]}},
        {"name": "where", "type": "topology", "properties": {"clusters": ["local"]}},
        {"name": "hooks", "type": "webhook-notification"}]))
    status = wait_phase(kube, "stack", ns, "running")
    deploy = kube.get(DEPLOYMENTS, "api", ns)
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:prod"
    assert deploy["spec"]["replicas"] == 2
    job = kube.get(JOBS, "stack-db", ns)  # KubeVela names a task's Job <app>-<component>
    # The dependent was created only after what it depends on had completed.
    assert job["metadata"]["creationTimestamp"] <= deploy["metadata"]["creationTimestamp"]
    unsupported = next(c for c in status["conditions"] if c["type"] == "PoliciesSupported")
    assert unsupported["status"] == "False"
    assert unsupported["message"].startswith("policies of type webhook-notification are kept but not supported")
    for i in range(12):  # twelve edits: only the newest ten revisions are kept
        kube.patch(APPLICATIONS, "stack", {"metadata": {"annotations": {"edit": str(i)}},
                                           "spec": {"components": [api, {**db, "properties": {
                                               "image": f"busybox:{i}"}}]}}, ns)
        eventually(lambda i=i: app_status(kube, "stack", ns).get("latestRevision", {}).get("revision") == i + 2)
    revisions = kube.list(APPLICATION_REVISIONS, ns, label_selector=f"{labels.APP_NAME}=stack")["items"]
    assert sorted(r["spec"]["revision"] for r in revisions) == list(range(4, 14))


def test_policy_definition_outputs_are_applied_and_collected(cluster, ns):
    _, kube = cluster
    kube.create(POLICY_DEFINITIONS, {
        "apiVersion": "core.oam.dev/v1beta1", "kind": "PolicyDefinition",
        "metadata": {"name": "team-settings", "namespace": SYSTEM_NAMESPACE},
        "spec": {"schematic": {"cue": {"template": (
            'parameter: owner: string\n'
            'output: {apiVersion: "v1", kind: "ConfigMap", data: owner: parameter.owner}\n')}}}})
    policies = [{"name": "settings", "type": "team-settings", "properties": {"owner": "payments"}}]
    kube.create(APPLICATIONS, application("withpolicy", ns, [webservice()], policies=policies))
    wait_phase(kube, "withpolicy", ns, "running")
    made = kube.get(CONFIGMAPS, "settings", ns)
    assert made["data"] == {"owner": "payments"}
    assert made["metadata"]["labels"][labels.APP_NAME] == "withpolicy"
    assert made["metadata"]["labels"][labels.APP_COMPONENT] == "settings"
    tracker = kube.get(RESOURCE_TRACKERS, f"withpolicy-{ns}")
    assert ("ConfigMap", "settings") in {(r["kind"], r["name"]) for r in tracker["spec"]["managedResources"]}

    update_latest(kube, APPLICATIONS, "withpolicy", ns, lambda app: app["spec"].update(policies=[]))
    eventually(lambda: missing(kube, CONFIGMAPS, "settings", ns))
    assert not missing(kube, DEPLOYMENTS, "web", ns)


def test_a_policy_object_that_cannot_be_applied_is_a_condition(cluster, ns):
    _, kube = cluster
    kube.create(POLICY_DEFINITIONS, {
        "apiVersion": "core.oam.dev/v1beta1", "kind": "PolicyDefinition",
        "metadata": {"name": "unknown-kind", "namespace": SYSTEM_NAMESPACE},
        "spec": {"schematic": {"cue": {"template": 'output: {apiVersion: "example.com/v1", kind: "Nothing"}\n'}}}})
    kube.create(APPLICATIONS, application("badpolicy", ns, [webservice()],
                                          policies=[{"name": "odd", "type": "unknown-kind"}]))
    wait_phase(kube, "badpolicy", ns, "runningWorkflow")
    applied = eventually(lambda: next((c for c in app_status(kube, "badpolicy", ns).get("conditions") or []
                                       if c["type"] == "PoliciesApplied"), None))
    assert applied["status"] == "False" and applied["reason"] == "ApplyFailed"
    assert 'policy "odd": the server has no resource for example.com/v1 Nothing' in applied["message"]
