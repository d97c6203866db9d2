"""`velashard dev`: a whole sharded velashard on one machine, with a live view until Ctrl-C.

The embedded API server (simulating workloads) and a local kubelet run in this process; the
master and the shards are separate `velashard` processes started by the kubelet from ordinary
Deployments in vela-system, so the addon, scaling and killing a shard behave as in a cluster.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter, deque
from typing import Any, TextIO

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS, SYSTEM_NAMESPACE
from velashard.core.install import install
from velashard.devcluster.kubelet import LocalKubelet
from velashard.devcluster.server import APIServer
from velashard.kube.client import KubeClient
from velashard.kube.resources import DEPLOYMENTS, PODS

MASTER_DEPLOYMENT = "vela-core"


def controller_deployment(name: str, shard: str, args: list[str], replicas: int = 1) -> dict[str, Any]:
    pod_labels = {labels.POD_NAME_LABEL: labels.POD_NAME_VALUE, "app.kubernetes.io/instance": name,
                  labels.SHARD_ID: shard}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": SYSTEM_NAMESPACE, "labels": dict(pod_labels)},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app.kubernetes.io/instance": name}},
                     "template": {"metadata": {"labels": pod_labels}, "spec": {
                         "serviceAccountName": "vela-core",
                         "containers": [{"name": "vela-core", "image": "velashard:dev", "args": args}]}}}}


def sample_app(i: int) -> dict[str, Any]:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": f"sample-{i}", "namespace": "default"},
            "spec": {"components": [{"name": f"sample-{i}", "type": "webservice",
                                     "properties": {"image": "nginx:1.25", "ports": [{"port": 80, "expose": True}]},
                                     "traits": [{"type": "scaler", "properties": {"replicas": 1}}]}]}}


class DevView:
    """The live terminal view: shards, readiness, apps per shard, healthy/total, recent moves."""

    def __init__(self, client: KubeClient, out: TextIO):
        self.client = client
        self.out = out
        self.last: dict[str, str] = {}
        self.moves: deque[str] = deque(maxlen=6)

    def render(self) -> str:
        pods = self.client.list(PODS, SYSTEM_NAMESPACE, label_selector=f"{labels.POD_NAME_LABEL}="
                                                                       f"{labels.POD_NAME_VALUE}")["items"]
        apps = self.client.list(APPLICATIONS)["items"]  # the dev view may list everything; controllers never do
        shard_of = {f'{a["metadata"]["namespace"]}/{a["metadata"]["name"]}':
                    (a["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID, "-") for a in apps}
        for key, shard in shard_of.items():
            if key in self.last and self.last[key] != shard:
                self.moves.appendleft(f"{time.strftime('%H:%M:%S')} {key}: {self.last[key]} -> {shard}")
        self.last = shard_of
        per_shard = Counter(shard_of.values())
        healthy = Counter((a["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID, "-") for a in apps
                          if (a.get("status") or {}).get("status") == "running")
        lines = [f"velashard dev — {len(apps)} applications, "
                 f"{sum(1 for a in apps if (a.get('status') or {}).get('status') == 'running')} running",
                 "", f"{'SHARD':<14}{'PODS READY':<12}{'APPS':<8}{'HEALTHY':<8}"]
        shards: dict[str, list[bool]] = {}
        for pod in pods:
            shard = (pod["metadata"].get("labels") or {}).get(labels.SHARD_ID, "?")
            ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in (pod.get("status") or {}).get("conditions") or [])
            shards.setdefault(shard, []).append(ready)
        for shard in sorted(set(shards) | {s for s in per_shard if s != "-"}):
            states = shards.get(shard, [])
            lines.append(f"{shard:<14}{f'{sum(states)}/{len(states)}':<12}{per_shard.get(shard, 0):<8}"
                         f"{healthy.get(shard, 0):<8}")
        if per_shard.get("-"):
            lines.append(f"{'(unscheduled)':<14}{'':<12}{per_shard['-']:<8}")
        lines += ["", "recent moves:"] + (list(self.moves) or ["  none"])
        return "\n".join(lines)

    def show(self) -> None:
        text = self.render()
        if self.out.isatty():
            self.out.write("\x1b[2J\x1b[H" + text + "\n\nCtrl-C stops everything.\n")
        else:
            self.out.write(text + "\n\n")
        self.out.flush()


def run_dev(shards: int, apps: int, directory: str, port: int, out: TextIO = sys.stdout,
            stop: threading.Event | None = None, refresh: float = 2.0) -> int:
    os.makedirs(directory, exist_ok=True)
    stop = stop or threading.Event()
    server = APIServer(port=port, simulate_workloads=True).start()
    kubeconfig = server.write_kubeconfig(os.path.join(directory, "kubeconfig"))
    client = KubeClient.from_kubeconfig(kubeconfig, shard_id="dev", component="velashard-dev", qps=200, burst=400)
    kubelet = LocalKubelet(server.api, os.path.abspath(kubeconfig), SYSTEM_NAMESPACE,
                           log_dir=os.path.join(directory, "logs"))
    os.makedirs(kubelet.log_dir, exist_ok=True)
    try:
        install(client)
        client.create(DEPLOYMENTS, controller_deployment(MASTER_DEPLOYMENT, labels.MASTER_SHARD_ID, [
            "--enable-sharding", "--shard-id=master", "--schedulable-shards=", "--reschedule-period=5",
            "--orphan-grace-period=3", "--state-keep-interval=30"]))
        for i in range(shards):
            # "local-<i>", so that the shard-manager addon's shard-<i> clones never collide with them.
            client.create(DEPLOYMENTS, controller_deployment(f"{MASTER_DEPLOYMENT}-local-{i}", f"local-{i}", [
                "--enable-sharding", f"--shard-id=local-{i}", "--state-keep-interval=30"]))
        kubelet.start()
        # Sample apps wait for the shards, so that they spread over all of them from the start.
        deadline = time.monotonic() + 120
        while not stop.is_set() and time.monotonic() < deadline:
            running = kubelet.processes()
            if len(running) == shards + 1 and all(p["ready"] for p in running):
                break
            stop.wait(0.2)
        for i in range(apps):
            client.create(APPLICATIONS, sample_app(i))
        print(f"velashard dev: API server {server.url}; kubeconfig {kubeconfig}", file=out, flush=True)
        view = DevView(client, out)
        while not stop.wait(refresh):
            _write_processes(directory, server, kubelet)
            view.show()
    except KeyboardInterrupt:
        pass
    finally:
        kubelet.stop()
        server.stop()
    print("velashard dev: stopped", file=out, flush=True)
    return 0


def _write_processes(directory: str, server: APIServer, kubelet: LocalKubelet) -> None:
    entries = [{"name": "apiserver", "pid": os.getpid(), "ports": {"api": server.port}}]
    for proc in kubelet.processes():
        entries.append({"name": proc["name"], "pid": proc["pid"], "ports": {
            "metrics": proc["metricsPort"], "health": proc["healthPort"], "webhook": proc["webhookPort"]},
            "ready": proc["ready"], "restarts": proc["restarts"], "log": proc["log"]})
    tmp = os.path.join(directory, "processes.json.tmp")
    with open(tmp, "w") as fh:
        json.dump(entries, fh, indent=2)
    os.replace(tmp, os.path.join(directory, "processes.json"))
