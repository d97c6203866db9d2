"""Pure parts of the controller runtime: rate limits, work queue, store indexes, lease decisions."""

from __future__ import annotations

import threading
import time

import pytest

from velashard.kube.errors import AlreadyExists, Conflict, Expired, Invalid, NotFound, ServerError, error_from_response
from velashard.kube.leaderelection import Observation, may_acquire
from velashard.kube.ratelimit import ItemBackoff, TokenBucket
from velashard.kube.store import Store, label_index
from velashard.kube.workqueue import ShutDown, WorkQueue


def test_token_bucket_burst_then_rate():
    now = [0.0]
    bucket = TokenBucket(qps=10, burst=3, clock=lambda: now[0])
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.reserve() == pytest.approx(0.1)
    now[0] = 10.0
    assert bucket.reserve() == 0.0


def test_item_backoff_is_exponential_and_capped():
    backoff = ItemBackoff(base=0.01, maximum=1.0)
    delays = [backoff.when("a") for _ in range(10)]
    assert delays[:4] == [0.01, 0.02, 0.04, 0.08]
    assert max(delays) == 1.0 and all(d <= 1.0 for d in delays)
    assert backoff.failures("a") == 10
    backoff.forget("a")
    assert backoff.when("a") == 0.01


def test_queue_deduplicates_and_never_hands_out_an_item_twice_at_once():
    q = WorkQueue("unit-dedupe")
    q.add("a")
    q.add("a")
    q.add("b")
    assert len(q) == 2
    first = q.get(timeout=1)
    assert first == "a"
    q.add("a")  # added while processing: queued again only after done
    assert q.get(timeout=1) == "b"
    with pytest.raises(TimeoutError):
        q.get(timeout=0.05)
    q.done("a")
    assert q.get(timeout=1) == "a"
    q.shutdown()


def test_queue_add_after_and_rate_limited_backoff():
    q = WorkQueue("unit-delay", backoff=ItemBackoff(0.05, 0.2))
    started = time.monotonic()
    q.add_after("x", 0.1)
    assert q.get(timeout=2) == "x"
    assert time.monotonic() - started >= 0.09
    q.done("x")
    q.add_rate_limited("y")
    q.add_rate_limited("y")  # second failure: 0.1 s
    assert q.num_requeues("y") == 2
    assert q.get(timeout=2) == "y"
    q.forget("y")
    assert q.num_requeues("y") == 0
    q.shutdown()


def test_shutdown_stops_intake_and_waits_for_in_flight():
    q = WorkQueue("unit-shutdown")
    q.add("busy")
    q.add("queued-later")
    item = q.get(timeout=1)
    finished = threading.Event()

    def finish() -> None:
        time.sleep(0.1)
        finished.set()
        q.done(item)

    threading.Thread(target=finish).start()
    assert q.shutdown(drain=True, timeout=5) is True
    assert finished.is_set()
    q.add("late")
    with pytest.raises(ShutDown):
        q.get(timeout=1)


def test_store_indexes():
    store = Store({"app": label_index("app.oam.dev/name"), "team": label_index("team")})

    def obj(ns, name, app=None, rv="1"):
        labels = {"app.oam.dev/name": app, "team": ns} if app else {"team": ns}
        return {"metadata": {"namespace": ns, "name": name, "labels": labels, "resourceVersion": rv}}

    store.upsert(obj("a", "x", "web"))
    store.upsert(obj("a", "y", "web"))
    store.upsert(obj("b", "z"))
    assert [o["metadata"]["name"] for o in store.by_index("app", "web")] == ["x", "y"]
    store.upsert(obj("a", "y", "db", rv="2"))
    assert [o["metadata"]["name"] for o in store.by_index("app", "web")] == ["x"]
    assert len(store.by_index("team", "a")) == 2
    store.remove(obj("a", "x"))
    assert store.by_index("app", "web") == [] and store.get("a/y")["metadata"]["resourceVersion"] == "2"
    previous = store.replace([obj("c", "only")])
    assert set(previous) == {"a/y", "b/z"} and store.keys() == ["c/only"]


def test_lease_decisions():
    spec = {"holderIdentity": "other", "renewTime": "t1", "leaseDurationSeconds": 15}
    assert may_acquire(None, "me", None, 0, 15)
    assert may_acquire({"holderIdentity": ""}, "me", None, 0, 15)
    assert may_acquire({"holderIdentity": "me"}, "me", None, 0, 15)
    seen = Observation("other", "t1", observed_at=100.0)
    assert not may_acquire(spec, "me", seen, 110.0, 15)
    assert may_acquire(spec, "me", seen, 116.0, 15)
    renewed = Observation("other", "t0", observed_at=100.0)  # the holder renewed since we looked
    assert not may_acquire(spec, "me", renewed, 200.0, 15)


def test_errors_from_status():
    def body(reason):
        return f'{{"kind":"Status","reason":"{reason}","message":"m","code":0}}'.encode()

    assert isinstance(error_from_response(404, body("NotFound")), NotFound)
    assert isinstance(error_from_response(409, body("AlreadyExists")), AlreadyExists)
    assert isinstance(error_from_response(409, body("Conflict")), Conflict)
    assert isinstance(error_from_response(410, body("Expired")), Expired)
    invalid = error_from_response(422, b'{"reason":"Invalid","message":"bad","details":{"causes":[{"field":"x"}]}}')
    assert isinstance(invalid, Invalid) and invalid.causes == [{"field": "x"}]
    assert isinstance(error_from_response(503, b"not json"), ServerError)
