"""How long a workflow waits before it runs again, KubeVela's way, and the counters that decide it.

A step that is not done (waiting, failed and to be retried, pending) counts its tries; the workflow comes back
after 2^tries x 0.05 s of the least-tried one, at least 1 s and at most --max-workflow-wait-backoff-time (60 s),
or --max-workflow-failed-backoff-time (300 s) once a step has failed; a step that errs
--max-workflow-step-error-retry-times (10) times fails for good. The counters live in this process's memory, as
KubeVela's do (a restart starts them again); the context that must survive is in store.py."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from cachetools import LRUCache

MIN_WAIT = 1
COEFFICIENT = 0.05


@dataclass(frozen=True)
class Settings:
    """KubeVela's controller flags of the same names, in seconds and times."""
    max_wait_backoff: int = 60
    max_failed_backoff: int = 300
    max_error_retries: int = 10


DEFAULTS = Settings()


@dataclass
class RunMemory:
    """KubeVela's in-memory store of one workflow run."""
    backoff_times: dict[str, int] = field(default_factory=dict)  # step id -> tries while not done
    backoff_reason: dict[str, str] = field(default_factory=dict)  # step id -> the message those tries had
    failed_times: dict[str, int] = field(default_factory=dict)  # step id -> errors
    last_execute: float | None = None  # epoch seconds a step's status last changed hands
    next_execute: float | None = None
    produced: str = ""  # digest of the status this process last produced: a poll finds it unchanged

    @staticmethod
    def _increase(table: dict[str, int], key: str) -> int:
        """KubeVela's IncreaseCountValueInMemory: the first call records 0."""
        table[key] = table[key] + 1 if key in table else 0
        return table[key]

    def increase_backoff(self, step_id: str) -> int:
        return self._increase(self.backoff_times, step_id)

    def increase_failed(self, step_id: str) -> int:
        return self._increase(self.failed_times, step_id)

    def clear_backoff(self, step_id: str) -> None:
        self.backoff_times.pop(step_id, None)
        self.backoff_reason.pop(step_id, None)

    def forget_step(self, step_id: str) -> None:
        """A step that has no status (new, or cleared to run again) starts with no tries."""
        self.clear_backoff(step_id)
        self.failed_times.pop(step_id, None)

    def note_not_done(self, step_id: str, message: str) -> None:
        """A step still running: a new message starts its count again."""
        if self.backoff_reason.get(step_id) != message:
            self.backoff_reason[step_id] = message
            self.backoff_times.pop(step_id, None)
        self.increase_backoff(step_id)


def wait_interval(step_ids: list[str], memory: RunMemory, any_failed: bool, settings: Settings) -> int:
    """Seconds until the next run, from the least-tried step that has tried (KubeVela's getBackoffWaitTime)."""
    tries = [memory.backoff_times[i] for i in step_ids if memory.backoff_times.get(i, 0) > 0]
    if not tries:
        return MIN_WAIT
    interval = int(2 ** min(min(tries), 15) * COEFFICIENT)
    ceiling = settings.max_failed_backoff if any_failed else settings.max_wait_backoff
    return max(MIN_WAIT, min(interval, ceiling))


class Memories:
    """Each run's memory, by run (app and start time); bounded, shared by the workers."""

    def __init__(self, size: int = 4096) -> None:
        self._runs: LRUCache = LRUCache(maxsize=size)
        self._lock = threading.Lock()

    def of(self, run: str) -> RunMemory:
        with self._lock:
            memory = self._runs.get(run)
            if memory is None:
                memory = self._runs[run] = RunMemory()
            return memory

    def forget(self, run: str) -> None:
        with self._lock:
            self._runs.pop(run, None)
