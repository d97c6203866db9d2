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


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers={"Authorization": "Bearer admin"}),
                                    timeout=5) as resp:
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
        records = json.loads(get(f"{server.url}/debug/audit?since=0")[1])["items"]
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
