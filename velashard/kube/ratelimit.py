"""Rate limiting: a token bucket (client QPS and the queue's overall limit) and per-item exponential backoff."""

from __future__ import annotations

import threading
import time
from typing import Callable, Hashable


class TokenBucket:
    """`qps` tokens per second up to `burst`; `reserve()` takes one and says how long to wait for it."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic):
        if qps <= 0 or burst < 1:
            raise ValueError("qps must be > 0 and burst >= 1")
        self.qps = float(qps)
        self.burst = int(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()

    def reserve(self) -> float:
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def acquire(self) -> None:
        """Block until a token is available."""
        delay = self.reserve()
        if delay > 0:
            time.sleep(delay)


class ItemBackoff:
    """Per-item exponential backoff: base * 2^failures, capped at `maximum`."""

    def __init__(self, base: float = 0.005, maximum: float = 300.0):
        self.base = base
        self.maximum = maximum
        self._failures: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def when(self, item: Hashable) -> float:
        with self._lock:
            n = self._failures.get(item, 0)
            self._failures[item] = n + 1
        return min(self.maximum, self.base * (2 ** min(n, 62)))

    def forget(self, item: Hashable) -> None:
        with self._lock:
            self._failures.pop(item, None)

    def failures(self, item: Hashable) -> int:
        with self._lock:
            return self._failures.get(item, 0)
