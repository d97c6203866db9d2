"""The informer cache: indexes added to a shared store, shared strings, and errors mapped from Status objects."""

from __future__ import annotations

import json

import pytest

from velashard.kube.errors import Unauthorized, error_from_response
from velashard.kube.informer import share_strings
from velashard.kube.store import Store, label_index


def obj(ns: str, name: str, app: str | None = None) -> dict:
    return {"metadata": {"namespace": ns, "name": name, "labels": {"app": app} if app else {}}}


def test_indexers_added_later_index_what_is_cached():
    store = Store()
    store.upsert(obj("a", "x", "web"))
    store.upsert(obj("a", "y"))
    store.add_indexers({"app": label_index("app")})
    assert [o["metadata"]["name"] for o in store.by_index("app", "web")] == ["x"]
    store.upsert(obj("a", "y", "web"))
    assert len(store.by_index("app", "web")) == 2


def test_the_same_label_index_may_be_asked_for_twice_but_a_name_cannot_change_meaning():
    store = Store({"app": label_index("app")})
    store.add_indexers({"app": label_index("app")})
    with pytest.raises(ValueError):
        store.add_indexers({"app": label_index("other")})
    with pytest.raises(KeyError):
        store.by_index("missing", "x")


def test_unauthorized_is_its_own_error():
    err = error_from_response(401, b'{"kind":"Status","reason":"Unauthorized","message":"no token"}')
    assert isinstance(err, Unauthorized) and err.code == 401 and "no token" in str(err)


def test_shared_strings_keep_the_object_equal_and_share_repeating_parts():
    def decoded(name: str) -> dict:  # as two separate watch events would decode them
        return json.loads(json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": name, "namespace": "team-a", "labels": {"app": "web"}}, "data": {"k": ["v"]}}))

    a, b = share_strings(decoded("a")), share_strings(decoded("b"))
    assert a == decoded("a")
    key_a, key_b = next(iter(a["metadata"])), next(iter(b["metadata"]))
    assert key_a is key_b
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]
    assert a["metadata"]["labels"]["app"] is b["metadata"]["labels"]["app"]


def test_a_packed_store_hands_out_private_copies_of_what_it_keeps_compressed():
    store = Store({"app": label_index("app")}, packed=True)
    first = obj("a", "x", "web")
    assert store.upsert(first) is None
    store.upsert(obj("a", "y", "web"))
    got = store.get_by("a", "x")
    assert got == first and got is not first and store.get("a/x") is not got
    got["metadata"]["name"] = "changed"  # a reader's copy is its own
    assert store.get("a/x") == first
    assert "a/x" in store and "a/z" not in store
    assert [o["metadata"]["name"] for o in store.by_index("app", "web")] == ["x", "y"]
    assert store.upsert(obj("a", "x", "db")) == first  # the previous version, decoded
    assert [o["metadata"]["name"] for o in store.by_index("app", "web")] == ["y"]
    assert store.remove(obj("a", "y")) == obj("a", "y", "web")
    assert store.replace([obj("b", "z")]) == {"a/x": obj("a", "x", "db")}
    assert store.list() == [obj("b", "z")] and len(store) == 1


@pytest.mark.parametrize("packed", [True, False])
def test_a_cached_objects_version_is_read_without_decoding_it(packed, monkeypatch):
    store = Store(packed=packed)
    kept = obj("ns", "a")
    kept["metadata"]["resourceVersion"] = "4711"
    store.upsert(kept)
    long = obj("ns", "b")
    long["metadata"]["resourceVersion"] = "9" * 300  # opaque to clients: too long for the prefix, still right
    store.upsert(long)
    store.upsert(obj("", "c"))
    if packed:
        decoded = []
        real = Store._out
        monkeypatch.setattr(Store, "_out", lambda self, entry: decoded.append(1) or real(self, entry))
    assert store.version("ns/a") == "4711" and store.version_by("ns", "a") == "4711"
    assert store.version("ns/b") == "9" * 300
    assert store.version("c") == "" and store.version("ns/missing") is None
    if packed:
        assert len(decoded) == 1  # only the version too long to keep beside the object
        monkeypatch.undo()
    assert store.get("ns/a") == kept and store.get("ns/b") == long


def test_whether_an_object_is_indexed_under_a_value_is_asked_without_decoding_it():
    store = Store({"app": label_index("app")}, packed=True)
    store.upsert(obj("ns", "a", app="web"))
    store.upsert(obj("ns", "b"))
    assert store.indexed("app", "web", "ns/a")
    assert not store.indexed("app", "web", "ns/b") and not store.indexed("app", "db", "ns/a")
    store.upsert(obj("ns", "a", app="db"))  # relabelled: the index follows
    assert store.indexed("app", "db", "ns/a") and not store.indexed("app", "web", "ns/a")
