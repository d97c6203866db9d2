"""The informer cache: indexes added to a shared store, and errors mapped from Status objects."""

from __future__ import annotations

import pytest

from velashard.kube.errors import Unauthorized, error_from_response
from velashard.kube.store import Store, label_index, namespace_index


def obj(ns: str, name: str, app: str | None = None) -> dict:
    return {"metadata": {"namespace": ns, "name": name, "labels": {"app": app} if app else {}}}


def test_indexers_added_later_index_what_is_cached():
    store = Store({"namespace": namespace_index})
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
