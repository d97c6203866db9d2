"""`velashard dev`: a whole sharded velashard on one machine, with a live view until Ctrl-C.

What runs is what users deploy: real Helm installs helm/velashard with sharding into the embedded
API server (simulating workloads), and the vela-core-shard-manager addon adds the shards, as the
README does on a cluster. A local kubelet in this process runs the chart's and the addon's
Deployments as separate `velashard` processes, each with a token of its pod's ServiceAccount, and
routes the webhook Service to the master's process, so the API server calls the webhooks through the
Service and verifies them against the chart's caBundle.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from typing import Any, TextIO

import velashard
from velashard.apis.oam import APPLICATIONS, SYSTEM_NAMESPACE
from velashard.apiserver.http.server import ADMIN_USER, APIServer
from velashard.core.addons import load_addon
from velashard.core.install import install
from velashard.dev.kubelet import LocalKubelet, LocalPod
from velashard.dev.view import DevView
from velashard.kube import errors
from velashard.kube.apply import upsert
from velashard.kube.client import KubeClient
from velashard.kube.kubeconfig import write_kubeconfig
from velashard.kube.resources import MUTATING_WEBHOOKS
from velashard.observability import setup_logging
from velashard.sharding.keys import load_or_create_signing_key
from velashard.sharding.proof import with_proof

log = logging.getLogger("velashard.dev")

RELEASE = "velashard"  # as the README installs it: Deployment, ServiceAccounts and Service are named after it
SHARD_SERVICE_ACCOUNT = f"{RELEASE}-shard"
TOKEN_SECONDS = 7 * 24 * 3600  # a dev session's lifetime; a kubelet would rotate projected tokens instead


def chart_dir() -> str:
    """helm/velashard beside the package (a source checkout, as `pip install -e .` from the README uses)."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(velashard.__file__))), "helm", "velashard")


DEV_VALUES: dict[str, Any] = {
    # Dev's departures from the chart's defaults: a short orphan grace period, so that killing a shard visibly
    # moves its apps; text logs; the dev user as a shard admin, since the addon pins its Application to
    # the master, which the shard-label guard allows only the controller and shard admins; and its group.
    # The dev user, like a cluster's admin, has its rights through the system:masters group: the group pattern
    # keeps that group on what it writes, so its apps (the addon's, the samples) act with those rights.
    "sharding": {"enabled": True, "orphanGracePeriod": 3, "shardAdmins": {"users": [ADMIN_USER]}},
    "authentication": {"groupPattern": "kubevela:*|system:masters"},
    "logFormat": "text"}


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` on top of `base`, maps merged key by key (as Helm merges --set over values)."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def install_chart(kubeconfig: str, http_allow: list[str] | tuple = (), values: dict[str, Any] | None = None) -> Any:
    """What the README tells users to run on a cluster: the chart with sharding (dev's values, then `values`).
    Returns the Helm configuration. Release records are Secrets in vela-system, Helm's default, so that `helm
    upgrade velashard helm/velashard -n vela-system` with dev's kubeconfig upgrades the release as on a cluster."""
    import helm_python as helm  # real Helm (the Go SDK), installed with velashard

    helm.enable_logging(logging.getLogger().getEffectiveLevel())  # Helm's own log, into this process's log
    release = helm.Config(kubeconfig_path=kubeconfig, namespace=SYSTEM_NAMESPACE, storage_driver="secret")
    ours = merged(DEV_VALUES, {"workflow": {"http": {"allow": list(http_allow)}}})
    release.install(chart_dir(), RELEASE, merged(ours, values or {}),
                    namespace=SYSTEM_NAMESPACE, create_namespace=True, timeout=60)
    return release


def enable_shards(client: KubeClient, shards: int) -> None:
    """`velashard addon enable vela-core-shard-manager`: its Application, pinned to the master with a proof signed
    with the master's key (made here if the master has not made it yet)."""
    addon = load_addon("vela-core-shard-manager")
    signer = load_or_create_signing_key(client, SYSTEM_NAMESPACE)
    for obj in addon.render({"nShards": shards, "deploymentName": RELEASE, "instanceName": RELEASE,
                             "serviceAccountName": SHARD_SERVICE_ACCOUNT}):
        upsert(client, APPLICATIONS, with_proof(obj, signer))


class PodCredentials:
    """A kubeconfig per ServiceAccount, holding a token from the TokenRequest API, as the kubelet projects one
    into each pod: no controller process runs as admin."""

    def __init__(self, server: APIServer, directory: str):
        self.server, self.directory = server, directory
        self._paths: dict[str, str] = {}
        self._lock = threading.Lock()

    def __call__(self, pod: LocalPod) -> str:
        with self._lock:
            if pod.service_account not in self._paths:
                answer = self.server.access.token_request(SYSTEM_NAMESPACE, pod.service_account, {
                    "spec": {"expirationSeconds": TOKEN_SECONDS}})
                doc = self.server.kubeconfig_document()
                doc["users"] = [{"name": pod.service_account, "user": {"token": answer["status"]["token"]}}]
                doc["contexts"][0]["context"]["user"] = pod.service_account
                path = write_kubeconfig(os.path.join(self.directory, f"kubeconfig-{pod.service_account}"), doc)
                self._paths[pod.service_account] = path
            return self._paths[pod.service_account]


def sample_app(i: int) -> dict[str, Any]:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": f"sample-{i}", "namespace": "default"},
            "spec": {"components": [{"name": f"sample-{i}", "type": "webservice",
                                     "properties": {"image": "nginx:1.25", "ports": [{"port": 80, "expose": True}]},
                                     "traits": [{"type": "scaler", "properties": {"replicas": 1}}]}]}}


def run_dev(shards: int, apps: int, directory: str, port: int, out: TextIO = sys.stdout, err: TextIO = sys.stderr,
            stop: threading.Event | None = None, refresh: float = 2.0, log_format: str = "text",
            log_level: str = "warning", http_allow: list[str] | tuple = (), dashboard_port: int = 0,
            values: dict[str, Any] | None = None) -> int:
    """Run until stop is set; 1 if the cluster could not be set up (said on err, with the log to read)."""
    os.makedirs(os.path.join(directory, "logs"), exist_ok=True)
    log_path = os.path.join(directory, "logs", "apiserver.log")
    # This process's own log (the API server's, the kubelet's, Helm's) is a file, as every pod's is: on a cluster
    # these lines would be in kube-apiserver's and the kubelet's logs, not in the user's terminal.
    setup_logging("dev", log_format, log_level, stream=open(log_path, "a", buffering=1, encoding="utf-8"))
    logging.captureWarnings(True)
    stop = stop or threading.Event()
    masters = int(merged(DEV_VALUES, values or {}).get("replicaCount", 1))
    server = APIServer(port=port, simulate_workloads=True).start()
    kubeconfig = server.write_kubeconfig(os.path.join(directory, "kubeconfig"))
    client = KubeClient.from_kubeconfig(kubeconfig, shard_id="dev", component="velashard-dev", qps=200, burst=400)
    credentials = PodCredentials(server, os.path.abspath(directory))
    # processes.json lists the API server from the start and is rewritten whenever a process changes, so that
    # scripts find every process as soon as it is known, not only once the live view first refreshes.
    _write_processes(directory, server, log_path, [])
    kubelet = LocalKubelet(server.api, os.path.abspath(kubeconfig), SYSTEM_NAMESPACE,
                           log_dir=os.path.join(directory, "logs"), credentials=credentials,
                           route_service=server.admission.route_service,
                           on_change=lambda processes: _write_processes(directory, server, log_path, processes))
    view = DevView(client, out, err)
    release = None
    dashboard = None
    step = "the CRDs"
    try:
        install(client, definitions=False)  # the chart installs the built-in definitions, as for users
        step = "the chart"
        release = install_chart(kubeconfig, http_allow, values)
        step = ""
        kubelet.start()
        # The addon's Application acts as whoever wrote it: written once the master's webhook records authors
        # (an app written past the webhook would act as the default user, who may do nothing here).
        deadline = time.monotonic() + 120
        while not stop.is_set() and time.monotonic() < deadline and not _webhooks_serving(client, kubelet):
            view.watch_processes(kubelet.processes())
            stop.wait(0.2)
        if shards:
            step = "the vela-core-shard-manager addon"
            enable_shards(client, shards)
            step = ""
        # Sample apps wait for the shards, so that they spread over all of them from the start.
        while not stop.is_set() and time.monotonic() < deadline:
            running = kubelet.processes()
            view.watch_processes(running)
            if len(running) == shards + masters and all(p["ready"] for p in running):
                break
            stop.wait(0.2)
        for i in range(apps):
            client.create(APPLICATIONS, sample_app(i))
        print(f"velashard dev: API server {server.url}; kubeconfig {kubeconfig}; logs {os.path.dirname(log_path)}/",
              file=out, flush=True)
        dashboard = DashboardProcess(kubeconfig, directory, dashboard_port)
        print(f"velashard dev: dashboard {dashboard.url or '(did not start: see ' + dashboard.log + ')'}",
              file=out, flush=True)
        while True:
            view.watch_processes(kubelet.processes())
            view.refresh()
            if stop.wait(refresh):
                break
    except KeyboardInterrupt:
        pass
    except Exception as error:
        if not step:
            raise
        # whatever broke a set-up step (Helm, the API server, the addon's CUE), the user must hear of it: the
        # message here, the traceback in the log
        log.exception("installing %s failed", step)
        print(f"velashard dev: {step} did not install: {error}\n  the log: {log_path}", file=err, flush=True)
        return 1
    finally:
        if dashboard is not None:
            dashboard.stop()
        kubelet.stop()
        if release is not None:
            release.close()
        server.stop()
    print("velashard dev: stopped", file=out, flush=True)
    return 0


class DashboardProcess:
    """`velashard dashboard` with the dev user's kubeconfig, as a process of its own (as a user would run it); its
    URL is the first line it prints."""

    def __init__(self, kubeconfig: str, directory: str, port: int, timeout: float = 60.0):
        self.log = os.path.join(directory, "logs", "dashboard.log")
        self.url = ""
        with open(self.log, "ab") as log_file:
            self.proc = subprocess.Popen([sys.executable, "-m", "velashard.cli.main", "dashboard", "--kubeconfig",
                                          os.path.abspath(kubeconfig), "--port", str(port),
                                          "--controller-namespace", SYSTEM_NAMESPACE],
                                         stdout=subprocess.PIPE, stderr=log_file, text=True)
        found = threading.Event()

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                if line.startswith("velashard dashboard: http"):
                    self.url = line.split(": ", 1)[1].strip()
                    found.set()
            found.set()
        threading.Thread(target=read, name="dashboard-output", daemon=True).start()
        found.wait(timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _webhooks_serving(client: KubeClient, kubelet: LocalKubelet) -> bool:
    """The master is ready and has put its CA into the chart's mutating webhook configuration."""
    if not any(p["ready"] for p in kubelet.processes()):
        return False
    try:
        config = client.get(MUTATING_WEBHOOKS, f"{RELEASE}-mutating")
    except errors.NotFound:
        return False
    return all((hook.get("clientConfig") or {}).get("caBundle") for hook in config.get("webhooks") or [])


def _write_processes(directory: str, server: APIServer, log_path: str, processes: list[dict[str, Any]]) -> None:
    """DIR/processes.json: name, pid, ports and log of the API server and of each pod's process (replaced
    atomically)."""
    entries = [{"name": "apiserver", "pid": os.getpid(), "ports": {"api": server.port}, "log": log_path}]
    for proc in processes:
        entries.append({"name": proc["name"], "pid": proc["pid"], "ports": {
            "metrics": proc["metricsPort"], "health": proc["healthPort"], "webhook": proc["webhookPort"]},
            "ready": proc["ready"], "restarts": proc["restarts"], "log": proc["log"]})
    tmp = os.path.join(directory, "processes.json.tmp")
    with open(tmp, "w") as fh:
        json.dump(entries, fh, indent=2)
    os.replace(tmp, os.path.join(directory, "processes.json"))
