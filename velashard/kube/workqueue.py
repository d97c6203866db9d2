"""A rate-limited, deduplicating work queue in the manner of client-go's workqueue.

An item added while queued is queued once; an item added while being processed is processed once
more after `done`, never concurrently. Failures back off per item (exponentially, capped) and the
queue as a whole is rate limited by a token bucket. Time comes from an injected clock, so that tests move
it by hand instead of sleeping.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import deque
from typing import Hashable

from velashard.kube.clock import REAL_CLOCK, Clock
from velashard.kube.ratelimit import ItemBackoff, TokenBucket
from velashard.observability import WORKQUEUE_DEPTH, WORKQUEUE_QUEUE_DURATION, WORKQUEUE_RETRIES


class ShutDown(Exception):
    """The queue is shutting down; workers should exit."""


class WorkQueue:
    def __init__(self, name: str, backoff: ItemBackoff | None = None, bucket: TokenBucket | None = None,
                 clock: Clock = REAL_CLOCK):
        self.name = name
        self._clock = clock
        self._backoff = backoff or ItemBackoff(0.005, 300.0)
        self._bucket = bucket or TokenBucket(10.0, 100, clock=clock.now)
        self._cond = threading.Condition()
        self._queue: deque[Hashable] = deque()
        self._dirty: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._added_at: dict[Hashable, float] = {}
        self._waiting: list[tuple[float, int, Hashable]] = []
        # When each waiting item is due (the earliest asked for); heap entries at other times are stale.
        self._ready_at: dict[Hashable, float] = {}
        self._seq = itertools.count()
        self._shutting_down = False
        self._depth = WORKQUEUE_DEPTH.labels(name=name)
        self._latency = WORKQUEUE_QUEUE_DURATION.labels(name=name)
        self._delay_thread = threading.Thread(target=self._delay_loop, name=f"workqueue-{name}-delay", daemon=True)
        self._delay_thread.start()

    def add(self, item: Hashable) -> None:
        with self._cond:
            if self._shutting_down or item in self._dirty:
                return
            self._dirty.add(item)
            self._added_at.setdefault(item, self._clock.now())
            if item not in self._processing:
                self._queue.append(item)
                self._depth.set(len(self._queue))
                self._cond.notify_all()

    def add_after(self, item: Hashable, delay: float) -> None:
        if delay <= 0:
            self.add(item)
            return
        with self._cond:
            if self._shutting_down or item in self._dirty:
                return  # queued already (or again after the run in progress): that run sees the latest state
            at = self._clock.now() + delay
            if self._ready_at.get(item, float("inf")) <= at:
                return  # already due sooner: waiting twice would only process it twice
            self._ready_at[item] = at
            heapq.heappush(self._waiting, (at, next(self._seq), item))
            self._cond.notify_all()

    def add_rate_limited(self, item: Hashable) -> None:
        """Re-add after the longer of the item's backoff and the queue's overall rate limit."""
        WORKQUEUE_RETRIES.labels(name=self.name).inc()
        self.add_after(item, max(self._backoff.when(item), self._bucket.reserve()))

    def forget(self, item: Hashable) -> None:
        self._backoff.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return self._backoff.failures(item)

    def get(self, timeout: float | None = None) -> Hashable:
        """The next item, marked as processing; raises ShutDown once the queue is shut down and empty."""
        deadline = None if timeout is None else self._clock.now() + timeout
        with self._cond:
            while not self._queue:
                if self._shutting_down:
                    raise ShutDown()
                remaining = None if deadline is None else deadline - self._clock.now()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError("no item became available")
                self._clock.wait(self._cond, remaining)
            item = self._queue.popleft()
            self._depth.set(len(self._queue))
            self._processing.add(item)
            self._dirty.discard(item)
            added = self._added_at.pop(item, None)
        if added is not None:
            self._latency.observe(self._clock.now() - added)
        return item

    def done(self, item: Hashable) -> None:
        with self._cond:
            self._processing.discard(item)
            if item in self._dirty:
                self._queue.append(item)
                self._depth.set(len(self._queue))
                self._cond.notify_all()
            elif not self._processing:
                self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    def shutdown(self, drain: bool = False, timeout: float = 10.0) -> bool:
        """Stop intake and drop what has not started; with `drain`, wait (up to `timeout`) for in-flight items.

        Dropped items are not lost: whoever runs the controller next relists and re-queues everything.
        Returns False if in-flight items were still running at the deadline.
        """
        deadline = self._clock.now() + timeout
        with self._cond:
            self._shutting_down = True
            self._waiting.clear()
            self._ready_at.clear()
            self._queue.clear()
            self._dirty.clear()
            self._added_at.clear()
            self._depth.set(0)
            self._cond.notify_all()
            while drain and self._processing and self._clock.now() < deadline:
                self._clock.wait(self._cond, deadline - self._clock.now())
            drained = not self._processing
        if self._delay_thread is not threading.current_thread():
            self._delay_thread.join(max(0.0, deadline - self._clock.now()))
        return drained

    def reopen(self) -> None:
        """Take items again after a shutdown (a fenced shard resuming); the queue starts empty."""
        with self._cond:
            if not self._shutting_down:
                return
            self._shutting_down = False
            self._delay_thread = threading.Thread(target=self._delay_loop, name=f"workqueue-{self.name}-delay",
                                                  daemon=True)
            self._delay_thread.start()

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def _delay_loop(self) -> None:
        while True:
            with self._cond:
                if self._shutting_down:
                    return
                now = self._clock.now()
                ready = []
                while self._waiting and self._waiting[0][0] <= now:
                    at, _, item = heapq.heappop(self._waiting)
                    if self._ready_at.get(item) == at:
                        del self._ready_at[item]
                        ready.append(item)
                if not ready:
                    timeout = self._waiting[0][0] - now if self._waiting else None
                    self._clock.wait(self._cond, timeout)
                    continue
            for item in ready:
                self.add(item)
