"""The embedded API server's store: list order, the shared snapshots admission reads on every write, reads
without its lock, objects at rest as their JSON, and watches resumed from the history."""

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


def test_reads_are_private_copies_of_the_stored_json():
    store = Store()
    store.create(CONFIGS, config("a"))
    first = store.get(CONFIGS, ("", "a"))
    first["webhooks"].append({"name": "mine"})
    assert store.get(CONFIGS, ("", "a"))["webhooks"] == []
    assert json.loads(store.stored(CONFIGS, ("", "a")).raw) == store.get(CONFIGS, ("", "a"))


PODS = ("", "pods")


def pod(name: str, namespace: str, node: str = "", **labels: str) -> dict:
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels}, "spec": {"nodeName": node}}


def names(found: list) -> list:
    return [key for key, _ in found]


def test_entries_come_in_list_order_by_namespace_and_past_a_page_as_objects_come_and_go():
    store = Store()
    for ns, name in (("b", "2"), ("a", "9"), ("b", "1"), ("c", "1"), ("a", "1")):
        store.create(PODS, pod(name, ns))
    assert names(store.entries(PODS)[0]) == [("a", "1"), ("a", "9"), ("b", "1"), ("b", "2"), ("c", "1")]
    assert names(store.entries(PODS, "b")[0]) == [("b", "1"), ("b", "2")]
    assert names(store.entries(PODS, None, ("a", "9"))[0]) == [("b", "1"), ("b", "2"), ("c", "1")]
    assert names(store.entries(PODS, "a", ("a", "1"))[0]) == [("a", "9")]
    found, following, _ = store.entries(PODS, None, ("a", "1"), limit=2)
    assert names(found) == [("a", "9"), ("b", "1")] and following == 2
    store.remove(PODS, ("b", "1"))
    store.create(PODS, pod("0", "b"))
    store.remove(PODS, ("a", "9"))
    store.create(PODS, pod("9", "a"))  # removed and created again before the keys were read
    found, following, rv = store.entries(PODS)
    assert names(found) == [("a", "1"), ("a", "9"), ("b", "0"), ("b", "2"), ("c", "1")]
    assert following == 0 and rv == store.current_rv()
    assert [p["metadata"]["name"] for p in store.list(PODS, "b")[0]] == ["0", "2"]


def test_entries_are_the_objects_as_they_were_at_the_resource_version_returned_with_them():
    store = Store()
    created = store.create(PODS, pod("p", "ns", app="web"))
    found, _, rv = store.entries(PODS)
    store.replace(PODS, dict(created.obj, spec={"nodeName": "n2"}), created.obj["metadata"]["resourceVersion"])
    store.remove(PODS, ("ns", "p"))
    assert [int(stored.rv) for _, stored in found] == [rv]
    assert json.loads(found[0][1].raw)["spec"] == {"nodeName": ""}


def test_selectors_read_labels_and_fields_kept_beside_the_json():
    store = Store()
    store.create(PODS, pod("p", "ns", node="n1", app="web"))
    view = store.stored(PODS, ("ns", "p")).view(("ns", "p"))
    assert view["metadata"] == {"name": "p", "namespace": "ns", "labels": {"app": "web"}}
    assert view["spec"]["nodeName"] == "n1" and view["status"]["phase"] is None


def test_a_watch_resumed_from_the_history_sees_an_object_leave_its_selection_in_its_previous_state():
    store = Store(watch_history=100)
    created = store.create(PODS, pod("p", "ns", app="web"))
    since = store.current_rv()
    changed = store.replace(PODS, dict(created.obj, metadata=dict(created.obj["metadata"], labels={"app": "db"})),
                            created.obj["metadata"]["resourceVersion"])
    store.create(PODS, pod("q", "ns", app="web"))
    watcher = store.watch(PODS, lambda o: (o["metadata"].get("labels") or {}).get("app") == "web", since)
    lines = [json.loads(line) for line in watcher.take(1)]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in lines] == [("DELETED", "p"), ("ADDED", "q")]
    # its previous labels, at the resourceVersion of the change that took it out
    assert lines[0]["object"]["metadata"]["labels"] == {"app": "web"}
    assert lines[0]["object"]["metadata"]["resourceVersion"] == changed.obj["metadata"]["resourceVersion"]


def test_a_deletion_is_selected_by_the_last_state_it_carries():
    store = Store(watch_history=100)
    created = store.create(PODS, dict(pod("p", "ns", app="web"), metadata=dict(
        pod("p", "ns", app="web")["metadata"], finalizers=["x"])))
    since = store.current_rv()
    last = dict(created.obj, metadata=dict(created.obj["metadata"], labels={"app": "db"}, finalizers=[]))
    store.remove(PODS, ("ns", "p"), final=last)
    web = store.watch(PODS, lambda o: (o["metadata"].get("labels") or {}).get("app") == "web", since)
    db = store.watch(PODS, lambda o: (o["metadata"].get("labels") or {}).get("app") == "db", since)
    assert web.take(0.1) == []
    assert [json.loads(line)["type"] for line in db.take(1)] == ["DELETED"]


def test_owners_are_indexed_from_the_stored_json_and_forgotten_with_it():
    store = Store()
    owner = store.create(CONFIGS, config("owner")).obj["metadata"]["uid"]
    child = pod("c", "ns")
    child["metadata"]["ownerReferences"] = [{"uid": owner, "name": "owner", "kind": "X", "apiVersion": "v1"}]
    created = store.create(PODS, child)
    assert [(gr, o["metadata"]["name"]) for gr, o in store.dependents_of(owner)] == [(PODS, "c")]
    orphan = dict(created.obj, metadata=dict(created.obj["metadata"], ownerReferences=[]))
    store.replace(PODS, orphan, created.obj["metadata"]["resourceVersion"])
    assert store.dependents_of(owner) == []
    assert store.by_uid(owner)[1]["metadata"]["name"] == "owner"
