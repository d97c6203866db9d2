"""kubectl's everyday commands against the embedded API server (typed commands send Kubernetes
protobuf; scale, rollout, wait, diff, edit, replace, explain, patch, watch, cascading deletes).
Skipped where kubectl is absent."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.helpers import eventually

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


@pytest.fixture
def kubectl(apiserver, tmp_path: Path, namespace: str):
    def run(*args: str, check: bool = True, env: dict | None = None, timeout: float = 30) -> \
            subprocess.CompletedProcess:
        cmd = ["kubectl", "--kubeconfig", apiserver.kubeconfig, "--cache-dir", str(tmp_path / "cache"),
               "-n", namespace, *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env=dict(os.environ, **(env or {})))
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
        return proc
    return run


def _json(proc: subprocess.CompletedProcess) -> dict:
    return json.loads(proc.stdout)


def test_create_typed_objects(kubectl, namespace):
    kubectl("create", "configmap", "c", "--from-literal=a=b")
    kubectl("create", "secret", "generic", "s", "--from-literal=p=q")
    kubectl("create", "deployment", "web", "--image=nginx:1", "--replicas=2", "--port=80")
    kubectl("create", "namespace", f"{namespace}-extra")
    kubectl("create", "serviceaccount", "robot")
    kubectl("create", "role", "reader", "--verb=get,list", "--resource=pods")
    kubectl("create", "rolebinding", "reader", "--role=reader", f"--serviceaccount={namespace}:robot")
    assert _json(kubectl("get", "cm", "c", "-o", "json"))["data"] == {"a": "b"}
    assert _json(kubectl("get", "secret", "s", "-o", "json"))["data"] == {"p": "cQ=="}
    deploy = _json(kubectl("get", "deploy", "web", "-o", "json"))
    assert deploy["spec"]["replicas"] == 2
    assert deploy["spec"]["template"]["spec"]["containers"][0]["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert _json(kubectl("get", "role", "reader", "-o", "json"))["rules"][0]["verbs"] == ["get", "list"]
    binding = _json(kubectl("get", "rolebinding", "reader", "-o", "json"))
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "robot", "namespace": namespace}]
    kubectl("delete", "namespace", f"{namespace}-extra", "--wait=false")


def test_scale_rollout_and_wait(kubectl):
    kubectl("create", "deployment", "web", "--image=nginx:1")
    kubectl("scale", "deploy/web", "--replicas=3")
    kubectl("wait", "--for=condition=Available", "deploy/web", "--timeout=10s")
    kubectl("rollout", "status", "deploy/web", "--timeout=10s")
    kubectl("set", "image", "deploy/web", "nginx=nginx:2")
    kubectl("rollout", "status", "deploy/web", "--timeout=10s")
    history = kubectl("rollout", "history", "deploy/web").stdout
    assert "1 " in history and "2 " in history
    kubectl("rollout", "undo", "deploy/web")
    eventually(lambda: _json(kubectl("get", "deploy", "web", "-o", "json"))["metadata"]["annotations"].get(
        "deployment.kubernetes.io/revision") == "3")
    assert _json(kubectl("get", "deploy", "web", "-o", "json"))["spec"]["template"]["spec"]["containers"][0][
        "image"] == "nginx:1"
    replica_sets = _json(kubectl("get", "rs", "-o", "json"))["items"]
    assert len(replica_sets) == 2 and sorted(rs["spec"]["replicas"] for rs in replica_sets) == [0, 3]
    assert "successfully rolled out" in kubectl("rollout", "status", "deploy/web", "--timeout=10s").stdout


def test_diff_edit_replace_label_annotate_patch(kubectl, tmp_path):
    kubectl("create", "configmap", "c", "--from-literal=a=b")
    manifest = _json(kubectl("get", "cm", "c", "-o", "json"))
    manifest["data"]["a"] = "changed"
    path = tmp_path / "cm.json"
    path.write_text(json.dumps(manifest))
    diff = kubectl("diff", "-f", str(path), check=False)
    assert diff.returncode == 1 and "changed" in diff.stdout, diff.stderr
    kubectl("replace", "-f", str(path))
    after = kubectl("diff", "-f", str(path), check=False).stdout
    assert not [line for line in after.splitlines() if line[:1] in ("+", "-") and line[1:].strip().startswith("a: ")]
    editor = tmp_path / "editor.py"
    editor.write_text("import sys\np = sys.argv[1]\ntext = open(p).read()\n"
                      "open(p, 'w').write(text.replace('a: changed', 'a: edited'))\n")
    kubectl("edit", "cm", "c", env={"EDITOR": f"{sys.executable} {editor}", "KUBE_EDITOR": ""})
    assert _json(kubectl("get", "cm", "c", "-o", "json"))["data"]["a"] == "edited"
    kubectl("label", "cm", "c", "tier=web")
    kubectl("annotate", "cm", "c", "note=hi")
    kubectl("patch", "cm", "c", "-p", '{"data":{"s":"1"}}')
    kubectl("patch", "cm", "c", "--type=merge", "-p", '{"data":{"m":"2"}}')
    kubectl("patch", "cm", "c", "--type=json", "-p", '[{"op":"add","path":"/data/j","value":"3"}]')
    got = _json(kubectl("get", "cm", "c", "-o", "json"))
    assert got["metadata"]["labels"] == {"tier": "web"} and got["metadata"]["annotations"]["note"] == "hi"
    assert {k: got["data"][k] for k in ("s", "m", "j")} == {"s": "1", "m": "2", "j": "3"}


def test_explain_and_nodes(kubectl):
    explained = kubectl("explain", "deployment.spec.replicas").stdout
    assert "replicas" in explained and "<integer>" in explained and "Number of desired pods" in explained
    nodes = kubectl("get", "nodes").stdout
    assert "node-0" in nodes and "Ready" in nodes


def test_get_watch_is_bounded(kubectl):
    kubectl("create", "configmap", "w1", "--from-literal=a=b")
    proc = kubectl("get", "configmaps", "-w", "--request-timeout=2s", check=False, timeout=20)
    assert "w1" in proc.stdout


def test_delete_with_each_cascade_mode(kubectl):
    for mode in ("background", "foreground", "orphan"):
        name = f"d-{mode}"
        kubectl("create", "deployment", name, "--image=nginx:1")
        eventually(lambda: any(rs["metadata"]["name"].startswith(name + "-") for rs in
                               _json(kubectl("get", "rs", "-o", "json"))["items"]))
        kubectl("delete", "deploy", name, f"--cascade={mode}", "--timeout=20s")
        remaining = [rs for rs in _json(kubectl("get", "rs", "-o", "json"))["items"]
                     if rs["metadata"]["name"].startswith(name + "-")]
        if mode == "orphan":
            assert remaining and not remaining[0]["metadata"].get("ownerReferences")
        else:
            eventually(lambda: not [rs for rs in _json(kubectl("get", "rs", "-o", "json"))["items"]
                                    if rs["metadata"]["name"].startswith(name + "-")])


def test_auth_whoami_keeps_the_connection_usable(kubectl):
    proc = kubectl("auth", "whoami", check=False)
    assert "malformed HTTP status code" not in proc.stderr
