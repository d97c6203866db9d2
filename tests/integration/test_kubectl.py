"""kubectl against the embedded API server: apply -f, get -l, label, delete. Skipped where kubectl is absent."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


@pytest.fixture
def kubectl(apiserver, tmp_path: Path):
    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = ["kubectl", "--kubeconfig", apiserver.kubeconfig, "--cache-dir", str(tmp_path / "cache"), *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
        return proc
    return run


def test_apply_get_label_delete(kubectl, namespace: str, tmp_path: Path) -> None:
    manifest = tmp_path / "objs.yaml"
    manifest.write_text(textwrap.dedent(f"""\
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: web-config
          namespace: {namespace}
          labels: {{app: web}}
        data: {{color: blue}}
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: web
          namespace: {namespace}
          labels: {{app: web}}
        spec:
          replicas: 2
          selector: {{matchLabels: {{app: web}}}}
          template:
            metadata: {{labels: {{app: web}}}}
            spec:
              containers:
              - name: web
                image: nginx:1.25
                ports: [{{containerPort: 80}}]
        ---
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: other
          namespace: {namespace}
          labels: {{app: other}}
        """))
    out = kubectl("apply", "-f", str(manifest)).stdout
    assert "configmap/web-config created" in out
    assert "deployment.apps/web created" in out

    listed = json.loads(kubectl("get", "configmaps", "-n", namespace, "-l", "app=web", "-o", "json").stdout)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["web-config"]
    table = kubectl("get", "deploy,cm", "-n", namespace, "-l", "app in (web)").stdout
    assert "web" in table and "other" not in table

    # A second apply with a change is a patch that keeps what the server set.
    manifest.write_text(manifest.read_text().replace("color: blue", "color: green").replace("replicas: 2",
                                                                                            "replicas: 3"))
    out = kubectl("apply", "-f", str(manifest)).stdout
    assert "configmap/web-config configured" in out and "deployment.apps/web configured" in out
    deploy = json.loads(kubectl("get", "deployment", "web", "-n", namespace, "-o", "json").stdout)
    assert deploy["spec"]["replicas"] == 3
    assert deploy["metadata"]["generation"] == 2

    kubectl("label", "configmap", "other", "-n", namespace, "tier=backend")
    shown = kubectl("get", "cm", "-n", namespace, "-l", "tier=backend", "-L", "tier").stdout
    assert "other" in shown and "backend" in shown

    kubectl("delete", "-f", str(manifest))
    left = json.loads(kubectl("get", "configmaps,deployments", "-n", namespace, "-o", "json").stdout)
    assert left["items"] == []


def test_unknown_resource_is_a_clear_error(kubectl, namespace: str) -> None:
    proc = kubectl("get", "nosuchthings", "-n", namespace, check=False)
    assert proc.returncode != 0
    assert "nosuchthings" in proc.stderr
