"""The work queue and the controller runner, without an API server: dedupe, delays, shutdown, workers."""

from __future__ import annotations

import threading
import time

import pytest

from velashard.kube import errors
from velashard.kube.clock import FakeClock
from velashard.kube.controller import DONE, REQUEUE, Controller
from velashard.kube.informer import Backoff
from velashard.kube.ratelimit import ItemBackoff, TokenBucket
from velashard.kube.workqueue import ShutDown, WorkQueue


@pytest.fixture
def queue():
    q = WorkQueue("unit")
    yield q
    q.shutdown()


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def fake_queue(clock):
    q = WorkQueue("unit-fake", clock=clock)
    yield q
    q.shutdown()


def settle(q: WorkQueue, want: int) -> None:
    """Let the queue's delay thread act on a clock move (real time passes only for the thread switch)."""
    deadline = time.monotonic() + 5
    while len(q) != want and time.monotonic() < deadline:
        time.sleep(0.001)
    assert len(q) == want


def test_add_after_twice_waits_once_and_the_earlier_time_wins(fake_queue, clock):
    fake_queue.add_after("k", 5.0)
    fake_queue.add_after("k", 0.05)
    fake_queue.add_after("k", 0.1)
    clock.advance(0.04)
    settle(fake_queue, 0)  # not due yet
    clock.advance(0.01)
    settle(fake_queue, 1)
    assert fake_queue.get() == "k"
    fake_queue.done("k")
    clock.advance(10)
    settle(fake_queue, 0)  # the later requests were merged into the first due


def test_an_item_added_many_times_while_processing_runs_once_more(queue):
    queue.add("k")
    assert queue.get(timeout=1) == "k"
    for _ in range(5):
        queue.add("k")
    assert len(queue) == 0  # never handed out while in process
    queue.done("k")
    assert queue.get(timeout=1) == "k"
    queue.done("k")
    with pytest.raises(TimeoutError):
        queue.get(timeout=0.05)


def test_shutdown_drops_waiting_items_wakes_workers_and_ends_its_thread():
    q = WorkQueue("unit-shutdown-wake")
    q.add_after("later", 10)
    woke: list[str] = []

    def worker() -> None:
        try:
            q.get()
        except ShutDown:
            woke.append("shutdown")

    thread = threading.Thread(target=worker)
    thread.start()
    assert q.shutdown(drain=True, timeout=2) is True
    thread.join(2)
    assert woke == ["shutdown"]
    assert not q._delay_thread.is_alive()


def test_rate_limited_readd_waits_for_the_longer_of_backoff_and_overall_limit(clock):
    bucket = TokenBucket(qps=1, burst=1, clock=clock.now)
    q = WorkQueue("unit-overall", backoff=ItemBackoff(0.001, 1.0), bucket=bucket, clock=clock)
    try:
        q.add_rate_limited("a")  # first token is free; backoff 1 ms
        q.add_rate_limited("b")  # the bucket is empty: one second
        clock.advance(0.001)
        settle(q, 1)
        assert q.get() == "a"
        clock.advance(0.9)
        settle(q, 0)
        clock.advance(0.099)
        settle(q, 1)
        assert q.get() == "b"
    finally:
        q.shutdown()


def test_backoff_doubles_per_failure_up_to_its_cap_and_forget_resets():
    backoff = ItemBackoff(0.01, 0.05)
    assert [backoff.when("k") for _ in range(5)] == [0.01, 0.02, 0.04, 0.05, 0.05]
    assert backoff.failures("k") == 5 and backoff.when("other") == 0.01
    backoff.forget("k")
    assert backoff.when("k") == 0.01


def test_a_get_with_timeout_ends_when_the_clock_passes_it(fake_queue, clock):
    errors_seen: list[Exception] = []

    def waiter() -> None:
        try:
            fake_queue.get(timeout=5)
        except TimeoutError as err:
            errors_seen.append(err)

    thread = threading.Thread(target=waiter)
    thread.start()
    clock.advance(1)
    assert thread.is_alive()
    for _ in range(100):  # the waiter may have read the clock only now: move on until its deadline passes
        clock.advance(5)
        thread.join(0.05)
        if not thread.is_alive():
            break
    assert len(errors_seen) == 1


def test_reconnect_backoff_is_jittered_doubling_and_capped():
    backoff = Backoff(initial=0.2, maximum=1.0)
    delays = [backoff.next() for _ in range(6)]
    for delay, nominal in zip(delays, [0.2, 0.4, 0.8, 1.0, 1.0, 1.0]):
        assert nominal / 2 <= delay <= nominal
    backoff.reset()
    assert backoff.next() <= 0.2


def test_a_key_is_never_reconciled_concurrently_and_the_last_change_is_seen():
    """Eight workers, four keys changed while in process: no overlap, and every key's final reconcile
    starts after its last change (the level-based guarantee controllers rely on)."""
    lock = threading.Lock()
    version = {k: 0 for k in "abcd"}
    seen = {k: -1 for k in "abcd"}
    active: dict[str, int] = {k: 0 for k in "abcd"}
    overlaps: list[str] = []

    def reconcile(key: str):
        with lock:
            active[key] += 1
            if active[key] > 1:
                overlaps.append(key)
            seen[key] = version[key]
        time.sleep(0.001)
        with lock:
            active[key] -= 1
        return DONE

    controller = Controller("unit-concurrency", reconcile, workers=8)
    controller.start()
    try:
        for _ in range(200):
            for key in "abcd":
                with lock:
                    version[key] += 1
                controller.enqueue(key)
        deadline = time.monotonic() + 10
        while seen != version and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        controller.stop()
    assert overlaps == []
    assert seen == version


def test_a_failing_reconcile_is_retried_with_backoff_and_the_worker_survives(caplog):
    caplog.set_level("INFO", logger="velashard.kube.controller")
    calls: list[tuple[str, float]] = []

    def reconcile(key: str):
        calls.append((key, time.monotonic()))
        if key == "bad" and len([c for c in calls if c[0] == "bad"]) <= 3:
            raise errors.Conflict(409, "Conflict", "stale")
        if key == "bug":
            raise RuntimeError("a bug")
        return REQUEUE if key == "again" and len([c for c in calls if c[0] == "again"]) == 1 else DONE

    queue = WorkQueue("unit-retry", backoff=ItemBackoff(base=0.02, maximum=0.05))
    controller = Controller("unit-retry", reconcile, workers=1, queue=queue)
    controller.start()
    try:
        for key in ("bad", "bug", "again", "fine"):
            controller.enqueue(key)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and ([c[0] for c in calls].count("bad") < 4 or
                                                [c[0] for c in calls].count("again") < 2):
            time.sleep(0.01)
    finally:
        controller.stop()
    bad = [t for k, t in calls if k == "bad"]
    assert len(bad) == 4 and queue.num_requeues("bad") == 0  # success forgot its failures
    gaps = [b - a for a, b in zip(bad, bad[1:])]
    assert all(gap >= want for gap, want in zip(gaps, [0.02, 0.04, 0.05])), gaps  # never sooner than backoff
    assert [k for k, _ in calls].count("fine") == 1
    failed = [r for r in caplog.records if r.getMessage() == "reconcile failed"]
    assert {r.fields["key"] for r in failed} == {"bug"} and all(r.exc_info for r in failed)  # a bug: traceback
    raced = [r for r in caplog.records if r.getMessage() == "reconcile did not complete"]
    assert {r.fields["key"] for r in raced} == {"bad"} and not any(r.exc_info for r in raced)  # a race: none


def test_stop_waits_for_the_reconcile_in_flight_and_runs_nothing_new():
    started, release = threading.Event(), threading.Event()
    finished: list[str] = []

    def reconcile(key: str):
        if key == "slow":
            started.set()
            release.wait(5)
        finished.append(key)
        return DONE

    controller = Controller("unit-stop", reconcile, workers=1)
    controller.start()
    controller.enqueue("slow")
    assert started.wait(2)
    controller.enqueue("queued")
    threading.Timer(0.2, release.set).start()
    assert controller.stop(timeout=5) is True
    assert finished == ["slow"]
    assert not any(t.is_alive() for t in controller._threads)
