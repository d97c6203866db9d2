"""The embedded API server's store: list order, the shared snapshots admission reads on every write, and reads
without its lock."""

from __future__ import annotations

import threading

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
