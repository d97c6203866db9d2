"""Informer failure modes against the embedded API server: dropped connections, outages, 410 Expired.

Failures are injected with a TCP relay between informer and server whose connections the test cuts,
so the informer meets the same broken sockets and refused reconnects as behind a failing load balancer.
"""

from __future__ import annotations

import gc
import socket
import threading
import time
import weakref
from typing import Any, Iterator

import pytest

from velashard.kube import errors
from velashard.kube.client import KubeClient, load_configuration
from velashard.kube.informer import EventHandler, Informer
from velashard.kube.resources import CONFIGMAPS
from velashard.kube.packing import Packer
from velashard.kube.store import Store
from tests.integration.helpers import eventually


class CuttableRelay:
    """A TCP relay to the API server; `cut()` breaks every connection and refuses new ones until `restore()`."""

    def __init__(self, target: tuple[str, int]):
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.connections = 0  # connections accepted, refused ones included
        self._up = True
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._spawn(self._accept_loop)

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                up = self._up
            if not up:
                _break(client)
                continue
            upstream = socket.create_connection(self._target)
            with self._lock:
                self._sockets.update((client, upstream))
            self._spawn(self._pump, client, upstream)
            self._spawn(self._pump, upstream, client)

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            _break(sock)

    def cut(self) -> None:
        with self._lock:
            self._up = False
            sockets, self._sockets = list(self._sockets), set()
        for sock in sockets:
            _break(sock)

    def restore(self) -> None:
        with self._lock:
            self._up = True

    def close(self) -> None:
        self.cut()
        _break(self._listener)  # shutdown wakes the accept loop; close alone would not
        for thread in self._threads:
            thread.join(5)


def _break(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in recv on it
    except OSError:
        pass
    sock.close()


@pytest.fixture
def relay(request: pytest.FixtureRequest) -> Iterator[Any]:
    relays: list[CuttableRelay] = []

    def make(server: Any) -> tuple[CuttableRelay, KubeClient]:
        host, port = server.url.rsplit("//", 1)[1].rsplit(":", 1)
        r = CuttableRelay((host, int(port)))
        relays.append(r)
        configuration = load_configuration(server.kubeconfig)
        configuration.host = f"http://127.0.0.1:{r.port}"
        return r, KubeClient(configuration, shard_id="relayed")

    yield make
    for r in relays:
        r.close()


@pytest.fixture
def informers() -> Iterator[list[Informer]]:
    """Informers a test starts; stopped afterwards, and none of their threads may survive."""
    started: list[Informer] = []
    yield started
    for informer in started:
        informer.stop()
    leftover = [t.name for t in threading.enumerate() if t.name.startswith(("informer-", "resync-"))]
    assert leftover == []


def cm(name: str, namespace: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace,
                                                                  "labels": labels or {}}}


def server_state(kube: KubeClient, namespace: str, selector: str | None = None) -> dict[str, str]:
    items, _ = kube.list_all(CONFIGMAPS, namespace, label_selector=selector)
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in items}


def cache_state(informer: Informer) -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in informer.store.list()}


class Recorder(EventHandler):
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        super().__init__(lambda o: self._record("add", o), lambda _old, new: self._record("update", new),
                         lambda o: self._record("delete", o))

    def _record(self, kind: str, obj: dict[str, Any]) -> None:
        self.events.append((kind, obj["metadata"]["name"]))


def test_dropped_connection_resumes_from_the_last_resource_version(apiserver, namespace, relay, informers):
    direct = KubeClient.from_kubeconfig(apiserver.kubeconfig, shard_id="test")
    for name in ("a", "b"):
        direct.create(CONFIGMAPS, cm(name, namespace))
    cut, kube = relay(apiserver)
    recorder = Recorder()
    informer = Informer(kube, CONFIGMAPS, namespace)
    informer.add_handler(recorder)
    informers.append(informer.start())
    assert informer.wait_for_sync(5)

    cut.cut()  # the watch breaks mid-stream and every reconnect is refused for a while
    direct.patch(CONFIGMAPS, "a", {"data": {"while": "away"}}, namespace)
    direct.delete(CONFIGMAPS, "b", namespace)
    direct.create(CONFIGMAPS, cm("c", namespace))
    before = cut.connections
    time.sleep(1.5)
    retries = cut.connections - before
    cut.restore()

    eventually(lambda: cache_state(informer) == server_state(direct, namespace))
    assert informer.relists == 1  # resumed by watching from its resourceVersion: nothing listed twice
    assert [e for e in recorder.events if e[0] != "add" or e[1] == "c"][-3:] == [
        ("update", "a"), ("delete", "b"), ("add", "c")]
    # Reconnects back off (0.1 s, then doubling, plus urllib3's own three retries each): a busy loop
    # would have made thousands of attempts in 1.5 s.
    assert 1 <= retries <= 24, retries


def test_expired_resource_version_relists_and_keeps_only_selected_objects(make_apiserver, relay, informers):
    server = make_apiserver(watch_history=3)
    direct = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test")
    direct.create(CONFIGMAPS, cm("x", "default", {"shard": "a"}))
    direct.create(CONFIGMAPS, cm("y", "default", {"shard": "b"}))
    direct.create(CONFIGMAPS, cm("gone", "default", {"shard": "a"}))
    cut, kube = relay(server)
    informer = Informer(kube, CONFIGMAPS, "default", label_selector="shard=a")
    recorder = Recorder()
    violations: list[str] = []

    def check_cache(*_: Any) -> None:
        violations.extend(o["metadata"]["name"] for o in informer.store.list()
                          if o["metadata"]["labels"].get("shard") != "a")

    informer.add_handler(recorder)
    informer.add_handler(EventHandler(check_cache, check_cache, check_cache))
    informers.append(informer.start())
    assert informer.wait_for_sync(5)
    assert set(cache_state(informer)) == {"x", "gone"}

    cut.cut()  # away for more writes than the server's watch history holds: the resume gets 410
    direct.patch(CONFIGMAPS, "x", {"metadata": {"labels": {"shard": "b"}}}, "default")   # leaves the selector
    direct.patch(CONFIGMAPS, "y", {"metadata": {"labels": {"shard": "a"}}}, "default")   # enters it
    direct.delete(CONFIGMAPS, "gone", "default")
    for i in range(5):
        direct.create(CONFIGMAPS, cm(f"n{i}", "default", {"shard": "a" if i % 2 else "b"}))
    time.sleep(0.3)
    cut.restore()

    eventually(lambda: cache_state(informer) == server_state(direct, "default", "shard=a"))
    assert set(cache_state(informer)) == {"y", "n1", "n3"}
    assert informer.relists == 2
    assert ("delete", "x") in recorder.events and ("delete", "gone") in recorder.events
    assert violations == []


def test_repeated_expiry_backs_off_instead_of_relisting_in_a_loop(apiserver, namespace, informers):
    kube = KubeClient.from_kubeconfig(apiserver.kubeconfig, shard_id="test")
    lists = []
    real_list = kube.list

    def counting_list(*args: Any, **kwargs: Any) -> dict[str, Any]:
        lists.append(time.monotonic())
        return real_list(*args, **kwargs)

    def always_expired(*_: Any, **__: Any) -> Any:  # failure injection: history shorter than list-to-watch
        raise errors.Expired(410, "Expired", "too old resource version")

    kube.list, kube.watch = counting_list, always_expired
    informer = Informer(kube, CONFIGMAPS, namespace)
    informers.append(informer.start())
    assert informer.wait_for_sync(5)
    time.sleep(1.5)
    # The first expiry relists at once; later ones wait 0.1 s, 0.2 s, 0.4 s... (half to full of the doubling
    # delay), so at most 6 lists fit in 1.5 s.
    assert 2 <= len(lists) <= 6, len(lists)
    assert informer.has_synced()


def test_an_unexpected_error_is_retried_not_a_silent_stop(apiserver, namespace, informers):
    kube = KubeClient.from_kubeconfig(apiserver.kubeconfig, shard_id="test")
    kube.create(CONFIGMAPS, cm("first", namespace))
    failures = []

    def flaky_transform(obj: dict[str, Any]) -> dict[str, Any]:
        if obj["metadata"]["name"] == "poison" and not failures:
            failures.append(obj["metadata"]["name"])
            raise RuntimeError("transform bug")  # failure injection: a bug in code the informer calls
        return obj

    informer = Informer(kube, CONFIGMAPS, namespace, transform=flaky_transform)
    informers.append(informer.start())
    assert informer.wait_for_sync(5)
    kube.create(CONFIGMAPS, cm("poison", namespace))
    kube.create(CONFIGMAPS, cm("after", namespace))
    eventually(lambda: set(cache_state(informer)) == {"first", "poison", "after"})
    assert failures == ["poison"]


def test_resync_replays_the_cache_as_updates(apiserver, namespace, informers):
    kube = KubeClient.from_kubeconfig(apiserver.kubeconfig, shard_id="test")
    kube.create(CONFIGMAPS, cm("r", namespace))
    replays: list[str] = []
    informer = Informer(kube, CONFIGMAPS, namespace, resync_period=0.1)
    informer.add_handler(EventHandler(on_update=lambda old, new: replays.append(new["metadata"]["name"])
                                      if old is new else None))
    informers.append(informer.start())
    eventually(lambda: len(replays) >= 2)
    assert set(replays) == {"r"}


def test_transform_drops_managed_fields_and_last_applied(apiserver, namespace, informers):
    kube = KubeClient.from_kubeconfig(apiserver.kubeconfig, shard_id="test")
    obj = cm("big", namespace)
    obj["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{}", "keep": "me"}
    kube.create(CONFIGMAPS, obj)
    informer = Informer(kube, CONFIGMAPS, namespace)
    informers.append(informer.start())
    assert informer.wait_for_sync(5)
    cached = informer.store.get_by(namespace, "big")
    assert cached["metadata"]["annotations"] == {"keep": "me"}
    assert "managedFields" not in cached["metadata"]
    assert informer.store.list() == [cached]


class _Tracked(dict):
    """A decoded object whose lifetime a weak reference can follow (a plain dict cannot be referenced weakly)."""


def test_a_packed_cache_lists_page_by_page_never_holding_every_object_decoded(apiserver, namespace, informers):
    kube = KubeClient.from_kubeconfig(apiserver.kubeconfig, shard_id="test")
    for i in range(1100):  # three pages of 500
        kube.create(CONFIGMAPS, cm(f"m{i:04d}", namespace))
    alive: list[weakref.ref] = []
    most_alive = 0

    def transform(obj: dict[str, Any]) -> dict[str, Any]:
        nonlocal most_alive
        gc.collect(0)
        most_alive = max(most_alive, sum(ref() is not None for ref in alive))
        tracked = _Tracked(obj)
        alive.append(weakref.ref(tracked))
        return tracked

    added: list[str] = []
    informer = Informer(kube, CONFIGMAPS, namespace, transform=transform, packed=True)
    informer.add_handler(EventHandler(on_add=lambda o: added.append(o["metadata"]["name"])))
    informers.append(informer.start())
    assert informer.wait_for_sync(60)
    assert len(added) == 1100 and len(informer.store) == 1100
    # Each object is packed as it comes; the old list held all 1,100 decoded before storing any.
    assert most_alive <= 1


def test_a_first_list_hands_each_object_over_as_stored_and_a_handler_added_meanwhile_misses_none(
        apiserver, namespace, informers, monkeypatch):
    kube = KubeClient.from_kubeconfig(apiserver.kubeconfig, shard_id="test")
    for i in range(700):  # two pages
        kube.create(CONFIGMAPS, cm(f"f{i:04d}", namespace))
    unpacked = 0
    real_unpack = Packer.unpack

    def counting_unpack(self: Packer, blob: bytes) -> dict[str, Any]:
        nonlocal unpacked
        unpacked += 1
        return real_unpack(self, blob)

    monkeypatch.setattr(Packer, "unpack", counting_unpack)
    first: list[str] = []
    late: list[str] = []
    informer: Informer

    def transform(obj: dict[str, Any]) -> dict[str, Any]:
        if obj["metadata"]["name"] == "f0600":  # in the second page, while the first list runs
            informer.add_handler(EventHandler(on_add=lambda o: late.append(o["metadata"]["name"])))
        return obj

    informer = Informer(kube, CONFIGMAPS, namespace, transform=transform, packed=True)
    informer.add_handler(EventHandler(on_add=lambda o: first.append(o["metadata"]["name"])))
    informers.append(informer.start())
    assert informer.wait_for_sync(60)
    names = [f"f{i:04d}" for i in range(700)]
    assert first == names
    assert sorted(late) == names  # the 600 stored before it came replayed, the rest handed over: each once
    assert unpacked == 600  # only the replay decoded anything again


def test_a_relist_keeps_the_old_content_readable_until_the_new_one_is_complete():
    store = Store(packed=True)
    store.replace([cm("a", "ns"), cm("b", "ns")])
    seen_during: list[set[str]] = []

    def listed() -> Iterator[dict[str, Any]]:
        for name in ("b", "c"):
            seen_during.append({o["metadata"]["name"] for o in store.each()})
            yield cm(name, "ns")

    previous = store.replace(listed())
    assert seen_during == [{"a", "b"}, {"a", "b"}]
    assert {o["metadata"]["name"] for o in store.list()} == {"b", "c"}
    assert sorted(previous) == ["ns/a", "ns/b"] and previous["ns/a"]["metadata"]["name"] == "a"


def test_a_first_list_runs_no_collection_between_its_pages(apiserver, namespace, informers):
    """Each page is dropped before the collector is back: a collection between pages traversed and promoted a
    whole decoded page that was about to be freed."""
    kube = KubeClient.from_kubeconfig(apiserver.kubeconfig, shard_id="test")
    for i in range(1100):  # three pages of 500
        kube.create(CONFIGMAPS, cm(f"p{i:04d}", namespace))
    added: list[str] = []
    collections: list[int] = []

    def counted(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and 0 < len(added) < 1100:  # from the first object handed over to the last
            collections.append(info["generation"])

    informer = Informer(kube, CONFIGMAPS, namespace, packed=True)
    informer.add_handler(EventHandler(on_add=lambda o: added.append(o["metadata"]["name"])))
    gc.callbacks.append(counted)
    try:
        informers.append(informer.start())
        assert informer.wait_for_sync(60)
    finally:
        gc.callbacks.remove(counted)
    assert len(added) == 1100 and gc.isenabled()
    assert collections == []
