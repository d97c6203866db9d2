"""The master's outage never blocks users: with the master and its webhook processes killed (SIGKILL),
tenants' updates succeed, a tenant's move to another shard is still denied by the shard-label guard (a
ValidatingAdmissionPolicy in the API server), and apps created meanwhile are scheduled once it is back."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.core.install import install
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.resources import MUTATING_WEBHOOKS, NAMESPACES
from tests.e2e.helpers import free_port
from tests.e2e.helpers import RUNTIME_NS, grant_tenant, shard_of, shard_pod, stop_processes
from tests.e2e.test_sharding import app, webhook_serving
from tests.integration.helpers import eventually, trust_authorless_apps


def refuses(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return False
    except OSError:
        return True


def test_users_write_while_the_master_is_down(tmp_path):
    from velashard.apiserver.http.server import APIServer

    server = APIServer(port=0, simulate_workloads=True).start()
    server.write_kubeconfig(str(tmp_path / "kubeconfig"))
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test", qps=500, burst=500)
    alice = KubeClient.from_kubeconfig(server.write_kubeconfig(str(tmp_path / "alice"), user="alice"),
                                       shard_id="alice", qps=500, burst=500)
    webhook_port = free_port()
    procs: list[subprocess.Popen] = []

    def start(shard: str, *extra: str) -> subprocess.Popen:
        # Own process group: killing it kills the master's gunicorn webhook processes with it.
        proc = subprocess.Popen(
            [sys.executable, "-m", "velashard.cli.main", "--kubeconfig", server.kubeconfig, "--enable-sharding",
             "--shard-id", shard, "--namespace", RUNTIME_NS, "--metrics-addr", "127.0.0.1:0",
             "--health-addr", "127.0.0.1:0", *extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        procs.append(proc)
        return proc

    def start_master() -> subprocess.Popen:
        return start("master", "--reschedule-period", "1", "--webhook-port", str(webhook_port), "--webhook-url",
                     f"https://127.0.0.1:{webhook_port}", "--controller-identity", "admin")

    try:
        install(kube, shard_guard_users=["admin"])  # as the chart does: the guard does not need the master
        trust_authorless_apps(kube, "admin")  # admin's apps act as admin; authorless ones as the default user
        kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}})
        grant_tenant(kube, "alice")
        master = start_master()
        start("shard-a")
        start("shard-b")
        for shard in ("master", "shard-a", "shard-b"):
            shard_pod(kube, shard, True)
        eventually(lambda: kube.list(MUTATING_WEBHOOKS)["items"], timeout=90)
        eventually(webhook_serving(webhook_port), timeout=90)
        names = [f"web-{i}" for i in range(10)]
        for name in names:
            assert shard_of(alice.create(APPLICATIONS, app(name))) in ("shard-a", "shard-b")

        os.killpg(master.pid, signal.SIGKILL)
        master.wait(10)
        eventually(lambda: refuses(webhook_port), timeout=10, interval=0.1)

        failures = []
        for i in range(50):
            name = names[i % len(names)]
            try:
                alice.patch(APPLICATIONS, name, {"spec": {"components": [
                    {"name": name, "type": "worker", "properties": {"image": f"busybox:{i}"}}]}}, "apps")
            except errors.KubeError as err:
                failures.append(f"{name}: {err}")
        assert failures == []

        current = alice.get(APPLICATIONS, "web-0", "apps")
        other = "shard-a" if shard_of(current) == "shard-b" else "shard-b"
        try:
            alice.patch(APPLICATIONS, "web-0", {"metadata": {"labels": {labels.SCHEDULED_SHARD_ID: other}}}, "apps")
            raise AssertionError("a tenant moved an app while the master was down")
        except errors.Invalid as err:
            assert err.code == 422
            assert "ValidatingAdmissionPolicy 'velashard-shard-label-guard' with binding " \
                   "'velashard-shard-label-guard' denied request: user \"alice\" may not move application" \
                   in err.message
        assert shard_of(alice.get(APPLICATIONS, "web-0", "apps")) == shard_of(current)

        late = [f"late-{i}" for i in range(3)]
        for name in late:
            assert shard_of(alice.create(APPLICATIONS, app(name))) is None  # admitted, not yet scheduled

        start_master()

        def scheduled_and_running() -> bool:
            items = [kube.get(APPLICATIONS, name, "apps") for name in late]
            return all(shard_of(a) in ("shard-a", "shard-b") and (a.get("status") or {}).get("status") == "running"
                       for a in items)
        eventually(scheduled_and_running, timeout=60, interval=0.5)
        images = {a["metadata"]["name"]: a["spec"]["components"][0]["properties"]["image"]
                  for a in kube.list(APPLICATIONS, "apps")["items"]}
        assert images["web-0"] == "busybox:40" and images["web-9"] == "busybox:49"
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        stop_processes(procs)
        server.stop()
