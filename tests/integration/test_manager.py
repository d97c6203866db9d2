"""The manager in process against a private API server: probes, user agent, stop during sync, graceful stop."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Iterator

import pytest

from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.controller import DONE, Controller
from velashard.kube.manager import LeaderElectionConfig, Manager
from velashard.kube.resources import CONFIGMAPS, CRDS, LEASES, Resource
from tests.integration.helpers import eventually

WIDGETS = Resource("example.com", "v1", "widgets", "Widget")
WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
}


def lease_holder(kube: KubeClient, name: str, namespace: str) -> str | None:
    try:
        return (kube.get(LEASES, name, namespace).get("spec") or {}).get("holderIdentity")
    except errors.NotFound:
        return None


def get(url: str, token: str = "") -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


class Running:
    """A manager run in a thread, as `velashard` runs it in the main thread; `stop()` is SIGTERM."""

    def __init__(self, manager: Manager):
        self.manager = manager
        self.signal = threading.Event()
        self.code: int | None = None
        self.thread = threading.Thread(target=self._run, name="test-manager")
        self.thread.start()

    def _run(self) -> None:
        self.code = self.manager.run(self.signal)

    def stop(self, timeout: float = 10.0) -> float:
        started = time.monotonic()
        self.signal.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the manager did not stop"
        return time.monotonic() - started

    def health(self, path: str) -> int:
        assert self.manager.health_server is not None
        return get(f"http://127.0.0.1:{self.manager.health_server.port}{path}")[0]


@pytest.fixture
def run_manager() -> Iterator[Callable[[Manager], Running]]:
    runs: list[Running] = []

    def run(manager: Manager) -> Running:
        runs.append(Running(manager))
        return runs[-1]

    yield run
    for r in runs:
        if r.thread.is_alive():
            r.stop()
    leftover = [t.name for t in threading.enumerate()
                if t.name.startswith(("informer-", "resync-", "leader-", "manager-", "workqueue-"))]
    assert leftover == []


def test_ready_once_informers_synced_and_every_request_names_the_shard(make_apiserver, run_manager):
    server = make_apiserver(bookmark_interval=0.2)
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="shard-7")
    setup = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test-setup")
    manager = Manager(kube, "shard-7", LeaderElectionConfig("velashard-shard-7", "default", "replica-1", 2.0, 1.5,
                                                            0.2),
                      metrics_addr="127.0.0.1:0", health_addr="127.0.0.1:0")
    widgets = manager.informer(WIDGETS, "default")  # its CRD is not installed yet: not ready
    reconciled: list[str] = []
    controller = Controller("widgets", lambda key: reconciled.append(key) or DONE)
    controller.watch(widgets)
    manager.add_controller(controller)
    running = run_manager(manager)

    eventually(lambda: lease_holder(kube, "velashard-shard-7", "default") == "replica-1")
    assert running.health("/healthz") == 200
    time.sleep(0.5)
    assert running.health("/readyz") == 503
    setup.create(CRDS, WIDGET_CRD)
    eventually(lambda: running.health("/readyz") == 200)
    setup.create(WIDGETS, {"apiVersion": "example.com/v1", "kind": "Widget",
                           "metadata": {"name": "w", "namespace": "default"}})
    eventually(lambda: reconciled == ["default/w"])
    assert manager.metrics_server is not None
    metrics = get(f"http://127.0.0.1:{manager.metrics_server.port}/metrics")[1]
    assert 'velashard_reconcile_total{controller="widgets",result="success"}' in metrics
    assert 'velashard_informer_objects{resource="widgets.example.com"} 1.0' in metrics
    assert running.stop() < 10 and running.code == 0
    assert not lease_holder(kube, "velashard-shard-7", "default")  # released on a graceful stop

    def audited() -> tuple[set[str], set[tuple[str, str]]]:
        records = json.loads(get(f"{server.url}/debug/audit?since=0", server.admin_token)[1])["items"]
        return ({r["userAgent"] for r in records},
                {(r["verb"], r["resource"]) for r in records if "shard=shard-7" in r["userAgent"]})

    # A watch is audited when it ends, which the server notices at its next bookmark.
    eventually(lambda: ("watch", "widgets") in audited()[1])
    agents, ours = audited()
    assert agents == {"velashard/0.1.0 (shard=shard-7)", "velashard/0.1.0 (shard=test-setup)"}, agents
    assert {("list", "widgets"), ("watch", "widgets"), ("get", "leases"), ("update", "leases")} <= ours, ours


def test_a_stop_during_cache_sync_is_prompt_and_a_sync_timeout_fails(make_apiserver, run_manager):
    server = make_apiserver()
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="sync")
    waiting = Manager(kube, "sync", health_addr="127.0.0.1:0")
    waiting.informer(WIDGETS)  # never syncs: no such resource
    running = run_manager(waiting)
    eventually(lambda: running.health("/healthz") == 200)
    assert running.stop() < 3 and running.code == 0

    failing = Manager(kube, "sync", sync_timeout=0.5)
    failing.informer(WIDGETS)
    code = run_manager(failing)
    code.thread.join(10)
    assert code.code == 1  # acting on a cache that never synced could delete what is merely unseen


def test_shutdown_finishes_the_reconcile_in_flight_and_starts_no_more(apiserver, namespace, run_manager):
    kube = KubeClient.from_kubeconfig(apiserver.kubeconfig, shard_id="drain")
    for name in ("a", "b", "c"):
        kube.create(CONFIGMAPS, {"metadata": {"name": name, "namespace": namespace}})
    in_flight = threading.Event()
    done: list[str] = []

    def reconcile(key: str) -> Any:
        in_flight.set()
        time.sleep(0.5)
        done.append(key)
        return DONE

    manager = Manager(kube, "drain")
    controller = Controller("drain", reconcile, workers=1)
    controller.watch(manager.informer(CONFIGMAPS, namespace))
    manager.add_controller(controller)
    running = run_manager(manager)
    assert in_flight.wait(10)
    assert running.stop() < 10 and running.code == 0
    assert len(done) == 1  # the one in flight finished; the queued two were left for the next leader
    assert re.fullmatch(rf"{namespace}/[abc]", done[0])


def test_a_fenced_manager_refuses_writes_stops_and_resumes_after_relisting(make_apiserver, run_manager):
    server = make_apiserver(bookmark_interval=0.2)
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="shard-8")
    setup = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test-setup")
    manager = Manager(kube, "shard-8", LeaderElectionConfig("velashard-shard-8", "default", "shard-8", 2.0, 1.5, 0.2),
                      health_addr="127.0.0.1:0")
    configmaps = manager.informer(CONFIGMAPS, "default", label_selector="fence-test")
    seen: list[str] = []

    def reconcile(key: str) -> Any:
        seen.append(key)
        kube.patch(CONFIGMAPS, key.split("/")[1], {"metadata": {"annotations": {"seen": str(len(seen))}}},
                   "default")
        return DONE

    controller = Controller("configmaps", reconcile)
    controller.watch(configmaps, predicate=lambda old, new: old is None or old is new)  # adds and resyncs
    manager.add_controller(controller)
    running = run_manager(manager)
    setup.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "a", "namespace": "default", "labels": {"fence-test": "x"}}})
    eventually(lambda: seen == ["default/a"])
    assert manager.fence is not None and running.health("/readyz") == 200

    # A pause: the process's clock jumps past the renew deadline.
    real = manager.fence.clock
    manager.fence.clock = lambda: real() + 5.0
    eventually(lambda: running.health("/readyz") == 503)
    with pytest.raises(errors.Fenced):
        kube.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b",
                                                                                         "namespace": "default"}})
    lease = kube.get(LEASES, "velashard-shard-8", "default")
    kube.update(LEASES, lease)  # its own Lease stays writable
    _, body = get(f"http://127.0.0.1:{manager.health_server.port}/readyz")
    assert "fenced" in body, body
    relists = configmaps.relists

    manager.fence.clock = real
    eventually(lambda: running.health("/readyz") == 200)
    assert configmaps.relists > relists  # it re-listed before acting again
    eventually(lambda: seen.count("default/a") >= 2)  # and looked at everything again
    setup.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "c", "namespace": "default", "labels": {"fence-test": "x"}}})
    eventually(lambda: "default/c" in seen)
    assert running.stop() < 10 and running.code == 0


def health_body(running: Running, path: str) -> tuple[int, str]:
    assert running.manager.health_server is not None
    return get(f"http://127.0.0.1:{running.manager.health_server.port}{path}")


def test_healthz_fails_when_a_worker_is_stuck_past_its_deadline(apiserver, namespace, run_manager):
    kube = KubeClient.from_kubeconfig(apiserver.kubeconfig, shard_id="stuck")
    kube.create(CONFIGMAPS, {"metadata": {"name": "a", "namespace": namespace}})
    release = threading.Event()
    manager = Manager(kube, "stuck", health_addr="127.0.0.1:0")
    controller = Controller("wedged", lambda key: release.wait(30) and DONE, workers=1)
    controller.stuck_after = 0.3
    controller.watch(manager.informer(CONFIGMAPS, namespace))
    manager.add_controller(controller)
    running = run_manager(manager)
    try:
        code, body = eventually(lambda: (r := health_body(running, "/healthz"))[0] == 503 and r)
        assert "wedged-worker-0: stuck for" in body
    finally:
        release.set()
    eventually(lambda: health_body(running, "/healthz") == (200, "ok\n"))  # unstuck: alive again
    assert running.stop() < 10 and running.code == 0


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_healthz_fails_when_a_background_thread_dies(apiserver, namespace, run_manager):
    from velashard.observability import Heartbeat

    kube = KubeClient.from_kubeconfig(apiserver.kubeconfig, shard_id="dies")
    manager = Manager(kube, "dies", health_addr="127.0.0.1:0")
    manager.informer(CONFIGMAPS, namespace)
    heartbeat = Heartbeat("background-loop", 60.0)

    def crash() -> None:
        raise RuntimeError("injected failure")  # what an unexpected bug in a loop does to its thread

    def start() -> None:
        thread = threading.Thread(target=crash, name="manager-test-loop", daemon=True)
        heartbeat.attach(thread)
        thread.start()

    manager.add_runnable(start, lambda: None, heartbeat)
    running = run_manager(manager)
    eventually(lambda: health_body(running, "/healthz") == (503, "unhealthy: background-loop: thread died\n"))
    assert running.stop() < 10 and running.code == 0


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_healthz_fails_when_an_informer_thread_dies(apiserver, namespace, run_manager, monkeypatch):
    kube = KubeClient.from_kubeconfig(apiserver.kubeconfig, shard_id="informer-dies")
    manager = Manager(kube, "informer-dies", health_addr="127.0.0.1:0")
    informer = manager.informer(CONFIGMAPS, namespace)
    running = run_manager(manager)
    eventually(lambda: health_body(running, "/readyz")[0] == 200)
    assert health_body(running, "/healthz") == (200, "ok\n")

    def killed(*_: Any) -> bool:
        raise SystemExit  # escapes the informer's retry loop, as a thread killed by a bug would
    monkeypatch.setattr(informer, "_watch", killed)
    assert informer._stream is not None
    informer._stream.close()  # the current watch ends; the next one is the injected failure
    code, body = eventually(lambda: (r := health_body(running, "/healthz"))[0] == 503 and r)
    assert f"informer {informer.name}: thread died" in body
    assert running.stop() < 10 and running.code == 0


def test_readyz_says_the_crds_are_missing_and_the_log_says_it_once(make_apiserver, run_manager, caplog):
    server = make_apiserver()
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="no-crds")
    manager = Manager(kube, "no-crds", health_addr="127.0.0.1:0")
    manager.informer(WIDGETS)
    running = run_manager(manager)
    code, body = eventually(lambda: (r := health_body(running, "/readyz"))[0] == 503 and "CRDs" in r[1] and r)
    assert body == ("not ready: CRDs are not installed: run `velashard install` or install the chart "
                    "(widgets.example.com not served)\n")
    time.sleep(1.0)  # several retries later
    said = [r for r in caplog.records if r.getMessage().startswith("CRDs are not installed")]
    assert len(said) == 1
    KubeClient.from_kubeconfig(server.kubeconfig, shard_id="setup").create(CRDS, WIDGET_CRD)
    eventually(lambda: health_body(running, "/readyz") == (200, "ok\n"), timeout=40)
    assert running.stop() < 10 and running.code == 0


def test_informers_started_on_demand_serve_events_and_stop_when_unused(make_apiserver, run_manager):
    server = make_apiserver(bookmark_interval=0.2)
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="shard-7")
    manager = Manager(kube, "shard-7", health_addr="127.0.0.1:0")
    manager.informer(CONFIGMAPS, "default")
    running = run_manager(manager)
    eventually(lambda: running.health("/readyz") == 200)
    kube.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "mine", "namespace": "default", "labels": {"shard": "shard-7"}}})
    kube.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "theirs", "namespace": "default", "labels": {"shard": "other"}}})
    widgets = manager.start_informer(WIDGETS, "shard=shard-7")  # its CRD is not installed
    assert manager.start_informer(WIDGETS, "shard=shard-7") is widgets  # shared
    assert running.health("/readyz") == 200  # a kind needed later does not make a running process unready
    selected = manager.start_informer(CONFIGMAPS, "shard=shard-7")
    assert selected.wait_for_sync(10)
    assert [o["metadata"]["name"] for o in selected.store.list()] == ["mine"]
    assert selected in manager.informers
    manager.stop_informer(selected)
    manager.stop_informer(widgets)
    assert selected not in manager.informers and widgets not in manager.informers
    assert not [t for t in threading.enumerate() if t.name.startswith("informer-") and "shard=shard-7" in t.name]
