"""Day 2 for slave shards, measured from the API server (its audit log, resourceVersions), never from logs.

One fleet for the module, as the chart runs it: the chart's RBAC and ServiceAccounts (real Helm), a master and
two slave shards with leader election, each process in a pod that `Kubelet` below reports as dev's local
kubelet does (velashard/dev/kubelet.py): the container running, Ready from its /readyz, terminated with a
restart count when the process dies, started again after a back-off.

- restarts: both shards killed (SIGKILL: the new process waits out its predecessor's Lease) or stopped (SIGTERM:
  the Lease released, taken at once) in turn, and restarted, 10 times back to back: no app moves, and nothing
  is written but Leases and Events, while every restarted shard reconciles all its apps again;
- a send past the fence: shard-0 talks to the API server through a proxy that forwards one Deployment update
  and then holds its answer while holding the shard's lease renewals, until the shard's fence has tripped, and
  then resets the connection: the update reached the server once, and nothing was sent again before the
  shard held its Lease again (urllib3 re-sent it at once);
- rotated credentials: shard-1 reads a projected ServiceAccount token from a file; the token is replaced in
  place and the old one revoked: every request refused with 401 is sent again with the new token and
  succeeds, and the shard keeps its Lease and its apps.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from tests.e2e.helpers import (CHART, CHART_RELEASE, MASTER_SA, RUNTIME_NS, SHARD_SA, free_port, shard_of,
                               stop_processes, token_kubeconfig)
from tests.integration.helpers import eventually, trust_authorless_apps
from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.core.install import install
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.kubeconfig import write_kubeconfig, write_private
from velashard.kube.resources import DEPLOYMENTS, LEASES, NAMESPACES, PODS, SECRETS

helm = pytest.importorskip("helm_python", reason="helm-python-sdk is installed by the test extra")

LEASE = ["--leader-election-lease-duration", "4s", "--leader-election-renew-deadline", "2.5s",
         "--leader-election-retry-period", "0.5s"]
GRACE = 60  # the chart's default; a restart here takes 10-30 s, on a busy machine too
SHARDS = ("shard-0", "shard-1")
APPS = 40
WRITES = ("create", "update", "patch", "delete", "deletecollection")
# Requests with a create verb that change nothing: questions to the API server.
REVIEWS = ("selfsubjectaccessreviews", "selfsubjectreviews", "subjectaccessreviews", "tokenreviews")


def scrape(port: int, metric: str) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return None
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(metric + " ")
              or line.startswith(metric + "{")]
    return sum(values) if values else None


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


class Pod:
    def __init__(self, shard: str, argv: list[str], log: str):
        self.shard, self.argv, self.log = shard, argv, log
        self.name = f"vela-core-{shard}"
        self.process: subprocess.Popen | None = None
        self.restarts = 0
        self.health = self.metrics = 0
        self.ready: bool | None = None


class Kubelet:
    """The shard pods' processes, run and reported as dev's local kubelet does."""

    def __init__(self, kube: KubeClient):
        self.kube = kube
        self.pods: dict[str, Pod] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._probe, daemon=True)
        self._thread.start()

    def run(self, shard: str, argv: list[str], log: str) -> Pod:
        pod = self.pods[shard] = Pod(shard, argv, log)
        self.kube.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": pod.name, "namespace": RUNTIME_NS,
            "labels": {labels.POD_NAME_LABEL: labels.POD_NAME_VALUE, labels.SHARD_ID: shard}},
            "spec": {"containers": [{"name": "vela-core", "image": "velashard"}]}})
        self._start(pod)
        return pod

    def _start(self, pod: Pod) -> None:
        with self._lock:
            pod.health, pod.metrics = free_port(), free_port()
            with open(pod.log, "ab") as out:
                pod.process = subprocess.Popen(pod.argv + ["--health-addr", f"127.0.0.1:{pod.health}",
                                                           "--metrics-addr", f"127.0.0.1:{pod.metrics}"],
                                               stdout=out, stderr=subprocess.STDOUT)
            self._status(pod, ready=False, state={"running": {}})

    def kill(self, shard: str, sig: int = signal.SIGKILL, backoff: float = 1.0) -> threading.Thread:
        """Signal the shard's process and wait for it to end; it is reported terminated, then started again after
        `backoff` (in a thread, returned)."""
        pod = self.pods[shard]
        with self._lock:
            assert pod.process is not None
            pod.process.send_signal(sig)
            code = pod.process.wait(20)
            pod.process = None
            pod.restarts += 1
            self._status(pod, ready=False, state={"terminated": {"exitCode": code if code >= 0 else 128 - code}})

        def restart() -> None:
            time.sleep(backoff)
            self._start(pod)
        thread = threading.Thread(target=restart, daemon=True)
        thread.start()
        return thread

    def _probe(self) -> None:
        while not self._stop.wait(0.25):
            with self._lock:
                pods = [(p, p.health) for p in self.pods.values() if p.process is not None]
            for pod, port in pods:
                is_ready = ready(port)
                with self._lock:
                    if pod.process is not None and pod.health == port and is_ready != pod.ready:
                        self._status(pod, ready=is_ready, state={"running": {}})

    def _status(self, pod: Pod, ready: bool, state: dict) -> None:
        pod.ready = ready
        self.kube.patch_status(PODS, pod.name, {"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True" if ready else "False"}], "containerStatuses": [
            {"name": "vela-core", "ready": ready, "restartCount": pod.restarts, "state": state}]}}, RUNTIME_NS)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        stop_processes([p.process for p in self.pods.values() if p.process is not None])


class SendProxy:
    """A TCP proxy to the API server that reads the request heads its client sends. Once `arm`ed it forwards the
    first request `matches` picks and holds its answer for `stall` seconds, holding meanwhile every request
    `holds` picks; then it resets that connection and lets the held requests go on `release_after` seconds
    later."""

    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.matches = self.holds = lambda method, path: False
        self.stall = self.release_after = 0.0
        self.stalled: tuple[str, str] | None = None
        self.holding, self.released = threading.Event(), threading.Event()
        self.released.set()
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, matches, holds, stall: float, release_after: float) -> None:
        self.stalled = None
        self.released.clear()
        self.matches, self.holds, self.stall, self.release_after = matches, holds, stall, release_after

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        server = socket.create_connection(self.upstream)
        answering = threading.Event()
        answering.set()
        threading.Thread(target=self._answers, args=(server, client, answering), daemon=True).start()
        buffer = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    chunk = client.recv(65536)
                    if not chunk:
                        return
                    buffer += chunk
                head, buffer = buffer.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                length = next((int(line.split(":", 1)[1]) for line in lines[1:]
                               if line.lower().startswith("content-length:")), 0)
                while len(buffer) < length:
                    chunk = client.recv(65536)
                    if not chunk:
                        return
                    buffer += chunk
                body, buffer = buffer[:length], buffer[length:]
                if self.holding.is_set() and self.holds(method, path):
                    self.released.wait(60)
                stall = self.stalled is None and not self.released.is_set() and self.matches(method, path)
                if stall:
                    self.stalled = (method, path)
                    self.holding.set()
                    answering.clear()  # its answer goes nowhere
                server.sendall(head + b"\r\n\r\n" + body)
                if stall:
                    time.sleep(self.stall)
                    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    threading.Timer(self.release_after, self._release).start()
                    return
        except OSError:
            return
        finally:
            for sock in (client, server):
                try:
                    sock.close()
                except OSError:
                    pass

    def _release(self) -> None:
        self.holding.clear()
        self.released.set()

    @staticmethod
    def _answers(server: socket.socket, client: socket.socket, answering: threading.Event) -> None:
        try:
            while True:
                chunk = server.recv(65536)
                if not chunk:
                    break
                if answering.is_set():
                    client.sendall(chunk)
        except OSError:
            pass
        finally:
            try:
                client.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def close(self) -> None:
        self._release()
        self.listener.close()


def app(name: str, image: str) -> dict:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": {"name": name, "namespace": "apps"},
            "spec": {"components": [{"name": name, "type": "worker", "properties": {"image": image}}]}}


def sa_token(kube: KubeClient, secret: str) -> str:
    """A token of the shards' ServiceAccount bound to the Secret `secret` (made here): deleting it revokes it."""
    made = kube.create(SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret,
                                                                                   "namespace": RUNTIME_NS}})
    answer = kube.request("create", "POST", f"/api/v1/namespaces/{RUNTIME_NS}/serviceaccounts/{SHARD_SA}/token",
                          body={"spec": {"expirationSeconds": 3600, "boundObjectRef": {
                              "apiVersion": "v1", "kind": "Secret", "name": secret, "uid": made["metadata"]["uid"]}}})
    return answer["status"]["token"]


class Fleet:
    def __init__(self, server, kube: KubeClient, kubelet: Kubelet, proxy: SendProxy, token_file: str):
        self.server, self.kube, self.kubelet, self.proxy, self.token_file = server, kube, kubelet, proxy, token_file

    def apps(self) -> dict[str, dict]:
        return {a["metadata"]["name"]: a for a in self.kube.list(APPLICATIONS, "apps")["items"]}

    def settled(self) -> bool:
        apps = self.apps()
        return len(apps) == APPS and all(
            (a.get("status") or {}).get("status") == "running" and shard_of(a) in SHARDS
            and (a.get("status") or {}).get("observedGeneration") == a["metadata"].get("generation")
            for a in apps.values())

    def holder(self, shard: str) -> str:
        try:
            lease = self.kube.get(LEASES, f"velashard-{shard}", RUNTIME_NS)
        except errors.NotFound:
            return ""
        return (lease.get("spec") or {}).get("holderIdentity") or ""

    def back(self, shard: str, owned: int) -> bool:
        """The shard's current process holds its lease and has reconciled each of its `owned` apps."""
        pod = self.kubelet.pods[shard]
        return pod.process is not None and ready(pod.health) \
            and scrape(pod.metrics, "velashard_leader") == 1 \
            and scrape(pod.metrics, "velashard_applications_reconciled") == owned

    def writes(self, since: int, processes: tuple[str, ...] = ("master",) + SHARDS) -> list[tuple]:
        """Writes by velashard's processes after audit record `since`, but those to Leases and Events."""
        return [(r["userAgent"].split("shard=")[1].rstrip(")"), r["verb"], r["resource"], r.get("name"))
                for r in self.server.audit.since(since)["items"]
                if r["verb"] in WRITES and r.get("code", 0) < 400 and "velashard/" in r.get("userAgent", "")
                and any(f"(shard={p})" in r["userAgent"] for p in processes)
                and r["resource"] not in ("leases", "events") + REVIEWS]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    from velashard.apiserver.http.server import APIServer
    server = APIServer(port=0, simulate_workloads=True).start()
    directory = tmp_path_factory.mktemp("day2")
    kube = KubeClient.from_kubeconfig(server.write_kubeconfig(str(directory / "admin")), shard_id="test", qps=500,
                                      burst=500)
    install(kube)
    trust_authorless_apps(kube, "admin")
    release = helm.Config(kubeconfig_path=server.kubeconfig, namespace=RUNTIME_NS, storage_driver="memory")
    try:
        release.install(CHART, CHART_RELEASE, {"sharding": {"enabled": True}, "webhook": {"enabled": False},
                                               "definitions": {"install": False}},
                        namespace=RUNTIME_NS, create_namespace=True, timeout=60)
    finally:
        release.close()
    kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}})
    master = token_kubeconfig(server, kube, MASTER_SA, directory / "master.kubeconfig")
    # shard-0 through the proxy, plain HTTP, with a token of the shards' ServiceAccount.
    proxy = SendProxy((server.host, server.port))
    doc = server.kubeconfig_document()
    doc["clusters"][0]["cluster"] = {"server": proxy.url}
    doc["users"][0]["user"] = {"token": sa_token(kube, "shard-0-token")}
    write_kubeconfig(str(directory / "shard-0.kubeconfig"), doc)
    # shard-1 reads its token from a file, as a projected ServiceAccount token is read.
    token_file = write_private(str(directory / "token"), sa_token(kube, "shard-1-token-a"))
    doc = server.kubeconfig_document()
    doc["users"][0]["user"] = {"tokenFile": token_file}
    write_kubeconfig(str(directory / "shard-1.kubeconfig"), doc)
    kubelet = Kubelet(kube)
    try:
        for shard, kubeconfig, extra in (("master", master, ["--reschedule-period", "1", "--orphan-grace-period",
                                                             str(GRACE), "--disable-webhooks"]),
                                         ("shard-0", str(directory / "shard-0.kubeconfig"), []),
                                         ("shard-1", str(directory / "shard-1.kubeconfig"), [])):
            kubelet.run(shard, [sys.executable, "-m", "velashard.cli.main", "--kubeconfig", kubeconfig,
                                "--enable-sharding", "--enable-leader-election", "--shard-id", shard, "--namespace",
                                RUNTIME_NS, "--state-keep-interval", "5", "--log-level", "info", *LEASE, *extra],
                        str(directory / f"{shard}.log"))
        fleet = Fleet(server, kube, kubelet, proxy, token_file)
        eventually(lambda: all(fleet.holder(s) for s in ("master",) + SHARDS), timeout=60, interval=0.5)
        for i in range(APPS):
            kube.create(APPLICATIONS, app(f"app-{i}", "busybox:1"))
        eventually(fleet.settled, timeout=240, interval=0.5)
        yield fleet
    finally:
        kubelet.stop()
        proxy.close()
        server.stop()


def test_shards_restarted_ten_times_move_nothing_and_write_nothing_for_settled_apps(fleet):
    apps = fleet.apps()
    owned = {shard: sum(shard_of(a) == shard for a in apps.values()) for shard in SHARDS}
    assert all(owned.values()), owned
    eventually(lambda: all(fleet.back(s, owned[s]) for s in SHARDS), timeout=60, interval=0.5)
    # Settled: nothing written for 3 s (the apps' workflows finished, their health observed; the master's
    # definition checks done).
    def quiet() -> bool:
        since = fleet.server.audit.since(0)["lastSeq"]
        time.sleep(3)
        return fleet.writes(since) == []
    eventually(quiet, timeout=60, interval=0)
    start = fleet.server.audit.since(0)["lastSeq"]
    took = []
    for round_ in range(10):
        began = time.monotonic()
        before = {s: fleet.holder(s) for s in SHARDS}
        # Killed, or stopped cleanly (which releases the Lease: the new process takes it at once) in turn.
        sig = signal.SIGKILL if round_ % 2 == 0 else signal.SIGTERM
        restarts = [fleet.kubelet.kill(s, sig) for s in SHARDS]
        for thread in restarts:
            thread.join()
        # Back: the new process took the Lease (a new identity, after its predecessor's expired as it saw it)
        # and reconciled every app it owns.
        eventually(lambda: all(fleet.holder(s) not in ("", before[s]) and fleet.back(s, owned[s]) for s in SHARDS),
                   timeout=2 * GRACE, interval=0.25)
        took.append(round(time.monotonic() - began, 1))
        assert fleet.writes(start) == [], (round_, took)
    after = fleet.apps()
    assert {n: shard_of(a) for n, a in after.items()} == {n: shard_of(a) for n, a in apps.items()}  # 0 moves
    assert {n: a["metadata"]["resourceVersion"] for n, a in after.items()} == \
        {n: a["metadata"]["resourceVersion"] for n, a in apps.items()}  # 0 writes, status included
    print("seconds per restart round:", took)


def test_an_update_whose_answer_is_lost_is_not_sent_again_past_the_fence(fleet):
    """shard-0's Deployment update reaches the server; its answer is held while its lease renewals are, until
    its fence trips (renew deadline 2.5 s); then the connection is reset (a read error) and, a second later, the
    renewals go through. Nothing of the update is sent again before the shard holds its Lease again."""
    victim = next(n for n, a in sorted(fleet.apps().items()) if shard_of(a) == "shard-0")
    path = f"/apis/apps/v1/namespaces/apps/deployments/{victim}"
    lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{RUNTIME_NS}/leases/velashard-shard-0"
    fleet.proxy.arm(lambda method, p: method == "PUT" and p == path,
                    lambda method, p: method in ("PUT", "GET") and p == lease_path, stall=4.0, release_after=1.0)
    since = fleet.server.audit.since(0)["lastSeq"]
    fleet.kube.patch(APPLICATIONS, victim, {"spec": app(victim, "busybox:2")["spec"]}, "apps")
    eventually(lambda: fleet.proxy.released.is_set(), timeout=60, interval=0.2)

    def stall_to_renewal() -> list[dict] | None:
        """The audit records from the stalled update to shard-0's first lease renewal after it."""
        records = fleet.server.audit.since(since)["items"]
        first = next((i for i, r in enumerate(records) if r["verb"] == "update" and r["resource"] == "deployments"
                      and r["name"] == victim), None)
        renewal = next((i for i, r in enumerate(records) if first is not None and i > first
                        and r["resource"] == "leases" and r["verb"] == "update"
                        and r["name"] == "velashard-shard-0" and r.get("code") == 200), None)
        return records[first:renewal + 1] if renewal is not None else None

    records = eventually(stall_to_renewal, timeout=30, interval=0.2)
    assert records[-1]["time"] - records[0]["time"] >= 2.5  # no renewal for longer than the renew deadline: fenced
    fenced = [(r["verb"], r["resource"], r["name"]) for r in records[1:-1]
              if "(shard=shard-0)" in r.get("userAgent", "") and r["verb"] in WRITES]
    assert fenced == [], fenced
    # Then it carries on: the app runs its new image, reconciled once the shard held its Lease again.
    eventually(lambda: (fleet.kube.get(DEPLOYMENTS, victim, "apps")["spec"]["template"]["spec"]["containers"][0]
                        ["image"] == "busybox:2") and fleet.settled(), timeout=60, interval=0.5)
    assert shard_of(fleet.kube.get(APPLICATIONS, victim, "apps")) == "shard-0"


def test_a_service_account_token_rotated_in_place_fails_no_request(fleet):
    """The token in shard-1's file is replaced (atomically, as the kubelet does) and the old one revoked: each
    request refused with 401 is sent again with the new token, within the minute the file is cached."""
    # A new process reads the file first: the minute after which it reads it again anyway is not over below.
    owned = sum(shard_of(a) == "shard-1" for a in fleet.apps().values())
    before = fleet.holder("shard-1")
    fleet.kubelet.kill("shard-1").join()
    eventually(lambda: fleet.holder("shard-1") not in ("", before) and fleet.back("shard-1", owned),
               timeout=2 * GRACE, interval=0.25)
    since = fleet.server.audit.since(0)["lastSeq"]
    write_private(fleet.token_file, sa_token(fleet.kube, "shard-1-token-b"))
    fleet.kube.delete(SECRETS, "shard-1-token-a", RUNTIME_NS)  # the old token is refused from now on
    mine = [n for n, a in sorted(fleet.apps().items()) if shard_of(a) == "shard-1"][:5]
    for name in mine:
        fleet.kube.patch(APPLICATIONS, name, {"spec": app(name, "busybox:3")["spec"]}, "apps")

    def refused_then_done() -> list[dict] | None:
        records = [r for r in fleet.server.audit.since(since)["items"] if "(shard=shard-1)" in r.get("userAgent", "")]
        if not any(r.get("code") == 401 for r in records):
            return None
        return records if fleet.settled() and all(
            fleet.kube.get(DEPLOYMENTS, n, "apps")["spec"]["template"]["spec"]["containers"][0]["image"]
            == "busybox:3" for n in mine) else None

    records = eventually(refused_then_done, timeout=60, interval=0.5)
    # Every refused request was sent again with the new token and answered: none failed.
    for i, r in enumerate(records):
        if r.get("code") == 401:
            assert any(s["requestURI"] == r["requestURI"] and s.get("code", 0) not in (0, 401)
                       for s in records[i + 1:]), r
    # It kept its Lease, with no gap its fence would have noticed, and its apps.
    assert fleet.back("shard-1", owned) and scrape(fleet.kubelet.pods["shard-1"].metrics, "velashard_fenced") == 0
    assert sum(shard_of(a) == "shard-1" for a in fleet.apps().values()) == owned
