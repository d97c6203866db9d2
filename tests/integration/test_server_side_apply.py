"""Server-side apply against the embedded API server: kubectl, the Python client and real Helm."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from kubernetes import client, config, dynamic
from kubernetes.client.exceptions import ApiException

from tests.integration.helpers import raw_request, status_of

CHART = os.path.join(os.path.dirname(__file__), "..", "..", "helm", "velashard")

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
"""


def managers(obj: dict) -> dict[str, dict]:
    return {e["manager"]: e for e in obj["metadata"].get("managedFields") or []}


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_server_side_apply_conflict_and_force(apiserver, namespace: str, tmp_path: Path) -> None:
    def kubectl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(["kubectl", "--kubeconfig", apiserver.kubeconfig, "--cache-dir", str(tmp_path), "-n",
                               namespace, *args], input=stdin, capture_output=True, text=True, timeout=60)

    first = kubectl("apply", "--server-side", "-f", "-", stdin=DEPLOYMENT.format(replicas=2))
    assert first.returncode == 0 and "serverside-applied" in first.stdout, first.stderr
    conflict = kubectl("apply", "--server-side", "--field-manager", "ops", "-f", "-",
                       stdin=DEPLOYMENT.format(replicas=3))
    assert conflict.returncode == 1
    assert 'Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas' in conflict.stderr
    forced = kubectl("apply", "--server-side", "--field-manager", "ops", "--force-conflicts", "-f", "-",
                     stdin=DEPLOYMENT.format(replicas=3))
    assert forced.returncode == 0, forced.stderr
    live = json.loads(kubectl("get", "deployment", "web", "-o", "json", "--show-managed-fields").stdout)
    assert live["spec"]["replicas"] == 3
    owners = managers(live)
    assert "ops" in owners, live["metadata"]
    assert "f:replicas" in owners["ops"]["fieldsV1"]["f:spec"] and owners["ops"]["operation"] == "Apply"
    assert "f:replicas" not in owners["kubectl"]["fieldsV1"]["f:spec"]
    # Client-side apply and edits are recorded as Update operations under the client's own name.
    kubectl("label", "deployment", "web", "team=a")
    owners = managers(json.loads(kubectl("get", "deployment", "web", "-o", "json", "--show-managed-fields").stdout))
    assert owners["kubectl-label"]["operation"] == "Update"
    assert owners["kubectl-label"]["fieldsV1"] == {"f:metadata": {"f:labels": {"f:team": {}}}}


def test_python_client_apply_creates_updates_and_prunes(api_client, namespace: str) -> None:
    resource = dynamic.DynamicClient(api_client).resources.get(api_version="v1", kind="ConfigMap")
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": namespace},
            "data": {"a": "1", "b": "2"}}
    created = resource.server_side_apply(body=body, name="cfg", namespace=namespace, field_manager="tool")
    assert created.data.a == "1" and managers(created.to_dict())["tool"]["operation"] == "Apply"
    client.CoreV1Api(api_client).patch_namespaced_config_map("cfg", namespace, {"data": {"c": "3"}})
    body["data"] = {"a": "1"}
    pruned = resource.server_side_apply(body=body, name="cfg", namespace=namespace, field_manager="tool")
    assert pruned.data.to_dict() == {"a": "1", "c": "3"}  # b was tool's alone; c belongs to the updater
    # fieldManager is required; force is for apply only (kube-apiserver's 422s).
    code, status = raw_request(api_client, "PATCH", f"/api/v1/namespaces/{namespace}/configmaps/cfg",
                               json.dumps(body), {"Content-Type": "application/apply-patch+yaml"})
    assert code == 422 and "fieldManager: Required value: is required for apply patch" in status["message"]
    with pytest.raises(ApiException) as err:
        resource.server_side_apply(body={**body, "data": {"a": "9"}}, name="cfg", namespace=namespace,
                                   field_manager="other")
    assert err.value.status == 409
    assert status_of(err.value)["details"]["causes"][0] == {"reason": "FieldManagerConflict",
                                                            "message": 'conflict with "tool"', "field": ".data.a"}


def test_helm_installs_upgrades_and_uninstalls_the_chart(make_apiserver) -> None:
    helm = pytest.importorskip("helm_python", reason="helm-python-sdk is installed by the test extra")
    server = make_apiserver()
    # Release records are Secrets sent as protobuf by Helm's typed client; keep them in memory.
    helm_config = helm.Config(kubeconfig_path=server.kubeconfig, namespace="vela-system", storage_driver="memory")
    values = {"sharding": {"enabled": True}}
    release = helm_config.install(CHART, "kubevela", values, namespace="vela-system", create_namespace=True,
                                  timeout=60)
    assert release["status"] == "deployed"
    api = config.new_client_from_config(config_file=server.kubeconfig)
    try:
        deploy = client.AppsV1Api(api).read_namespaced_deployment("kubevela-velashard", "vela-system")
        # Helm 4 applies server-side under its program's name.
        entries = api.sanitize_for_serialization(deploy)["metadata"]["managedFields"]
        assert [e["operation"] for e in entries] == ["Apply"]
        upgraded = helm_config.upgrade(CHART, "kubevela", {**values, "replicaCount": 2}, namespace="vela-system",
                                       timeout=60)
        assert upgraded["revision"] == 2
        assert client.AppsV1Api(api).read_namespaced_deployment("kubevela-velashard", "vela-system").spec.replicas == 2
        helm_config.uninstall("kubevela", timeout=60)
        names = [d.metadata.name for d in client.AppsV1Api(api).list_namespaced_deployment("vela-system").items]
        assert "kubevela-velashard" not in names
    finally:
        api.close()
        helm_config.close()


def test_status_writes_keep_the_appliers_fields(make_apiserver) -> None:
    from velashard.apiserver.registry.rest import Request
    server = make_apiserver()
    rt = server.types.lookup("apps", "v1", "deployments")
    config_ = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "d"}}, "template": {
            "metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    server.api.patch(rt, "default", "d", "application/apply-patch+yaml", config_, Request(manager="kubectl"))
    stored = server.api.get(rt, "default", "d")
    # In-process writers may hand back the stored object itself; that must not cost anyone their fields.
    server.api.update(rt, "default", "d", dict(stored, status={"replicas": 1}), Request(), "status")
    after = managers(server.api.get(rt, "default", "d"))
    assert after["kubectl"]["operation"] == "Apply" and "f:spec" in after["kubectl"]["fieldsV1"]
    assert after["kube-controller-manager"]["fieldsV1"] == {"f:status": {"f:replicas": {}}}
