"""Chaos: a master and 5 slave shards as processes while shards die, freeze or are cut off, new ones join,
the master restarts once and a tenth of the apps are updated all along; afterwards nothing is lost or
handled twice.

The short form runs in CI; `pytest --chaos-long tests/e2e/test_chaos.py` runs 1,000 apps for 5 minutes
with pauses of 5-30 s. In turn a shard is killed (its container reported terminated at once, as the
kubelet does), paused (SIGSTOP, pod NotReady, resumed later and Ready again) or partitioned (pod
NotReady while it runs, Ready again later). The audit check is strict: no shard writes to an app, its
revisions, its tracker or its Deployment outside the interval in which it owned the app (the owners
come from a watch on the apps, the moves from the master's writes in the audit log).
"""

from __future__ import annotations

import logging
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass

import pytest

from velashard.apis import labels
from velashard.apis.oam import APPLICATION_REVISIONS, APPLICATIONS, RESOURCE_TRACKERS
from velashard.core.install import install
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.resources import DEPLOYMENTS, NAMESPACES
from tests.e2e.helpers import (RUNTIME_NS, chart_identities, free_port, shard_of, shard_pod, stop_processes,
                               writers_by_app)
from tests.integration.helpers import eventually

pytestmark = pytest.mark.slow  # deselect with -m "not slow"

log = logging.getLogger("tests.chaos")


@dataclass(frozen=True)
class Scenario:
    apps: int
    seconds: float
    kill_every: float  # seconds between failures (kill, pause, partition in turn)
    converge_timeout: float
    pause: tuple[float, float]  # how long a pause or a partition lasts


SHORT = Scenario(apps=150, seconds=60, kill_every=12, converge_timeout=180, pause=(3.0, 8.0))
LONG = Scenario(apps=1000, seconds=300, kill_every=20, converge_timeout=600, pause=(5.0, 30.0))
LEASE = ["--leader-election-lease-duration", "4s", "--leader-election-renew-deadline", "2.5s",
         "--leader-election-retry-period", "0.5s"]


@pytest.fixture
def scenario(request) -> Scenario:
    return LONG if request.config.getoption("--chaos-long") else SHORT


def chaos_app(i: int, image: str = "busybox:0") -> dict:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": f"app-{i}", "namespace": "apps"},
            "spec": {"components": [{"name": f"app-{i}", "type": "worker", "properties": {"image": image}}]}}


def ready(port: int) -> bool:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200
    except OSError:
        return False


class Fleet:
    """The controller processes: a master and slave shards, each slave with a pod whose readiness we set."""

    def __init__(self, identities: tuple[str, str], kube: KubeClient):
        self.master_kubeconfig, self.shard_kubeconfig = identities  # the chart's ServiceAccounts
        self.kube = kube
        self.procs: dict[str, subprocess.Popen] = {}
        self.next_id = 0
        self.webhook_port = free_port()

    def _spawn(self, shard: str, *flags: str) -> None:
        health = free_port()
        self.procs[shard] = subprocess.Popen(
            [sys.executable, "-m", "velashard.cli.main", "--kubeconfig",
             self.master_kubeconfig if shard == "master" else self.shard_kubeconfig, "--enable-sharding",
             "--shard-id", shard, "--namespace", RUNTIME_NS, "--metrics-addr", "127.0.0.1:0",
             "--health-addr", f"127.0.0.1:{health}", "--kube-api-qps", "500", "--kube-api-burst", "1000",
             "--state-keep-interval", "10", "--log-level", "warning", *LEASE, *flags],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        eventually(lambda: ready(health), timeout=60, interval=0.2)

    def start_master(self) -> None:
        port = self.webhook_port
        self._spawn("master", "--reschedule-period", "1", "--orphan-grace-period", "2", "--webhook-port", str(port),
                    "--webhook-url", f"https://127.0.0.1:{port}")

    def add_shard(self) -> str:
        shard = f"shard-{self.next_id}"
        self.next_id += 1
        self._spawn(shard)
        shard_pod(self.kube, shard, True)
        return shard

    def kill(self, shard: str) -> None:
        proc = self.procs.pop(shard)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        shard_pod(self.kube, shard, False, terminated=True)

    def pause(self, shard: str) -> None:
        self.procs[shard].send_signal(signal.SIGSTOP)
        shard_pod(self.kube, shard, False)

    def resume(self, shard: str) -> None:
        self.procs[shard].send_signal(signal.SIGCONT)
        shard_pod(self.kube, shard, True)

    def restart_master(self) -> None:
        proc = self.procs.pop("master")
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        self.start_master()

    @property
    def shards(self) -> list[str]:
        return [s for s in self.procs if s != "master"]


class Updater(threading.Thread):
    """Changes the image of a tenth of the apps over and over; remembers what each should run."""

    def __init__(self, kube: KubeClient, names: list[str]):
        super().__init__(name="chaos-updater", daemon=True)
        self.kube = kube
        self.wanted = {n: "busybox:0" for n in names}
        self.stop = threading.Event()
        self.updates = self.refused = 0

    def run(self) -> None:
        tag = 0
        while not self.stop.is_set():
            tag += 1
            for name in self.wanted:
                image = f"busybox:{tag}"
                try:
                    self.kube.patch(APPLICATIONS, name, {"spec": {"components": [
                        {"name": name, "type": "worker", "properties": {"image": image}}]}}, "apps")
                    self.wanted[name] = image
                    self.updates += 1
                except errors.KubeError:
                    self.refused += 1  # e.g. the validating webhook is down while the master restarts
                if self.stop.wait(0.1):
                    return


def converged(kube: KubeClient, count: int, available: set[str], wanted: dict[str, str]) -> list[dict]:
    items = kube.list(APPLICATIONS, "apps")["items"]
    if len(items) != count:
        return []
    for a in items:
        status = a.get("status") or {}
        meta = a["metadata"]
        image = a["spec"]["components"][0]["properties"]["image"]
        if status.get("status") != "running" or status.get("observedGeneration") != meta.get("generation") \
                or shard_of(a) not in available or labels.DRAIN in (meta.get("labels") or {}) \
                or image != wanted.get(meta["name"], image):
            return []
    return items


def shard_runs(writers: list[str]) -> list[str]:
    """The slave shards among an app's writers (not the test's own client), one entry per unbroken run."""
    runs: list[str] = []
    for shard in writers:
        if shard.startswith("shard-") and (not runs or runs[-1] != shard):
            runs.append(shard)
    return runs


class Owners(threading.Thread):
    """Each app's owners in the order the API server stored them, from a watch on the apps."""

    def __init__(self, kube: KubeClient):
        super().__init__(name="chaos-owners", daemon=True)
        items, self.rv = kube.list_all(APPLICATIONS, "apps")
        self.kube = kube
        self.owners = {a["metadata"]["name"]: [shard_of(a)] for a in items}
        self.seen = {a["metadata"]["name"]: int(a["metadata"]["resourceVersion"]) for a in items}
        self.stream = None

    def run(self) -> None:
        self.stream = self.kube.watch(APPLICATIONS, "apps", resource_version=self.rv, timeout_seconds=3600)
        try:
            for event in self.stream:
                obj = event["object"]
                if event["type"] in ("ADDED", "MODIFIED") and obj.get("kind") == "Application":
                    seq = self.owners.setdefault(obj["metadata"]["name"], [])
                    if not seq or seq[-1] != shard_of(obj):
                        seq.append(shard_of(obj))
                    self.seen[obj["metadata"]["name"]] = int(obj["metadata"]["resourceVersion"])
        except errors.KubeError:
            pass  # closed at the end

    def caught_up(self, items: list[dict]) -> bool:
        """The watch has delivered every app at least as far as `items` (a later list) shows it: a watch may lag
        behind a list, and a move it has not delivered yet would look like a write outside ownership."""
        return all(self.seen.get(a["metadata"]["name"], 0) >= int(a["metadata"]["resourceVersion"]) for a in items)

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()


def app_of(record: dict) -> str | None:
    """The app whose objects a request wrote: the app, its revisions, its tracker or its Deployment."""
    name, resource = record.get("name") or "", record["resource"]
    if resource in ("applications", "deployments"):
        return name
    if resource == "applicationrevisions":
        return name.rsplit("-v", 1)[0]
    if resource == "resourcetrackers" and name.endswith("-apps"):
        return name[:-len("-apps")]
    return None


def agent_shard(record: dict) -> str | None:
    agent = record.get("userAgent", "")
    return agent.split("shard=")[1].rstrip(")") if "velashard/" in agent and "shard=" in agent else None


def writes_outside_ownership(records: list[dict], owners: dict[str, list[str]]) -> list[tuple]:
    """Shard writes to an app's objects outside the interval in which that shard owned the app.

    The i-th successful write of the master to an app (not its status) is its i-th move, to owners[app][i];
    a write counts against a shard unless it overlaps in time an interval in which the shard owned the app
    (a request and a move that overlap may have been stored in either order)."""
    moves: dict[str, list[tuple[float, float]]] = {}
    writes: list[tuple[str, str, dict]] = []
    for r in records:
        if r["verb"] not in ("create", "update", "patch", "delete") or r.get("code", 0) >= 400:
            continue
        shard, app = agent_shard(r), app_of(r)
        if shard is None or not (shard == "master" or shard.startswith("shard-")) or app not in owners:
            continue
        span = (r["time"] - r.get("durationMs", 0) / 1000.0, r["time"])
        if shard == "master":
            if r["resource"] == "applications" and not r.get("subresource"):
                moves.setdefault(app, []).append(span)
        else:
            writes.append((app, shard, r))
    bad = []
    for app, seq in owners.items():
        if len(moves.get(app, [])) != len(seq) - 1:
            bad.append((app, "moves and owners disagree", len(moves.get(app, [])), seq))
    for app, shard, r in writes:
        edges = [(float("-inf"), float("-inf"))] + moves.get(app, []) + [(float("inf"), float("inf"))]
        start, end = r["time"] - r.get("durationMs", 0) / 1000.0, r["time"]
        if not any(owner == shard and start <= edges[i + 1][1] and end >= edges[i][0]
                   for i, owner in enumerate(owners[app])):
            bad.append((app, shard, r["verb"], r["resource"], r.get("name"), r["seq"]))
    return bad


def test_chaos_nothing_lost_nothing_handled_twice(tmp_path, scenario: Scenario):
    from velashard.apiserver.http.server import APIServer

    server = APIServer(port=0, simulate_workloads=True).start()
    server.write_kubeconfig(str(tmp_path / "kubeconfig"))
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="chaos", qps=1000, burst=1000)
    install(kube)
    fleet = Fleet(chart_identities(server, kube, tmp_path), kube)
    rng = random.Random(20261122)
    # A random tenth (every tenth would, under round-robin, all sit on one shard).
    updater = Updater(kube, [f"app-{i}" for i in sorted(rng.sample(range(scenario.apps), scenario.apps // 10))])
    owners: Owners | None = None
    try:
        kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}})
        fleet.start_master()
        for _ in range(5):
            fleet.add_shard()
        for i in range(scenario.apps):
            kube.create(APPLICATIONS, chaos_app(i))
        eventually(lambda: converged(kube, scenario.apps, set(fleet.shards), {}), timeout=scenario.converge_timeout,
                   interval=1)
        since = server.audit.since(0)["lastSeq"]
        owners = Owners(kube)
        owners.start()
        updater.start()
        started = time.monotonic()
        next_kill, restarted = started + scenario.kill_every, False
        done: dict[str, list[str]] = {"kill": [], "pause": [], "partition": []}
        back: dict[str, float] = {}  # paused or partitioned shards -> when they come back
        failures = ["kill", "pause", "partition"]
        while time.monotonic() - started < scenario.seconds:
            now = time.monotonic()
            for shard in [s for s, at in back.items() if at <= now]:
                del back[shard]
                fleet.resume(shard)  # SIGCONT is harmless for a shard that was only cut off
            if now >= next_kill:
                failure = failures[sum(map(len, done.values())) % len(failures)]
                victim = rng.choice([s for s in fleet.shards if s not in back])
                if failure == "kill":
                    fleet.kill(victim)
                    fleet.add_shard()
                elif failure == "pause":
                    fleet.pause(victim)
                    back[victim] = now + rng.uniform(*scenario.pause)
                else:
                    shard_pod(kube, victim, False)
                    back[victim] = now + rng.uniform(*scenario.pause)
                done[failure].append(victim)
                next_kill += scenario.kill_every
            if not restarted and time.monotonic() - started >= scenario.seconds / 2:
                fleet.restart_master()
                restarted = True
            time.sleep(0.2)
        for shard in back:
            fleet.resume(shard)
        updater.stop.set()
        updater.join(10)
        assert all(done.values()) and restarted and updater.updates > 0, done

        available = set(fleet.shards)
        items = eventually(lambda: converged(kube, scenario.apps, available, updater.wanted),
                           timeout=scenario.converge_timeout, interval=1)
        owner = {a["metadata"]["name"]: shard_of(a) for a in items}
        # Every app healthy, on a live shard, running the image last asked for.
        for a in items:
            assert all(c["status"] == "True" for c in a["status"]["conditions"]), a["status"]["conditions"]
        # Revisions and trackers carry their app's shard.
        for rev in kube.list(APPLICATION_REVISIONS, "apps")["items"]:
            app_name = rev["metadata"]["labels"][labels.APP_NAME]
            assert shard_of(rev) == owner[app_name], rev["metadata"]
        trackers = {t["metadata"]["labels"][labels.APP_NAME]: t for t in kube.list(RESOURCE_TRACKERS)["items"]
                    if t["metadata"]["labels"].get(labels.APP_NAMESPACE) == "apps"}
        assert set(trackers) == set(owner)
        assert all(shard_of(trackers[name]) == shard for name, shard in owner.items())
        # Every managed resource there, none orphaned, each with the app's current spec.
        deployments = {d["metadata"]["name"]: d for d in kube.list(DEPLOYMENTS, "apps")["items"]}
        assert set(deployments) == set(owner), set(deployments) ^ set(owner)
        for a in items:
            image = a["spec"]["components"][0]["properties"]["image"]
            live = deployments[a["metadata"]["name"]]["spec"]["template"]["spec"]["containers"][0]["image"]
            assert live == image, (a["metadata"]["name"], live, image)
        # No shard wrote to an app's objects outside the interval in which it owned the app.
        records = server.audit.since(since)["items"]
        writers = {name: shard_runs(seq) for name, seq in writers_by_app(records).items()}
        assert any(len(seq) > 1 for seq in writers.values()), writers  # updated apps did change hands
        latest = kube.list(APPLICATIONS, "apps")["items"]  # listed after the records were read: it has their moves
        eventually(lambda: owners.caught_up(latest), timeout=30, interval=0.2)
        owners.close()
        owners.join(5)
        assert not writes_outside_ownership(records, owners.owners)[:20]
        log.info("chaos run done: %s, %d updates (%d refused), %d apps changed shard writers", done,
                 updater.updates, updater.refused, sum(len(s) > 1 for s in writers.values()))
    finally:
        if owners is not None:
            owners.close()
        updater.stop.set()
        stop_processes(list(fleet.procs.values()))
        server.stop()
