"""Fenced shards end to end: a master and two slave shards as processes, with short lease timings.

- pause: a shard frozen (SIGSTOP) with work queued and its pod NotReady loses its apps once its Lease
  expired as the master sees it; resumed, it writes nothing but its own Lease (the audit log says so).
- partition: NotReady while running and renewing: it gets no new apps and keeps its own.
- crash: SIGKILL with the container reported terminated: its apps move within grace + 5 s.
- the master's webhook server processes die with it, SIGKILL included.

`pytest --fence-repeat N` (or VELASHARD_FENCE_REPEAT=N) repeats pause and partition N times.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.core.install import install
from velashard.kube.client import KubeClient
from velashard.kube.resources import DEPLOYMENTS, NAMESPACES
from tests.e2e.helpers import free_port
from tests.e2e.helpers import RUNTIME_NS, shard_of, shard_pod, stop_processes, wait_for_shard_leases
from tests.integration.helpers import eventually, trust_authorless_apps

LEASE = ["--leader-election-lease-duration", "4s", "--leader-election-renew-deadline", "2.5s",
         "--leader-election-retry-period", "0.5s"]
GRACE = 2.0
WRITES = ("create", "update", "patch", "delete", "deletecollection")


def probe(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError:
        return 0, ""


class Fleet:
    def __init__(self, server, kube: KubeClient):
        self.server, self.kube = server, kube
        self.procs: dict[str, subprocess.Popen] = {}
        self.health: dict[str, int] = {}
        self.apps = 0
        self.image = 0

    def start(self, shard: str, *flags: str) -> subprocess.Popen:
        self.health[shard] = free_port()
        self.procs[shard] = subprocess.Popen(
            [sys.executable, "-m", "velashard.cli.main", "--kubeconfig", self.server.kubeconfig, "--enable-sharding",
             "--shard-id", shard, "--namespace", RUNTIME_NS, "--metrics-addr", "127.0.0.1:0", "--health-addr",
             f"127.0.0.1:{self.health[shard]}", "--state-keep-interval", "5", "--log-level", "warning", *LEASE,
             *flags], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return self.procs[shard]

    def create_apps(self, count: int) -> list[str]:
        names = [f"app-{i}" for i in range(self.apps, self.apps + count)]
        self.apps += count
        for name in names:
            self.kube.create(APPLICATIONS, app(name, self.current_image()))
        return names

    def current_image(self) -> str:
        return f"busybox:{self.image}"

    def update_all(self) -> None:
        self.image += 1
        for a in self.kube.list(APPLICATIONS, "apps")["items"]:
            name = a["metadata"]["name"]
            self.kube.patch(APPLICATIONS, name, {"spec": {"components": [
                {"name": name, "type": "worker", "properties": {"image": self.current_image()}}]}}, "apps")

    def owned_by(self, shard: str) -> list[str]:
        return [a["metadata"]["name"] for a in self.kube.list(
            APPLICATIONS, "apps", label_selector=f"{labels.SCHEDULED_SHARD_ID}={shard}")["items"]]

    def converged(self, shards: set[str]) -> bool:
        """Every app running its newest spec on one of `shards`, its Deployment running the newest image."""
        items = self.kube.list(APPLICATIONS, "apps")["items"]
        deployments = {d["metadata"]["name"]: d for d in self.kube.list(DEPLOYMENTS, "apps")["items"]}
        image = self.current_image()
        for a in items:
            status, meta = a.get("status") or {}, a["metadata"]
            live = deployments.get(meta["name"])
            if status.get("status") != "running" or status.get("observedGeneration") != meta.get("generation") \
                    or shard_of(a) not in shards or live is None \
                    or live["spec"]["template"]["spec"]["containers"][0]["image"] != image:
                return False
        return len(items) == self.apps


def app(name: str, image: str) -> dict:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": {"name": name, "namespace": "apps"},
            "spec": {"components": [{"name": name, "type": "worker", "properties": {"image": image}}]}}


def writes_by(records: list[dict], shard: str) -> list[dict]:
    return [r for r in records if r["verb"] in WRITES and r.get("code", 0) < 400
            and f"(shard={shard})" in r.get("userAgent", "") and "velashard/" in r.get("userAgent", "")]


def other_than_own_lease(records: list[dict], shard: str) -> list[tuple]:
    return [(r["verb"], r["resource"], r.get("name")) for r in writes_by(records, shard)
            if not (r["resource"] == "leases" and r.get("name") == f"velashard-{shard}")]


@pytest.fixture
def fleet(tmp_path):
    from velashard.apiserver.http.server import APIServer
    server = APIServer(port=0, simulate_workloads=True).start()
    server.write_kubeconfig(str(tmp_path / "kubeconfig"))
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test", qps=500, burst=500)
    fleet = Fleet(server, kube)
    try:
        install(kube)
        trust_authorless_apps(kube, "admin")  # admin's apps act as admin; authorless ones as the default user
        kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}})
        fleet.start("master", "--reschedule-period", "1", "--orphan-grace-period", str(GRACE), "--disable-webhooks")
        for shard in ("shard-a", "shard-b"):
            fleet.start(shard)
            shard_pod(kube, shard, True)
        wait_for_shard_leases(kube, "master", "shard-a", "shard-b")
        yield fleet
    finally:
        for proc in fleet.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
        stop_processes(list(fleet.procs.values()))
        server.stop()


def test_pause_and_partition_never_write_after_the_move(fleet, request):
    kube, server = fleet.kube, fleet.server
    for round_ in range(request.config.getoption("--fence-repeat")):
        # Pause: new apps spread over both shards (shard-a Ready again after the last round).
        fleet.create_apps(10)
        eventually(lambda: fleet.converged({"shard-a", "shard-b"}) and fleet.owned_by("shard-a"), timeout=60,
                   interval=0.5)
        victims = fleet.owned_by("shard-a")
        fleet.update_all()  # shard-a has work queued when it freezes
        fleet.procs["shard-a"].send_signal(signal.SIGSTOP)
        shard_pod(kube, "shard-a", False)
        paused = time.monotonic()
        eventually(lambda: not fleet.owned_by("shard-a"), timeout=30, interval=0.2)
        moved_after = time.monotonic() - paused
        moved_seq = server.audit.since(0)["lastSeq"]
        # Not before the lease expired (its last renewal may precede the pause by a retry period), and
        # within lease duration + 5 s.
        assert 4.0 - 0.5 <= moved_after <= 4.0 + 5.0, moved_after
        fleet.update_all()
        eventually(lambda: fleet.converged({"shard-b"}), timeout=60, interval=0.5)
        fleet.procs["shard-a"].send_signal(signal.SIGCONT)
        # It wakes fenced, stops, re-acquires its lease, re-lists and is ready again.
        eventually(lambda: probe(fleet.health["shard-a"])[0] == 200, timeout=30, interval=0.2)
        time.sleep(2)  # anything it still meant to do would have been sent by now
        assert not other_than_own_lease(server.audit.since(moved_seq)["items"], "shard-a"), round_
        assert fleet.converged({"shard-b"}) and set(victims) <= set(fleet.owned_by("shard-b"))

        # Partition: NotReady while running and renewing its lease.
        shard_pod(kube, "shard-a", True)
        fleet.create_apps(6)
        eventually(lambda: fleet.converged({"shard-a", "shard-b"}) and fleet.owned_by("shard-a"), timeout=60,
                   interval=0.5)
        kept = set(fleet.owned_by("shard-a"))
        shard_pod(kube, "shard-a", False)
        time.sleep(1)  # the master sees it
        fresh = fleet.create_apps(4)
        fleet.update_all()
        time.sleep(6)  # longer than a lease duration: a suspect still renewing keeps its apps
        assert set(fleet.owned_by("shard-a")) == kept
        assert not set(fresh) & kept and all(
            shard_of(kube.get(APPLICATIONS, name, "apps")) == "shard-b" for name in fresh)  # no new apps
        shard_pod(kube, "shard-a", True)
        eventually(lambda: fleet.converged({"shard-a", "shard-b"}), timeout=60, interval=0.5)


def test_crash_moves_apps_within_grace_plus_5s(fleet):
    kube = fleet.kube
    fleet.create_apps(10)
    eventually(lambda: fleet.converged({"shard-a", "shard-b"}) and fleet.owned_by("shard-a"), timeout=60,
               interval=0.5)
    fleet.procs["shard-a"].send_signal(signal.SIGKILL)
    fleet.procs["shard-a"].wait(10)
    shard_pod(kube, "shard-a", False, terminated=True)
    crashed = time.monotonic()
    eventually(lambda: not fleet.owned_by("shard-a"), timeout=30, interval=0.2)
    assert time.monotonic() - crashed <= GRACE + 5.0
    eventually(lambda: fleet.converged({"shard-b"}), timeout=60, interval=0.5)


def children(pid: int) -> set[int]:
    """Every descendant of `pid` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    parents[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    out, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - out
        out |= frontier
    return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_webhook_processes_die_with_a_sigkilled_master(tmp_path):
    from velashard.apiserver.http.server import APIServer
    server = APIServer(port=0).start()
    server.write_kubeconfig(str(tmp_path / "kubeconfig"))
    port = free_port()
    master = subprocess.Popen(
        [sys.executable, "-m", "velashard.cli.main", "--kubeconfig", server.kubeconfig, "--enable-sharding",
         "--namespace", RUNTIME_NS, "--metrics-addr", "127.0.0.1:0", "--health-addr", "127.0.0.1:0",
         "--webhook-port", str(port), "--webhook-url", f"https://127.0.0.1:{port}", *LEASE],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    webhook: set[int] = set()
    try:
        install(KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test"))
        # The arbiter and its worker.
        webhook = eventually(lambda: (lambda c: c if len(c) >= 2 else None)(children(master.pid)), timeout=60,
                             interval=0.2)
        master.send_signal(signal.SIGKILL)
        master.wait(10)
        eventually(lambda: not any(alive(p) for p in webhook), timeout=15, interval=0.2)
    finally:
        if master.poll() is None:
            master.kill()
        for pid in webhook | children(master.pid):  # what outlived a failed run
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        server.stop()
