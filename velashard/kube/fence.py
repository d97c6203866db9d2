"""The write fence: a shard acts only while it holds its Lease, as measured on its own monotonic clock.

Writes are allowed while `last successful renew + renew deadline > now`, where a renewal counts from
when it was sent. The master moves a shard's apps only after it has seen that shard's Lease go unrenewed
for a full lease duration on its own clock, which starts after the renewal was sent; so the fence closes
at least `lease duration - renew deadline` (the margin) before any move. That margin covers the one
thing a check before each request cannot: a write checked just before the deadline and still in flight
(or stalled in a pause between the check and the socket write) when the apps move; keep it larger than a
request's latency (default 15s - 10s = 5s).

Once tripped (a renewal came later than the deadline, or the deadline passed without one: a pause, a
partition, a stalled API server) the fence stays closed even when renewals succeed again: the manager
reopens it only after it has stopped its workers, re-listed its caches and holds the Lease afresh.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from velashard.kube import errors
from velashard.observability import FENCED, FENCED_WRITES

_work = threading.local()


def begin_work(clock: Callable[[], float] = time.monotonic, at: float | None = None) -> None:
    """Mark the start of a unit of work (a reconcile) on this thread: if the fence trips and reopens before
    it ends, its remaining writes are refused, since it decided on what it saw before. `at` carries the
    start of work handed to another thread."""
    _work.started_at = clock() if at is None else at


def work_started() -> float | None:
    return getattr(_work, "started_at", None)


def end_work() -> None:
    _work.started_at = None


class Fence:
    def __init__(self, renew_deadline: float, clock: Callable[[], float] = time.monotonic):
        self.renew_deadline = renew_deadline
        self.clock = clock
        self._lock = threading.Lock()
        self._last_renew: float | None = None
        self._open = False
        self._opened_at = float("-inf")
        self.reason = "lease not acquired yet"
        self._listeners: list[Callable[[str], None]] = []
        FENCED.set(1)

    def on_trip(self, listener: Callable[[str], None]) -> None:
        self._listeners.append(listener)

    @property
    def is_open(self) -> bool:
        return self._open

    def renewed(self, sent_at: float) -> None:
        """The Lease was renewed by a request sent at `sent_at` (monotonic)."""
        reason = "lease renewed after the renew deadline (the process was paused or cut off)"
        with self._lock:
            # Closed in the same step that records the renewal, so no write slips through in between.
            late = self._open and self._last_renew is not None and sent_at - self._last_renew >= self.renew_deadline
            if late:
                self._open, self.reason = False, reason
            self._last_renew = sent_at
        if late:
            self._tripped(reason)

    def fresh(self, now: float | None = None) -> bool:
        """The Lease was renewed within the deadline (whether or not the fence is open)."""
        now = self.clock() if now is None else now
        last = self._last_renew
        return last is not None and now < last + self.renew_deadline

    def check(self, now: float | None = None) -> bool:
        """True while writes are allowed; trips the fence once the deadline has passed."""
        now = self.clock() if now is None else now
        with self._lock:
            if not self._open:
                return False
            if self._last_renew is not None and now < self._last_renew + self.renew_deadline:
                return True
            self._open, self.reason = False, "lease not renewed within the renew deadline"
        self._tripped(self.reason)
        return False

    def allow_write(self, verb: str, what: str) -> None:
        started = getattr(_work, "started_at", None)
        if not self.check():
            reason = self.reason
        elif started is not None and started < self._opened_at:
            reason = "the work began before the fence last tripped"
        else:
            return
        FENCED_WRITES.labels(verb=verb).inc()
        raise errors.Fenced(f"{verb} {what} refused: fenced ({reason})")

    def trip(self, reason: str) -> None:
        with self._lock:
            if not self._open:
                return
            self._open = False
            self.reason = reason
        self._tripped(reason)

    def _tripped(self, reason: str) -> None:
        FENCED.set(1)
        for listener in self._listeners:
            listener(reason)

    def reopen(self) -> bool:
        """Allow writes again; only while the Lease is fresh (the manager has re-listed its caches first)."""
        with self._lock:
            if self._open or not self.fresh():
                return self._open
            self._open = True
            self._opened_at = self.clock()
            self.reason = ""
        FENCED.set(0)
        return True
