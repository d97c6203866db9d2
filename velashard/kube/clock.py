"""Time as something handed in: the real monotonic clock, or a fake one that tests move by hand.

Whatever waits for time to pass (the work queue's delayed items) waits through the clock, so that a
test advancing a fake clock wakes it at once instead of sleeping.
"""

from __future__ import annotations

import threading
import time


class Clock:
    """Monotonic seconds, and a wait on a condition (held by the caller) that ends by `timeout` at the latest."""

    def now(self) -> float:
        return time.monotonic()

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        cond.wait(timeout)


REAL_CLOCK = Clock()


class FakeClock(Clock):
    """A clock that moves only when `advance` is called; waits end when it reaches their deadline."""

    def __init__(self, start: float = 1000.0):
        self._now = start
        self._lock = threading.Lock()
        self._waiting: set[threading.Condition] = set()

    def now(self) -> float:
        with self._lock:
            return self._now

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        if timeout is not None and timeout <= 0:
            return
        with self._lock:
            self._waiting.add(cond)
        cond.wait()  # an advance or the condition's own notify ends it; the caller re-checks the time

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds
            waiting = list(self._waiting)
            self._waiting.clear()
        for cond in waiting:
            with cond:
                cond.notify_all()
