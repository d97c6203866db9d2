"""A controller: a reconcile function over keys, fed by informer events through a work queue.

Outcomes travel one way: a reconcile returns a Result when it succeeded (perhaps asking to come back later)
and raises Retry or Terminal when it did not; `_process` is the one place that logs, counts and backs off.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from velashard.kube import errors
from velashard.kube.fence import begin_work, end_work
from velashard.kube.informer import EventHandler, Informer
from velashard.kube.store import object_key
from velashard.kube.workqueue import ShutDown, WorkQueue
from velashard.observability import RECONCILE_DURATION, RECONCILE_TOTAL, Heartbeat, fields

log = logging.getLogger("velashard.kube.controller")


@dataclass(frozen=True)
class Result:
    """What a reconcile asks for next: nothing (done), a rate-limited retry, or a retry after a delay."""

    requeue: bool = False
    requeue_after: float | None = None


DONE = Result()
REQUEUE = Result(requeue=True)


def requeue_after(seconds: float) -> Result:
    return Result(requeue_after=seconds)


class Retry(Exception):
    """Not done, expected to pass later (a race, a dependency not there yet): retried after `after` seconds,
    or with the queue's backoff when None. Logged without a traceback."""

    def __init__(self, reason: str, after: float | None = None):
        super().__init__(reason)
        self.after = after


class Terminal(Exception):
    """Not done, and retrying cannot help until the object or the world changes (bad input the status already
    reports, an object that left this controller): logged once, not retried; the next event brings it back."""


Reconcile = Callable[[str], "Result | None"]
Obj = dict[str, Any]


class Controller:
    def __init__(self, name: str, reconcile: Reconcile, workers: int = 1, queue: WorkQueue | None = None):
        self.name = name
        self.reconcile = reconcile
        self.workers = max(1, workers)
        self.queue = queue if queue is not None else WorkQueue(name)
        self._threads: list[threading.Thread] = []
        self.stuck_after = 300.0  # a reconcile running longer than this makes /healthz fail
        self.heartbeats: list[Heartbeat] = []

    def enqueue(self, key: str) -> None:
        self.queue.add(key)

    def watch(self, informer: Informer, to_keys: Callable[[Obj], list[str]] | None = None,
              predicate: Callable[[Obj | None, Obj], bool] | None = None, delay: float = 0.0) -> None:
        """Queue keys for an informer's events: the object's own key, or the keys `to_keys` maps it to
        (e.g. an owned Deployment to its Application). `predicate(old, new)` filters updates. With `delay`,
        a key is queued that long after an event, so that a burst of events (another controller's writes to
        several objects of one app) makes one run."""
        keys = to_keys or (lambda obj: [object_key(obj)])

        def queue(key: str) -> None:
            self.queue.add_after(key, delay)

        def on_add(obj: Obj) -> None:
            if predicate is None or predicate(None, obj):
                for key in keys(obj):
                    queue(key)

        def on_update(old: Obj, new: Obj) -> None:
            if predicate is None or predicate(old, new):
                for key in set(keys(new)) | set(keys(old)):
                    queue(key)

        def on_delete(obj: Obj) -> None:
            for key in keys(obj):
                queue(key)

        informer.add_handler(EventHandler(on_add, on_update, on_delete))

    def start(self) -> None:
        self._threads = [t for t in self._threads if t.is_alive()]
        self.heartbeats = []  # a restart's workers replace the stopped ones
        for i in range(self.workers):
            heartbeat = Heartbeat(f"{self.name}-worker-{i}", self.stuck_after)
            thread = threading.Thread(target=self._worker, args=(heartbeat,), name=heartbeat.name, daemon=True)
            heartbeat.attach(thread)
            self.heartbeats.append(heartbeat)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 8.0) -> bool:
        """Stop intake, let in-flight reconciles finish (up to `timeout`), then stop the workers.

        Returns False if a reconcile was still running at the deadline (its worker is left to finish).
        """
        deadline = time.monotonic() + timeout
        for heartbeat in self.heartbeats:
            heartbeat.stop()
        drained = self.queue.shutdown(drain=True, timeout=timeout)
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()) + 0.1)
        return drained

    def _worker(self, heartbeat: Heartbeat) -> None:
        while True:
            try:
                key = self.queue.get()
            except ShutDown:
                return
            begin_work()  # a reconcile that outlives a fence trip writes nothing more (kube/fence.py)
            try:
                with heartbeat.busy():
                    self._process(key)
            finally:
                end_work()
                self.queue.done(key)

    def _process(self, key: Any) -> None:
        started = time.monotonic()
        try:
            result = self.reconcile(key) or DONE
        except (Retry, Terminal, errors.Conflict, errors.AlreadyExists) as err:
            self._failed(key, err, time.monotonic() - started)
            return
        except Exception as err:
            elapsed = time.monotonic() - started
            RECONCILE_TOTAL.labels(controller=self.name, result="error").inc()
            RECONCILE_DURATION.labels(controller=self.name).observe(elapsed)
            # Other API errors (a webhook's denial, an outage) say all; anything else is a bug whose traceback
            # the log line carries.
            log.error("reconcile failed", exc_info=not isinstance(err, errors.KubeError),
                      extra=fields(controller=self.name, key=key, error=str(err),
                                  retries=self.queue.num_requeues(key), duration=round(elapsed, 4)))
            self.queue.add_rate_limited(key)
            return
        elapsed = time.monotonic() - started
        RECONCILE_DURATION.labels(controller=self.name).observe(elapsed)
        if result.requeue_after is not None:
            outcome = "requeue_after"
            self.queue.forget(key)
            self.queue.add_after(key, result.requeue_after)
        elif result.requeue:
            outcome = "requeue"
            self.queue.add_rate_limited(key)
        else:
            outcome = "success"
            self.queue.forget(key)
        RECONCILE_TOTAL.labels(controller=self.name, result=outcome).inc()
        log.debug("reconciled", extra=fields(controller=self.name, key=key, result=outcome,
                                             duration=round(elapsed, 4)))

    def _failed(self, key: Any, err: Exception, elapsed: float) -> None:
        """An expected failure: a Terminal one is dropped, anything else (a Retry, a write that lost a race
        with another writer) comes back after its delay or with backoff."""
        RECONCILE_DURATION.labels(controller=self.name).observe(elapsed)
        if isinstance(err, Terminal):
            outcome = "terminal"
            self.queue.forget(key)
        elif isinstance(err, Retry) and err.after is not None:
            outcome = "retry"
            self.queue.forget(key)
            self.queue.add_after(key, err.after)
        else:
            outcome = "retry"
            self.queue.add_rate_limited(key)
        RECONCILE_TOTAL.labels(controller=self.name, result=outcome).inc()
        level = logging.INFO if outcome == "retry" else logging.WARNING
        log.log(level, "reconcile did not complete" if outcome == "retry" else "reconcile stopped",
                extra=fields(controller=self.name, key=key, result=outcome, error=str(err),
                             retries=self.queue.num_requeues(key), duration=round(elapsed, 4)))
