"""On-demand caches of managed kinds: counted per app, stopped with the last app that applies the kind, and a
reconcile waits for a cache another app's reconcile just started instead of reading that kind live."""

from __future__ import annotations

import threading

from velashard.core.managed import ManagedCaches
from velashard.kube.resources import CONFIGMAPS, DEPLOYMENTS, Resource

INGRESSES = Resource("networking.k8s.io", "v1", "ingresses", "Ingress")


class FakeInformer:
    def __init__(self, res: Resource):
        self.name, self.synced = str(res), threading.Event()

    def has_synced(self) -> bool:
        return self.synced.is_set()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self.synced.wait(timeout)


class FakeManager:
    client = None

    def __init__(self) -> None:
        self.started: list[FakeInformer] = []
        self.stopped: list[FakeInformer] = []

    def informer(self, res: Resource, **_kw) -> FakeInformer:
        informer = FakeInformer(res)
        informer.synced.set()
        return informer

    def start_informer(self, res: Resource, *_a, **_kw) -> FakeInformer:
        informer = FakeInformer(res)
        self.started.append(informer)
        return informer

    def stop_informer(self, informer: FakeInformer) -> None:
        self.stopped.append(informer)


class MayWatch:
    @staticmethod
    def may_watch(_res: Resource) -> bool:
        return True


def caches() -> tuple[ManagedCaches, FakeManager]:
    manager = FakeManager()
    managed = ManagedCaches(manager, "shard=a", lambda _informer: None)  # type: ignore[arg-type]
    managed._access = MayWatch()  # type: ignore[assignment]
    return managed, manager


def test_a_kind_is_cached_while_one_app_applies_it():
    managed, manager = caches()
    manager_synced = lambda: [i.synced.set() for i in manager.started]  # noqa: E731
    threading.Timer(0.05, manager_synced).start()
    managed.use("ns/a", {DEPLOYMENTS, CONFIGMAPS, INGRESSES})
    managed.use("ns/b", {CONFIGMAPS})
    assert len(manager.started) == 2 and managed.get(CONFIGMAPS) is not None
    managed.use("ns/a", {DEPLOYMENTS})  # a no longer applies either: the Ingresses' cache goes, ConfigMaps' stays
    assert [i.name for i in manager.stopped] == [str(INGRESSES)] and managed.get(CONFIGMAPS) is not None
    managed.forget("ns/b")
    assert [i.name for i in manager.stopped] == [str(INGRESSES), str(CONFIGMAPS)]
    assert managed.get(CONFIGMAPS) is None and managed.get(DEPLOYMENTS) is not None  # built in: always cached
    managed.forget("ns/b")  # twice: nothing more


def test_a_reconcile_waits_for_a_cache_another_app_started():
    managed, manager = caches()
    first = threading.Thread(target=managed.use, args=("ns/a", {INGRESSES}))
    first.start()
    while not manager.started:
        pass
    waited = threading.Event()
    second = threading.Thread(target=lambda: (managed.use("ns/b", {INGRESSES}), waited.set()))
    second.start()
    assert not waited.wait(0.2)  # the Ingresses' list is on the way: b waits for it rather than reading live
    manager.started[0].synced.set()
    assert waited.wait(5)
    first.join(5)
    second.join(5)
    assert len(manager.started) == 1
