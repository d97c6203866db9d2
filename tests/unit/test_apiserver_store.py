"""The embedded API server's store: list order, and the shared snapshots admission reads on every write."""

from __future__ import annotations

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
