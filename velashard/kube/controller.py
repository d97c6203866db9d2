"""A controller: a reconcile function over keys, fed by informer events through a work queue."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from velashard.kube import errors
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
              predicate: Callable[[Obj | None, Obj], bool] | None = None) -> None:
        """Queue keys for an informer's events: the object's own key, or the keys `to_keys` maps it to
        (e.g. an owned Deployment to its Application). `predicate(old, new)` filters updates."""
        keys = to_keys or (lambda obj: [object_key(obj)])

        def on_add(obj: Obj) -> None:
            if predicate is None or predicate(None, obj):
                for key in keys(obj):
                    self.queue.add(key)

        def on_update(old: Obj, new: Obj) -> None:
            if predicate is None or predicate(old, new):
                for key in set(keys(new)) | set(keys(old)):
                    self.queue.add(key)

        def on_delete(obj: Obj) -> None:
            for key in keys(obj):
                self.queue.add(key)

        informer.add_handler(EventHandler(on_add, on_update, on_delete))

    def start(self) -> None:
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
            try:
                with heartbeat.busy():
                    self._process(key)
            finally:
                self.queue.done(key)

    def _process(self, key: Any) -> None:
        started = time.monotonic()
        try:
            result = self.reconcile(key) or DONE
        except Exception as err:
            elapsed = time.monotonic() - started
            RECONCILE_TOTAL.labels(controller=self.name, result="error").inc()
            RECONCILE_DURATION.labels(controller=self.name).observe(elapsed)
            # API errors (a conflict on a stale cache, a webhook's denial) say all; anything else is a bug
            # whose traceback the log line carries.
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
