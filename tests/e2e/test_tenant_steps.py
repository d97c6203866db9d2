"""Tenants attack a shared shard through workflow steps, and every path is refused with a condition.

As tests/e2e/test_tenant_probe.py plays it (its machinery): real Helm installs helm/velashard with sharding and
authentication; a master and one shard run as processes with the chart's ServiceAccounts' tokens, so every app
lands on that shard. Two tenants are ServiceAccounts using only their own tokens: team-a may edit Applications,
ConfigMaps, Services and Deployments in team-a; team-b may edit Applications in team-b. Two servers run on
loopback: one answers (the shard may call it: --workflow-http-allow names its port), one accepts connections and
never answers (allowed too). Through steps team-a tries cloud metadata in every address form, the controller's
own ports, a redirect to metadata, an endless body, email to metadata and with a forged header, Prometheus on
metadata, a refused clean-up, an overflowing suspend and a backtracking regular expression; each is refused (or
harmless), saying what. Its legitimate steps work. Then team-b's 16 apps wait on 40 silent requests each while
team-a's next app is reconciled at once.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.e2e.helpers import (RUNTIME_NS, chart_identities, free_port, shard_pod, stop_processes,
                               wait_for_shard_leases)
from tests.integration.helpers import eventually
from tests.workflowsteps import install_missing
from velashard.apis.oam import APPLICATIONS
from velashard.core.install import install
from velashard.kube.client import KubeClient
from velashard.kube.kubeconfig import write_kubeconfig
from velashard.kube.resources import CONFIGMAPS, NAMESPACES, SERVICEACCOUNTS

pytest.importorskip("helm_python", reason="helm-python-sdk is installed by the test extra")

NS, OTHER, SHARD = "team-a", "team-b", "shard-a"
TENANT = f"system:serviceaccount:{NS}:tenant"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
RULES = {NS: [{"apiGroups": ["core.oam.dev"], "resources": ["applications"], "verbs": ["*"]},
              {"apiGroups": [""], "resources": ["configmaps", "services"], "verbs": ["*"]},
              {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"]}],
         OTHER: [{"apiGroups": ["core.oam.dev"], "resources": ["applications"], "verbs": ["*"]}]}
PATHOLOGICAL = '"' + "a" * 40 + '!" =~ "^(a+)+$"'


class _Answering(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/jump":
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"x" * (3 << 20) if self.path == "/big" else b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args) -> None:
        pass


def _silent() -> tuple[socket.socket, list]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    held: list = []

    def accept() -> None:
        while True:
            try:
                held.append(sock.accept()[0])
            except OSError:
                return
    threading.Thread(target=accept, daemon=True).start()
    return sock, held


def tenant_client(server, admin: KubeClient, directory, ns: str) -> KubeClient:
    admin.create(SERVICEACCOUNTS, {"apiVersion": "v1", "kind": "ServiceAccount",
                                   "metadata": {"name": "tenant", "namespace": ns}})
    admin.request("create", "POST", f"{RBAC}/namespaces/{ns}/roles",
                  body={"metadata": {"name": "tenant"}, "rules": RULES[ns]})
    admin.request("create", "POST", f"{RBAC}/namespaces/{ns}/rolebindings", body={
        "metadata": {"name": "tenant"}, "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": ns}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant"}})
    token = admin.request("create", "POST", f"/api/v1/namespaces/{ns}/serviceaccounts/tenant/token",
                          body={"spec": {"expirationSeconds": 3600}})["status"]["token"]
    doc = server.kubeconfig_document()
    doc["users"][0]["user"]["token"] = token
    return KubeClient.from_kubeconfig(write_kubeconfig(str(directory / f"{ns}.kubeconfig"), doc),
                                      shard_id=f"tenant-{ns}", qps=200, burst=200)


def application(name: str, steps: list[dict], ns: str = NS, **spec) -> dict:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": {"name": name, "namespace": ns},
            "spec": {"components": [], "workflow": {"steps": steps, **spec}}}


def request(url: str, **fields) -> dict:
    return {"name": "call", "type": "request", "properties": {"url": url}, **fields}


def email(host: str, port: int = 25, subject: str = "hello") -> dict:
    return {"name": "call", "type": "notification", "properties": {"email": {
        "from": {"address": "ci@example.com", "password": {"value": ""}, "host": host, "port": port},
        "to": ["ops@example.com"], "content": {"subject": subject, "body": "hi"}}}}


def condition(admin: KubeClient, name: str, ctype: str, ns: str = NS) -> dict:
    status = admin.get(APPLICATIONS, name, ns).get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == ctype), {})


def phase(admin: KubeClient, name: str, ns: str = NS) -> str | None:
    return (admin.get(APPLICATIONS, name, ns).get("status") or {}).get("status")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from velashard.apiserver.http.server import APIServer

    server = APIServer(port=0, simulate_workloads=True).start()
    directory = tmp_path_factory.mktemp("steps")
    admin = KubeClient.from_kubeconfig(server.write_kubeconfig(str(directory / "admin")), shard_id="test",
                                       qps=500, burst=500)
    install(admin)
    install_missing(admin)
    for ns in (NS, OTHER):
        admin.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    master_kubeconfig, shard_kubeconfig = chart_identities(server, admin, directory, trust_admin=False)
    tenants = {ns: tenant_client(server, admin, directory, ns) for ns in (NS, OTHER)}
    answering = ThreadingHTTPServer(("127.0.0.1", 0), _Answering)
    answering.daemon_threads = True
    threading.Thread(target=answering.serve_forever, daemon=True).start()
    silent, held = _silent()
    ports = {"answering": answering.server_address[1], "silent": silent.getsockname()[1]}
    allow = f'--workflow-http-allow=127.0.0.1:{ports["answering"]},127.0.0.1:{ports["silent"]}'
    webhook_port = free_port()
    procs: dict[str, subprocess.Popen] = {}
    for shard in ("master", SHARD):
        master = shard == "master"
        ports[shard] = free_port()
        extra = ["--webhook-port", str(webhook_port), "--webhook-url", f"https://127.0.0.1:{webhook_port}",
                 "--controller-identity", f"system:serviceaccount:{RUNTIME_NS}:kubevela-velashard"] if master else []
        procs[shard] = subprocess.Popen(
            [sys.executable, "-m", "velashard.cli.main", "--kubeconfig", master_kubeconfig if master else
             shard_kubeconfig, "--enable-sharding", "--shard-id", shard, "--namespace", RUNTIME_NS,
             "--metrics-addr", f"127.0.0.1:{ports[shard]}", "--health-addr", "127.0.0.1:0", allow, *extra],
            stdout=open(directory / f"{shard}.log", "ab"), stderr=subprocess.STDOUT, start_new_session=master)
    try:
        shard_pod(admin, "master", True)
        shard_pod(admin, SHARD, True)
        wait_for_shard_leases(admin, "master", SHARD)
        from tests.e2e.test_sharding import webhook_serving
        from velashard.kube.resources import MUTATING_WEBHOOKS
        eventually(lambda: admin.list(MUTATING_WEBHOOKS)["items"], timeout=30)
        eventually(webhook_serving(webhook_port), timeout=30)
        yield admin, tenants, ports, held
    finally:
        stop_processes(list(procs.values()))
        answering.shutdown()
        silent.close()
        server.stop()


def paths(ports: dict) -> dict[str, tuple[dict, str]]:
    """Each app, and what the condition that refuses it must say."""
    ok = f'http://127.0.0.1:{ports["answering"]}'
    return {
        "metadata": (application("metadata", [request("http://169.254.169.254/latest/meta-data/")]),
                     "169.254.169.254 port 80: a link-local address"),
        "metadata-decimal": (application("metadata-decimal", [request("http://2852039166/latest/meta-data/")]),
                             "2852039166 (169.254.169.254) port 80: a link-local address"),
        "metadata-mapped": (application("metadata-mapped", [request("http://[::ffff:169.254.169.254]/latest/")]),
                            "(IPv4 169.254.169.254 inside)"),
        "metadata-name": (application("metadata-name", [request("http://metadata.google.internal/computeMetadata/")]),
                          "metadata.google.internal is a cloud metadata service: refused"),
        "own-metrics": (application("own-metrics", [request(f'http://127.0.0.1:{ports[SHARD]}/metrics')]),
                        "a port the controller itself listens on"),
        "master-metrics": (application("master-metrics", [request(f'http://127.0.0.1:{ports["master"]}/metrics')]),
                           "a loopback address (--workflow-http-block-loopback): refused"),
        "redirect": (application("redirect", [request(f"{ok}/jump")]), "169.254.169.254 port 80: a link-local"),
        "endless-body": (application("endless-body", [request(f"{ok}/big")]),
                         "the response is larger than 1048576 bytes"),
        "email-metadata": (application("email-metadata", [email("169.254.169.254")]),
                           "169.254.169.254 port 25: a link-local address"),
        "email-header": (application("email-header", [email("127.0.0.1", ports["answering"],
                                                            "hi\r\nBcc: everyone@example.com")]),
                         "the email cannot be written"),
        "metrics-metadata": (application("metrics-metadata", [{"name": "call", "type": "check-metrics", "properties": {
            "query": "up", "condition": ">0", "metricEndpoint": "http://169.254.169.254:9090"}}]),
            "169.254.169.254 port 9090: a link-local address"),
        "clean-jobs": (application("clean-jobs", [{"name": "call", "type": "clean-jobs"}]),
                       f"{TENANT} cannot deletecollection jobs.batch in namespace {NS}"),
        "huge-suspend": (application("huge-suspend", [{"name": "call", "type": "suspend",
                                                       "properties": {"duration": "99999999999h"}}]),
                         "is longer than 100 years"),
    }


def test_every_step_path_is_refused_with_a_condition_and_legitimate_steps_work(cluster):
    admin, tenants, ports, _ = cluster
    tenant = tenants[NS]
    attempts = paths(ports)
    for app, _ in attempts.values():
        tenant.create(APPLICATIONS, app)
    tenant.create(APPLICATIONS, application("legitimate", [
        request(f'http://127.0.0.1:{ports["answering"]}/fine', outputs=[{"name": "ok", "valueFrom": "response.ok"}]),
        {"name": "settings", "type": "apply-object", "properties": {"value": {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "from-a-step", "namespace": NS}, "data": {"k": "v"}}}},
        {"name": "never", "type": "request", "if": PATHOLOGICAL,
         "properties": {"url": "http://169.254.169.254/"}}]))

    def refused() -> dict[str, str]:
        found = {name: condition(admin, name, "WorkflowFinished") for name in attempts}
        done = all(c.get("status") == "False" and want in c.get("message", "")
                   for c, (_, want) in zip(found.values(), attempts.values()))
        return found if done else {}

    try:
        conditions = eventually(refused, timeout=120, interval=1.0)
    except AssertionError:
        pytest.fail(f"not every path refused: { {n: condition(admin, n, 'WorkflowFinished') for n in attempts} }")
    for name, (_, want) in attempts.items():
        assert want in conditions[name]["message"], (name, conditions[name])
        assert conditions[name]["message"].startswith("call: "), (name, conditions[name])  # the failed step's
    assert condition(admin, "clean-jobs", "Authorized")["status"] == "False"
    try:
        eventually(lambda: phase(admin, "legitimate") == "running", timeout=90)
    except AssertionError:
        pytest.fail(str(admin.get(APPLICATIONS, "legitimate", NS).get("status")))
    steps = {s["name"]: s for s in admin.get(APPLICATIONS, "legitimate", NS)["status"]["workflow"]["steps"]}
    assert steps["call"]["phase"] == "succeeded" and steps["settings"]["phase"] == "succeeded"
    assert steps["never"]["phase"] == "skipped"  # the backtracking pattern is evaluated, at once
    assert admin.get(CONFIGMAPS, "from-a-step", NS)["data"] == {"k": "v"}
    assert "x" * 1000 not in str(admin.get(APPLICATIONS, "endless-body", NS)["status"])


def test_another_tenants_silent_requests_do_not_delay_this_tenants_app(cluster):
    admin, tenants, ports, held = cluster
    silent = f'http://127.0.0.1:{ports["silent"]}'
    for i in range(16):
        tenants[OTHER].create(APPLICATIONS, application(f"noisy-{i}", [
            {"name": f"ask-{j}", "type": "request", "properties": {"url": f"{silent}/{i}/{j}"}} for j in range(40)],
            ns=OTHER, mode={"steps": "DAG"}))

    def all_waiting() -> bool:
        steps = [s for i in range(16) for s in ((admin.get(APPLICATIONS, f"noisy-{i}", OTHER).get("status") or {})
                                                 .get("workflow") or {}).get("steps") or []]
        return len(steps) == 640 and any(s["phase"] == "running" for s in steps)

    eventually(all_waiting, timeout=180, interval=1.0)
    assert held  # the calls reached the silent server: they are pending, not refused
    started = time.monotonic()
    tenants[NS].create(APPLICATIONS, {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
                                      "metadata": {"name": "quiet", "namespace": NS}, "spec": {"components": [{
                                          "name": "settings", "type": "k8s-objects", "properties": {"objects": [{
                                              "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "quiet"},
                                              "data": {"k": "v"}}]}}]}})
    eventually(lambda: phase(admin, "quiet") == "running", timeout=60, interval=0.05)
    # 2 s is the goal (hack/bench_tenant_isolation.py measures it); this bound leaves room for a busy machine and
    # still fails when the workers wait on the calls (16 apps x 40 requests x 3 s each)
    assert time.monotonic() - started < 20
