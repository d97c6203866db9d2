"""The controller runtime against the embedded API server: informers, queues, controllers, metrics."""

from __future__ import annotations

import threading
import time
import urllib.request

from velashard.kube.client import KubeClient
from velashard.kube.controller import DONE, REQUEUE, Controller, requeue_after
from velashard.kube.informer import EventHandler, Informer
from velashard.kube.ratelimit import ItemBackoff
from velashard.kube.resources import CONFIGMAPS
from velashard.kube.workqueue import WorkQueue
from velashard.observability import metrics_server
from tests.integration.helpers import eventually


def cm(name: str, namespace: str, labels: dict | None = None, data: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}}, "data": data or {}}


def names(informer: Informer) -> set[str]:
    return {o["metadata"]["name"] for o in informer.store.list()}


def test_label_selected_informer_only_holds_matching_objects(apiserver, namespace):
    kube = KubeClient.from_kubeconfig(apiserver.kubeconfig, shard_id="shard-a")
    kube.create(CONFIGMAPS, cm("mine", namespace, {"shard": "a"}))
    kube.create(CONFIGMAPS, cm("theirs", namespace, {"shard": "b"}))
    informer = Informer(kube, CONFIGMAPS, namespace, label_selector="shard=a")
    seen: list[tuple[str, str]] = []
    violations: list[str] = []

    def check(kind: str, obj: dict) -> None:
        seen.append((kind, obj["metadata"]["name"]))
        for cached in informer.store.list():
            if cached["metadata"]["labels"].get("shard") != "a":
                violations.append(cached["metadata"]["name"])

    informer.add_handler(EventHandler(lambda o: check("add", o), lambda old, new: check("update", new),
                                      lambda o: check("delete", o)))
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        assert names(informer) == {"mine"}
        kube.patch(CONFIGMAPS, "theirs", {"metadata": {"labels": {"shard": "a"}}}, namespace)   # moves in
        eventually(lambda: names(informer) == {"mine", "theirs"})
        kube.patch(CONFIGMAPS, "mine", {"metadata": {"labels": {"shard": "b"}}}, namespace)      # moves out
        eventually(lambda: names(informer) == {"theirs"})
        kube.patch(CONFIGMAPS, "mine", {"data": {"x": "1"}}, namespace)                         # not ours
        kube.delete(CONFIGMAPS, "theirs", namespace)
        eventually(lambda: names(informer) == set())
        assert violations == []
        assert ("add", "theirs") in seen and ("delete", "mine") in seen and ("delete", "theirs") in seen
        assert all(name != "mine" or kind != "update" for kind, name in seen[seen.index(("delete", "mine")):])
    finally:
        informer.stop()


def test_informer_recovers_from_expired_watch_and_dropped_connection(make_apiserver):
    server = make_apiserver(watch_history=5)
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test")
    for i in range(3):
        kube.create(CONFIGMAPS, cm(f"c{i}", "default"))
    gate = threading.Event()
    gate.set()
    real_watch = kube.watch

    def gated_watch(*args, **kwargs):  # failure injection: hold the informer off the server
        gate.wait(10)
        return real_watch(*args, **kwargs)

    kube.watch = gated_watch
    deleted: list[str] = []
    informer = Informer(kube, CONFIGMAPS, "default")
    informer.add_handler(EventHandler(on_delete=lambda o: deleted.append(o["metadata"]["name"])))
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        eventually(lambda: server.store._watchers.get(("", "configmaps")))
        # A dropped connection: the informer re-watches from its last resourceVersion and misses nothing.
        server.store.close_watchers(("", "configmaps"))
        kube.patch(CONFIGMAPS, "c0", {"data": {"after": "drop"}}, "default")
        eventually(lambda: (informer.store.get("default/c0") or {}).get("data") == {"after": "drop"})
        assert informer.relists == 1
        # Expired: while the informer is away more events happen than the server keeps, so its
        # resourceVersion is too old; it gets 410, relists, and still converges (deletes included).
        gate.clear()
        server.store.close_watchers(("", "configmaps"))
        time.sleep(0.2)
        kube.delete(CONFIGMAPS, "c1", "default")
        for i in range(10):
            kube.create(CONFIGMAPS, cm(f"n{i}", "default"))
        kube.patch(CONFIGMAPS, "c2", {"data": {"after": "expiry"}}, "default")
        gate.set()
        expected = {"c0", "c2"} | {f"n{i}" for i in range(10)}
        eventually(lambda: names(informer) == expected)
        assert informer.relists == 2
        assert informer.store.get("default/c2")["data"] == {"after": "expiry"}
        assert "c1" in deleted
    finally:
        gate.set()
        informer.stop()


def test_one_key_is_never_reconciled_concurrently_under_8_workers():
    active: dict[str, int] = {}
    overlaps: list[str] = []
    counts: dict[str, int] = {}
    lock = threading.Lock()

    def reconcile(key: str):
        with lock:
            active[key] = active.get(key, 0) + 1
            counts[key] = counts.get(key, 0) + 1
            if active[key] > 1:
                overlaps.append(key)
        time.sleep(0.002)
        with lock:
            active[key] -= 1
        return DONE

    controller = Controller("concurrency", reconcile, workers=8)
    controller.start()
    for round_ in range(50):
        for key in ("a", "b", "c", "d"):
            controller.enqueue(key)
        time.sleep(0.001)
    eventually(lambda: len(controller.queue) == 0 and all(v == 0 for v in active.values()))
    controller.stop()
    assert overlaps == []
    assert set(counts) == {"a", "b", "c", "d"}


def test_failures_back_off_within_bounds_and_the_worker_survives():
    attempts: list[float] = []

    def reconcile(key: str):
        attempts.append(time.monotonic())
        if len(attempts) < 5:
            raise RuntimeError("boom")
        return DONE

    queue = WorkQueue("backoff-test", backoff=ItemBackoff(base=0.02, maximum=0.1))
    controller = Controller("backoff", reconcile, workers=2, queue=queue)
    controller.start()
    controller.enqueue("k")
    eventually(lambda: len(attempts) >= 5, timeout=5)
    controller.stop()
    gaps = [b - a for a, b in zip(attempts, attempts[1:])]
    expected = [0.02, 0.04, 0.08, 0.1]  # exponential, capped at the maximum
    for gap, want in zip(gaps, expected):
        assert want * 0.9 <= gap <= want + 0.25, (gaps, expected)
    assert queue.num_requeues("k") == 0  # success forgets the failures


def test_requeue_results_and_metrics_are_served(apiserver, namespace):
    kube = KubeClient.from_kubeconfig(apiserver.kubeconfig, shard_id="metrics")
    results = iter([REQUEUE, requeue_after(0.05), DONE])
    calls: list[str] = []

    def reconcile(key: str):
        calls.append(key)
        return next(results, DONE)

    informer = Informer(kube, CONFIGMAPS, namespace)
    controller = Controller("metrics-test", reconcile, workers=1)
    controller.watch(informer)
    kube.create(CONFIGMAPS, cm("m", namespace))
    informer.start()
    controller.start()
    try:
        eventually(lambda: len(calls) >= 3)
        server = metrics_server("127.0.0.1:0").start()
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5).read().decode()
        finally:
            server.stop()
    finally:
        informer.stop()
        controller.stop()
    assert calls[:3] == [f"{namespace}/m"] * 3
    for name in ('velashard_reconcile_total{controller="metrics-test",result="requeue"}',
                 'velashard_reconcile_total{controller="metrics-test",result="requeue_after"}',
                 'velashard_reconcile_total{controller="metrics-test",result="success"}',
                 "velashard_reconcile_duration_seconds_bucket", 'velashard_workqueue_depth{name="metrics-test"}',
                 "velashard_workqueue_queue_duration_seconds_bucket", "velashard_informer_objects{resource=",
                 'velashard_kube_requests_total{code="200",verb="list"}'):
        assert name in text, name
