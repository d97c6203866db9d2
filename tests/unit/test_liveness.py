"""Liveness as a pure decision: a thread is dead, stuck past its deadline, idle or stopped on purpose."""

from __future__ import annotations

import threading

from velashard.observability import Heartbeat, beat_problem, liveness_problems


def test_beat_problem_decides_from_plain_data():
    assert beat_problem("w", alive=True, stopped=False, busy_since=None, deadline=5, now=100) is None
    assert beat_problem("w", alive=True, stopped=False, busy_since=96, deadline=5, now=100) is None
    assert beat_problem("w", alive=True, stopped=False, busy_since=90, deadline=5, now=100) == \
        "w: stuck for 10s (deadline 5s)"
    assert beat_problem("w", alive=False, stopped=False, busy_since=None, deadline=5, now=100) == "w: thread died"
    assert beat_problem("w", alive=False, stopped=True, busy_since=90, deadline=5, now=100) is None


def test_a_heartbeat_reads_its_thread_and_an_injected_clock():
    now = [1000.0]
    beat = Heartbeat("loop", 30.0, clock=lambda: now[0])
    assert beat.problem() is None  # not started yet
    done = threading.Event()
    thread = threading.Thread(target=done.wait)
    beat.attach(thread)
    thread.start()
    try:
        with beat.busy():
            now[0] += 31
            assert liveness_problems([beat]) == ["loop: stuck for 31s (deadline 30s)"]
        assert liveness_problems([beat]) == []  # idle again
    finally:
        done.set()
        thread.join()
    assert beat.problem() == "loop: thread died"
    beat.stop()
    assert beat.problem() is None
