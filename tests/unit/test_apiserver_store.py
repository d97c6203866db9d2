"""The embedded API server's store: list order, the shared snapshots admission reads on every write, and reads
without its lock."""

from __future__ import annotations

import json
import threading

from velashard.apiserver.storage import store as store_module
from velashard.apiserver.storage.store import Store

CONFIGS = ("admissionregistration.k8s.io", "validatingwebhookconfigurations")


def config(name: str) -> dict:
    return {"metadata": {"name": name}, "webhooks": []}


def test_a_snapshot_is_in_list_order_and_shared_until_something_changes():
    store = Store()
    assert store.snapshot(CONFIGS) == ()
    for name in ("b", "a", "c"):
        store.create(CONFIGS, config(name))
    first = store.snapshot(CONFIGS)
    assert [c["metadata"]["name"] for c in first] == ["a", "b", "c"]
    assert store.snapshot(CONFIGS) is first  # nothing changed: the same tuple, no copy
    assert [c["metadata"]["name"] for c in store.list(CONFIGS)[0]] == ["a", "b", "c"]
    store.remove(CONFIGS, ("", "b"))
    assert [c["metadata"]["name"] for c in store.snapshot(CONFIGS)] == ["a", "c"]
    assert [c["metadata"]["name"] for c in first] == ["a", "b", "c"]  # a reader's earlier snapshot stays whole


def test_a_list_is_the_caller_s_own():
    store = Store()
    store.create(CONFIGS, config("a"))
    items, _ = store.list(CONFIGS)
    items.append(config("z"))
    assert [c["metadata"]["name"] for c in store.snapshot(CONFIGS)] == ["a"]


def test_a_get_does_not_wait_for_the_store_lock():
    # Every request reads its namespace and its object: while a writer holds the lock (fanning an event out to the
    # watchers), reads go on and see the last committed state.
    store = Store()
    store.create(CONFIGS, config("a"))
    held, release = threading.Event(), threading.Event()

    def writer() -> None:
        with store.lock:
            held.set()
            release.wait(10)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert held.wait(10)
        seen: list = []
        reader = threading.Thread(target=lambda: seen.append(store.get(CONFIGS, ("", "a"))))
        reader.start()
        reader.join(5)
        assert seen and seen[0]["metadata"]["name"] == "a"
        assert store.get(CONFIGS, ("", "missing")) is None
    finally:
        release.set()
        thread.join()


def test_an_event_carries_the_object_as_stored_serialized_outside_the_lock():
    store = Store()
    created = store.create(CONFIGS, {"metadata": {"name": "a"}, "webhooks": [{"name": "w.example.com"}]})
    assert json.loads(created.raw) == created.obj and created.obj["metadata"]["resourceVersion"] == "1"
    changed = dict(created.obj, webhooks=[])
    replaced = store.replace(CONFIGS, changed, "1")
    assert json.loads(replaced.raw) == replaced.obj and replaced.obj["metadata"]["resourceVersion"] == "2"
    # An object that carries the mark itself (it cannot know it) is serialized under the lock instead.
    sneaky = {"first": {"resourceVersion": store_module._RV_MARK}, "metadata": {"name": "b"}}
    event = store.create(CONFIGS, sneaky)
    assert json.loads(event.raw) == event.obj and event.obj["metadata"]["resourceVersion"] == "3"
    assert json.loads(event.raw)["first"] == {"resourceVersion": store_module._RV_MARK}
