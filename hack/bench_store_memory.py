"""The embedded API server's memory per object held: this tree's server beside another commit's, printing JSON.

Two `velashard apiserver` processes, one after the other, one from this tree and one from `--against` (default
main, unpacked from git into a temporary directory), receive the same objects: KubeVela's load-test app
(hack/bench_kubevela_tiers.py's) as the Application and the five objects its render gives (two Deployments, a
Service, an Ingress, a ConfigMap), created as a client does, then each written once more (a status for the
Application and the Deployments, an annotation for the others) so that the watch history (the server's default
10,000 events) holds earlier versions as at steady state. Each server's RSS growth per object is measured after
the creates and after the second writes (the server's audit log of those requests included, alike in both), and
the seconds one full list of the Deployments takes.

    python hack/bench_store_memory.py [--objects 20000] [--against main]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hack.bench_apiserver import _commit, request  # noqa: E402
from hack.bench_kubevela_tiers import kubevela_app  # noqa: E402
from hack.benchlib import APPS_NS, rss_kib  # noqa: E402
from velashard.core.builtins import builtin_definitions  # noqa: E402
from velashard.core.install import install  # noqa: E402
from velashard.core.rendering import Definitions, render_app  # noqa: E402
from velashard.kube.client import KubeClient  # noqa: E402
from velashard.kube.kubeconfig import bearer_token, write_kubeconfig  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = "7777777"  # the app index rendered once; each app's objects are that JSON with its own index
PATHS = {"Application": "/apis/core.oam.dev/v1beta1", "Deployment": "/apis/apps/v1", "Service": "/api/v1",
         "Ingress": "/apis/networking.k8s.io/v1", "ConfigMap": "/api/v1"}
PLURALS = {"Application": "applications", "Deployment": "deployments", "Service": "services",
           "Ingress": "ingresses", "ConfigMap": "configmaps"}
NOW = "2025-01-01T00:00:00Z"
THREADS = 4


def app_status() -> dict[str, Any]:
    """What the Application controller writes of a running load-test app (its shape, our values)."""
    def service(name: str, traits: list[str]) -> dict[str, Any]:
        return {"name": f"{name}-{MARK}", "namespace": APPS_NS, "healthy": True, "message": "Ready:3/3",
                "workloadDefinition": {"apiVersion": "apps/v1", "kind": "Deployment"},
                "traits": [{"type": t, "healthy": True} for t in traits]}
    steps = [{"id": f"step-{i}", "name": f"{c}-{MARK}", "type": "apply-component", "phase": "succeeded",
              "firstExecuteTime": NOW, "lastExecuteTime": NOW} for i, c in enumerate(("web", "worker"))]
    return {"status": "running", "observedGeneration": 1,
            "conditions": [{"type": t, "status": "True", "reason": "Available", "lastTransitionTime": NOW}
                           for t in ("Parsed", "Revision", "Policy", "Render", "WorkflowFinished", "Ready")],
            "services": [service("web", ["sidecar", "scaler", "gateway"]), service("worker", ["scaler", "storage"])],
            "latestRevision": {"name": f"app-{MARK}-v1", "revision": 1, "revisionHash": "0123456789abcdef"},
            "workflow": {"appRevision": f"app-{MARK}-v1:0123456789abcdef", "mode": "StepByStep-DAG",
                         "status": "succeeded", "finished": True, "startTime": NOW, "endTime": NOW, "steps": steps},
            "appliedResources": [{"kind": k, "name": f"{n}-{MARK}", "namespace": APPS_NS} for k, n in (
                ("Deployment", "web"), ("Service", "web"), ("Ingress", "web"), ("Deployment", "worker"),
                ("ConfigMap", "data"))]}


DEPLOYMENT_STATUS = {"observedGeneration": 1, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3,
                     "availableReplicas": 3, "conditions": [
                         {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                          "message": "Deployment has minimum availability.", "lastUpdateTime": NOW,
                          "lastTransitionTime": NOW},
                         {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                          "message": f'ReplicaSet "web-{MARK}-5d8f7c9b4" has successfully progressed.',
                          "lastUpdateTime": NOW, "lastTransitionTime": NOW}]}


def templates() -> list[tuple[str, str, str]]:
    """The six objects of app MARK as (kind, JSON, second write as a JSON merge patch), MARK in their names."""
    defs = builtin_definitions()
    definitions = Definitions.from_objects([d for d in defs if d["kind"] == "ComponentDefinition"],
                                           [d for d in defs if d["kind"] == "TraitDefinition"])
    app = kubevela_app(int(MARK))
    out = [("Application", json.dumps(app), json.dumps({"status": app_status()}))]
    for comp in render_app(app, definitions, 1).components:
        for obj in [comp.workload] + comp.outputs:
            obj.setdefault("metadata", {}).setdefault("name", comp.name)
            obj["metadata"]["namespace"] = APPS_NS
            second = {"status": DEPLOYMENT_STATUS} if obj["kind"] == "Deployment" else \
                {"metadata": {"annotations": {"bench.velashard.dev/written": "twice"}}}
            out.append((obj["kind"], json.dumps(obj), json.dumps(second)))
    return out


def start(tree: str) -> tuple[subprocess.Popen, str, int, str]:
    """`velashard apiserver` run from `tree`'s code."""
    kubeconfig = os.path.join(tempfile.mkdtemp(prefix="velashard-bench-"), "admin.kubeconfig")
    proc = subprocess.Popen([sys.executable, "-m", "velashard.cli.main", "apiserver", "--port", "0",
                             "--kubeconfig-out", kubeconfig], cwd=tree, stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=tree))
    line = proc.stdout.readline().strip()  # type: ignore[union-attr]
    host, port = line.rsplit("//", 1)[1].split(":")
    return proc, host, int(port), bearer_token(kubeconfig)


def send(host: str, port: int, token: str, calls: list[tuple[str, str, dict]], failures: list[str]) -> None:
    """Requests from THREADS connections at once."""
    def run(part: list[tuple[str, str, dict]]) -> None:
        conn = http.client.HTTPConnection(host, port, timeout=120)
        for method, path, body in part:
            if method == "PATCH":
                payload = json.dumps(body).encode()
                conn.request(method, path, payload, {"Content-Type": "application/merge-patch+json",
                                                     "Authorization": f"Bearer {token}"})
                resp = conn.getresponse()
                code, data = resp.status, resp.read()
            else:
                code, data = request(conn, token, method, path, body)
            if code >= 300:
                failures.append(f"{method} {path}: {code} {data[:200]!r}")
        conn.close()
    threads = [threading.Thread(target=run, args=(calls[i::THREADS],)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def measure(tree: str, objects: list[tuple[str, str, str]], count: int) -> dict[str, Any]:
    proc, host, port, token = start(tree)
    try:
        kubeconfig = write_kubeconfig(os.path.join(tempfile.mkdtemp(prefix="velashard-bench-"), "kubeconfig"), {
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": f"http://{host}:{port}"}}],
            "users": [{"name": "u", "user": {"token": token}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]})
        client = KubeClient.from_kubeconfig(kubeconfig, shard_id="bench", qps=5000, burst=5000)
        install(client)
        conn = http.client.HTTPConnection(host, port, timeout=60)
        request(conn, token, "POST", "/api/v1/namespaces", {"metadata": {"name": APPS_NS}})
        time.sleep(2.0)
        rss_before = rss_kib(proc.pid)
        creates, writes = [], []
        for i in range(-(-count // len(objects))):
            for kind, text, second in objects:
                if len(creates) == count:
                    break
                obj = json.loads(text.replace(MARK, str(i)))
                base = f"{PATHS[kind]}/namespaces/{APPS_NS}/{PLURALS[kind]}"
                creates.append(("POST", base, obj))
                suffix = "/status" if '"status"' in second else ""
                writes.append(("PATCH", f"{base}/{obj['metadata']['name']}{suffix}",
                               json.loads(second.replace(MARK, str(i)))))
        failures: list[str] = []
        started = time.monotonic()
        send(host, port, token, creates, failures)
        create_seconds = time.monotonic() - started
        time.sleep(2.0)
        rss_created = rss_kib(proc.pid)
        send(host, port, token, writes, failures)
        time.sleep(2.0)
        rss_written = rss_kib(proc.pid)
        started = time.monotonic()
        code, body = request(conn, token, "GET", f"/apis/apps/v1/namespaces/{APPS_NS}/deployments")
        list_seconds = time.monotonic() - started
        return {"objects": count, "failed_requests": len(failures), "first_failures": failures[:3],
                "rss_mib": {"before": round(rss_before / 1024, 1), "created": round(rss_created / 1024, 1),
                            "written_again": round(rss_written / 1024, 1)},
                "bytes_per_object_created": round((rss_created - rss_before) * 1024 / count),
                "bytes_per_object": round((rss_written - rss_before) * 1024 / count),
                "creates_per_second": round(count / create_seconds),
                "deployments_list": {"code": code, "items": len(json.loads(body).get("items") or []),
                                     "mib": round(len(body) / 2 ** 20, 1), "seconds": round(list_seconds, 3)}}
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, default=20_000)
    parser.add_argument("--against", default="main", help="the git ref whose API server is the baseline")
    args = parser.parse_args()
    objects = templates()
    against = subprocess.run(["git", "rev-parse", "--short", args.against], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="velashard-baseline-") as baseline_tree:
        archive = subprocess.run(["git", "archive", against], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", baseline_tree], input=archive, check=True)
        before = measure(baseline_tree, objects, args.objects)
    after = measure(ROOT, objects, args.objects)
    result = {"benchmark": "store-memory", "cores": os.cpu_count(), "commit": _commit(), "objects": args.objects,
              "object_json_bytes": [[kind, len(text)] for kind, text, _ in objects],
              "baseline": dict(before, ref=args.against, commit=against), "current": after,
              "bytes_per_object_ratio": round(after["bytes_per_object"] / max(1, before["bytes_per_object"]), 3),
              "load": [round(x, 1) for x in os.getloadavg()]}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
