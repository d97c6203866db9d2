"""Helpers shared by the end-to-end tests: ports, shard pods, processes, audit records."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from typing import Any

from velashard.apis import labels
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.kubeconfig import write_kubeconfig
from velashard.kube.resources import LEASES, PODS
from tests.integration.helpers import eventually, trust_authorless_apps


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


RUNTIME_NS = "vela-system"


def stop_processes(procs: list[subprocess.Popen]) -> None:
    """SIGTERM every process still running, then wait; kill what does not stop in time."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def shard_pod(kube: KubeClient, shard: str, ready: bool, terminated: bool = False) -> None:
    """The shard's pod as a kubelet reports it: Ready or not, its container running or terminated."""
    name = f"vela-core-{shard}"
    try:
        kube.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name, "namespace": RUNTIME_NS,
            "labels": {labels.POD_NAME_LABEL: labels.POD_NAME_VALUE, labels.SHARD_ID: shard}},
            "spec": {"containers": [{"name": "vela-core", "image": "velashard"}]}})
    except Exception:
        pass
    state = {"terminated": {"exitCode": 137, "reason": "Error"}} if terminated else {"running": {}}
    kube.patch_status(PODS, name, {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}],
        "containerStatuses": [{"name": "vela-core", "ready": ready, "state": state}]}}, RUNTIME_NS)


def wait_for_shard_leases(kube: KubeClient, *shards: str, timeout: float = 90) -> None:
    """A shard is available only once it holds its Lease: wait for that before counting on it."""
    def held() -> bool:
        for shard in shards:
            try:
                if not (kube.get(LEASES, f"velashard-{shard}", RUNTIME_NS).get("spec") or {}).get("holderIdentity"):
                    return False
            except errors.NotFound:
                return False
        return True
    eventually(held, timeout=timeout)
    time.sleep(0.5)  # the master's lease informer sees them


def shard_of(obj: dict) -> str | None:
    return (obj["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID)


def writers_by_app(records: list[dict]) -> dict[str, list[str]]:
    """For each app, the shards that wrote it (status updates, patches), in audit order."""
    out: dict[str, list[str]] = {}
    for record in records:
        if record["resource"] != "applications" or record["verb"] not in ("update", "patch"):
            continue
        agent = record["userAgent"]
        if "velashard/" not in agent or "shard=" not in agent:
            continue
        shard = agent.split("shard=")[1].rstrip(")")
        if shard == "master":
            continue
        seq = out.setdefault(record["name"], [])
        if not seq or seq[-1] != shard:
            seq.append(shard)
    return out


def listening_addresses(port: int) -> set[str]:
    """The local addresses of this machine's TCP sockets listening on `port` (Linux's /proc/net/tcp and tcp6)."""
    import ipaddress

    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            for line in fh.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                address, port_hex = local.split(":")
                if state != "0A" or int(port_hex, 16) != port:  # 0A: LISTEN
                    continue
                raw = bytes.fromhex(address)  # each 32-bit word in host (little-endian) order
                packed = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                found.add(str(ipaddress.ip_address(packed)))
    return found


def grant_tenant(kube: KubeClient, user: str) -> None:
    """RBAC for a tenant who edits applications and what they render (their apps act as them)."""
    kube.request("create", "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", body={
        "metadata": {"name": "app-tenant"}, "rules": [
            {"apiGroups": ["core.oam.dev"], "resources": ["applications"],
             "verbs": ["get", "list", "create", "update", "patch"]},
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"]},
            {"apiGroups": [""], "resources": ["services", "configmaps"], "verbs": ["*"]}]})
    kube.request("create", "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", body={
        "metadata": {"name": f"{user}-app-tenant"}, "subjects": [{"kind": "User", "name": user}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "app-tenant"}})


CHART = os.path.join(os.path.dirname(__file__), "..", "..", "helm", "velashard")
CHART_RELEASE = "kubevela"
MASTER_SA = f"{CHART_RELEASE}-velashard"
SHARD_SA = f"{CHART_RELEASE}-velashard-shard"


def token_kubeconfig(server: Any, kube: KubeClient, service_account: str, path: Any) -> str:
    """A kubeconfig for `service_account` in the runtime namespace, with a token from the TokenRequest API."""
    answer = kube.request("create", "POST", f"/api/v1/namespaces/{RUNTIME_NS}/serviceaccounts/{service_account}/token",
                          body={"spec": {"expirationSeconds": 3600}})
    doc = server.kubeconfig_document()
    doc["users"][0]["user"]["token"] = answer["status"]["token"]
    return write_kubeconfig(str(path), doc)


def chart_identities(server: Any, kube: KubeClient, directory: Any, trust_admin: bool = True) -> tuple[str, str]:
    """What the chart grants, as the processes' identities: real Helm installs helm/velashard with sharding (its
    RBAC and ServiceAccounts; the tests' masters register their own webhooks); returns kubeconfigs for the
    master's and the shards' ServiceAccounts."""
    import helm_python as helm

    # The tests' apps are written by admin (recorded as their author by the masters' webhooks) or past the
    # webhook (acting as the default user): both may do what the apps render, unless a test says otherwise.
    if trust_admin:
        trust_authorless_apps(kube, "admin")
    release = helm.Config(kubeconfig_path=server.kubeconfig, namespace=RUNTIME_NS, storage_driver="memory")
    try:
        # The tests act as `admin`, a shard admin (it may move apps with `velashard reschedule`).
        # The tests installed the built-in definitions with `velashard install` (dev leaves them to the chart).
        release.install(CHART, CHART_RELEASE, {"sharding": {"enabled": True, "shardAdmins": {"users": ["admin"]}},
                                               "webhook": {"enabled": False}, "definitions": {"install": False}},
                        namespace=RUNTIME_NS, create_namespace=True, timeout=60)
    finally:
        release.close()
    return (token_kubeconfig(server, kube, MASTER_SA, os.path.join(directory, "master.kubeconfig")),
            token_kubeconfig(server, kube, SHARD_SA, os.path.join(directory, "shard.kubeconfig")))


class Dev:
    """`velashard dev` as a user runs it (the chart by real Helm, the addon's shards, every pod a process of the
    local kubelet), with `flags` such as `--set replicaCount=2`; its output lines kept."""

    def __init__(self, directory: Any, *flags: str):
        import sys
        import threading

        self.directory = directory
        self.output: list[str] = []
        self.proc = subprocess.Popen([sys.executable, "-m", "velashard.cli.main", "dev", "--dir", str(directory),
                                      *flags], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self._reader = threading.Thread(target=lambda: self.output.extend(iter(self.proc.stdout.readline, "")),
                                        daemon=True)
        self._reader.start()

    def wait_started(self, timeout: float = 240) -> KubeClient:
        """Once dev says its processes are ready: an admin client of its API server."""
        eventually(lambda: any("velashard dev: API server" in line for line in self.output) or
                   self.proc.poll() is not None, timeout=timeout, interval=0.2)
        assert self.proc.poll() is None, "".join(self.output)
        return KubeClient.from_kubeconfig(str(self.directory / "kubeconfig"), shard_id="test", qps=500, burst=500)

    def processes(self) -> list[dict]:
        """The pods' processes that DIR/processes.json lists."""
        import json

        return [p for p in json.loads((self.directory / "processes.json").read_text()) if p["name"] != "apiserver"]

    def masters(self) -> list[dict]:
        """The master pods' processes that are Ready and not terminating."""
        return [p for p in self.processes() if p["name"].startswith("velashard-") and p.get("ready")
                and not p["name"].startswith("velashard-shard-") and not p.get("terminating")]

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._reader.join(timeout=10)
        return "".join(self.output)


def webhook_calls(port: int, ca_pem: bytes, webhook: str = "mutating") -> float:
    """How many admission calls the webhook server on `port` answered (its own metric, on its own /metrics)."""
    import re
    import ssl
    import urllib.request

    context = ssl.create_default_context(cadata=ca_pem.decode())
    context.check_hostname = False
    text = urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", timeout=10, context=context).read().decode()
    return sum(float(v) for v in re.findall(rf'^velashard_webhook_duration_seconds_count{{webhook="{webhook}"}} '
                                            r'([0-9.e+]+)$', text, re.M))


def leader_pod(kube: KubeClient, shard: str = "master") -> str:
    """The pod whose process holds the shard's Lease (identities start with the pod's name)."""
    holder = (kube.get(LEASES, f"velashard-{shard}", RUNTIME_NS).get("spec") or {}).get("holderIdentity") or ""
    return holder.rsplit("_", 1)[0]
