"""What the multi-process benchmarks share: an API server process, controllers as processes, shard pods
marked Ready as a kubelet would, app load, resident memory and metrics scraped from each process."""

from __future__ import annotations

import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hack.bench_apiserver import Server, request, start_server  # noqa: E402
from velashard.apis import labels  # noqa: E402
from velashard.apis.oam import APPLICATIONS  # noqa: E402
from velashard.core.install import install  # noqa: E402
from velashard.core.authors import DEFAULT_USER  # noqa: E402
from velashard.kube.client import KubeClient  # noqa: E402
from velashard.kube.resources import NAMESPACES, PODS  # noqa: E402

RUNTIME_NS = "vela-system"
APPS_NS = "bench"


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int, metric: str) -> float:
    """The sum of a metric's samples over all label sets."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics")
    body = conn.getresponse().read().decode()
    return sum(float(m) for m in re.findall(rf"^{metric}(?:{{[^}}]*}})? ([0-9.e+-]+)$", body, re.M))


def wait_ready(port: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"controller on health port {port} did not become ready")


# Two common traits (issue 23 measures rendering with them): a patch of the pod spec and one of the metadata.
TWO_TRAITS = [{"type": "scaler", "properties": {"replicas": 1}}, {"type": "labels", "properties": {"team": "bench"}}]


def app_body(name: str, image: str = "nginx:1.25", traits: list | None = None) -> dict:
    component = {"name": name, "type": "webservice", "properties": {"image": image, "ports": [{"port": 80}]}}
    if traits:
        component["traits"] = traits
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": {"name": name},
            "spec": {"components": [component]}}


@dataclass
class Controller:
    name: str
    proc: subprocess.Popen
    metrics: int
    health: int
    baseline_kib: int = 0

    def rss_kib(self) -> int:
        return rss_kib(self.proc.pid)

    def metric(self, name: str) -> float:
        return scrape(self.metrics, name)


def trust_default_user(client: KubeClient) -> None:
    """The benchmarks' controllers run as admin, whose writes record no author, so their apps act as the default
    user (impersonated, as in production): a platform that trusts such apps binds it to cluster-admin."""
    client.request("create", "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", body={
        "metadata": {"name": "bench-default-user"}, "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": DEFAULT_USER}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}})


@dataclass
class Cluster:
    """`velashard apiserver --simulate-workloads` as a process, with the CRDs installed and namespace bench."""

    server: Server = field(init=False)
    controllers: dict[str, Controller] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.server = start_server(["--simulate-workloads"])
        self.host, self.port, self.token = self.server.host, self.server.port, self.server.token
        self.kubeconfig = self.server.http_kubeconfig(os.path.join(os.path.dirname(self.server.kubeconfig),
                                                                   "kubeconfig"))
        self.client = KubeClient.from_kubeconfig(self.kubeconfig, shard_id="bench", qps=5000, burst=5000)
        try:
            install(self.client)  # also makes the runtime namespace
            self.client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": APPS_NS}})
            trust_default_user(self.client)
        except Exception:
            self.close()
            raise

    def start(self, name: str, *flags: str, shard: str | None = None, wait: bool = True) -> Controller:
        """A controller process; with `shard`, a sharded one whose pod turns Ready once it serves /readyz
        (without `wait`, it is left starting and no pod is made)."""
        metrics, health = free_port(), free_port()
        argv = [sys.executable, "-m", "velashard.cli.main", "--kubeconfig", self.kubeconfig, "--metrics-addr",
                f"127.0.0.1:{metrics}", "--health-addr", f"127.0.0.1:{health}", "--kube-api-qps", "1000",
                "--kube-api-burst", "2000", "--log-level", "warning", "--namespace", RUNTIME_NS]
        if shard is not None:
            argv += ["--enable-sharding", "--shard-id", shard]
        proc = subprocess.Popen(argv + list(flags), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ctl = self.controllers[name] = Controller(name, proc, metrics, health)
        if not wait:
            return ctl
        wait_ready(health)
        if shard is not None:
            self.shard_pod(shard, True)
        return ctl

    def start_master(self, *flags: str) -> Controller:
        ctl = self.start("master", *self._webhook_flags(), *flags, shard=labels.MASTER_SHARD_ID)
        self.wait_for(lambda: self.webhook_registered(), 180, "the master's webhook to register")
        return ctl

    def start_unsharded(self, *flags: str) -> Controller:
        """One controller for every app, as the chart runs it unsharded: with its webhooks (--use-webhook), which
        record every app's author."""
        ctl = self.start("unsharded", "--use-webhook=true", *self._webhook_flags(), *flags)
        self.wait_for(lambda: self.webhook_registered(), 180, "the controller's webhook to register")
        return ctl

    @staticmethod
    def _webhook_flags() -> list[str]:
        port = free_port()
        return ["--webhook-port", str(port), "--webhook-url", f"https://127.0.0.1:{port}", "--controller-identity",
                "admin"]

    def webhook_registered(self) -> bool:
        from velashard.kube.resources import MUTATING_WEBHOOKS
        return bool(self.client.list(MUTATING_WEBHOOKS)["items"])

    def shard_pod(self, shard: str, ready: bool, terminated: bool = False) -> None:
        """The shard's pod as a kubelet reports it: Ready or not, its container running or terminated."""
        name = f"vela-core-{shard}"
        if not self.client.list(PODS, RUNTIME_NS, field_selector=f"metadata.name={name}")["items"]:
            self.client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": name, "namespace": RUNTIME_NS,
                "labels": {labels.POD_NAME_LABEL: labels.POD_NAME_VALUE, labels.SHARD_ID: shard}},
                "spec": {"containers": [{"name": "vela-core", "image": "velashard"}]}})
        state = {"terminated": {"exitCode": 137, "reason": "Error"}} if terminated else {"running": {}}
        self.client.patch_status(PODS, name, {"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [{"name": "vela-core", "ready": ready, "state": state}]}}, RUNTIME_NS)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        ctl = self.controllers.pop(name)
        ctl.proc.send_signal(sig)
        ctl.proc.wait(30)

    def settle(self, seconds: float = 2.0) -> None:
        """Let the processes finish what they are doing, then record each one's idle memory."""
        time.sleep(seconds)
        for ctl in self.controllers.values():
            ctl.baseline_kib = ctl.rss_kib()

    def create_apps(self, start: int, stop: int, threads: int = 4, traits: list | None = None) -> None:
        def worker(indices: range) -> None:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
            for i in indices:
                code, body = request(conn, self.token, "POST",
                                     f"/apis/core.oam.dev/v1beta1/namespaces/{APPS_NS}/applications",
                                     app_body(f"app-{i}", traits=traits))
                if code != 201:
                    raise RuntimeError(f"creating app-{i} answered {code}: {body[:200]!r}")

        workers = [threading.Thread(target=worker, args=(range(start + t, stop, threads),)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()

    def apps(self) -> list[dict]:
        items, _ = self.client.list_all(APPLICATIONS, APPS_NS)
        return items

    def wait_running(self, count: int, timeout: float, shards: set[str] | None = None) -> float:
        """Seconds until `count` apps are running (and, with `shards`, each scheduled to one of them)."""
        started = time.monotonic()

        def done() -> bool:
            items = self.apps()
            return len(items) >= count and all(
                (a.get("status") or {}).get("status") == "running"
                and (shards is None or (a["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID) in shards)
                for a in items)
        self.wait_for(done, timeout, f"{count} apps to run")
        return time.monotonic() - started

    @staticmethod
    def wait_for(check, timeout: float, what: str, interval: float = 0.5) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(interval)
        raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")

    def close(self) -> None:
        for ctl in self.controllers.values():
            if ctl.proc.poll() is None:
                ctl.proc.terminate()
        for ctl in self.controllers.values():
            try:
                ctl.proc.wait(15)
            except subprocess.TimeoutExpired:
                ctl.proc.kill()
        self.server.stop()

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
