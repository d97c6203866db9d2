"""Calls steps make to the outside world (HTTP, SMTP, Prometheus) run here, apart from the reconcile workers: a
step submits its call and waits (running); when the call ends its app is woken (re-enqueued) and the next
reconcile takes the result. A slow or silent server holds one of these threads, never a worker.

Each namespace may have a few calls running at once and a bounded number waiting; free threads go to the
namespaces in turn, so one tenant's hundreds of calls delay another tenant's by at most a turn. A result is
kept for the exact call it answers (the app's uid, the step's id in its run, the action, its parameters) and
taken once, by a reconcile, which writes it as any other reconcile does: through the fence. Results nobody
takes (the app moved, changed, or is gone) expire."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from velashard.observability import fields

log = logging.getLogger("velashard.workflow.outbound")

THREADS = 16
PER_NAMESPACE = 4  # calls of one namespace running at once
QUEUED_PER_NAMESPACE = 2048  # calls of one namespace waiting to run
RESULT_TTL = 600.0

Key = tuple[str, str, str, str]  # app uid, step id, action, digest of the parameters


def call_key(app_uid: str, step_id: str, action: str, params: Any) -> Key:
    digest = hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:24]
    return app_uid, step_id, action, digest


class Busy(Exception):
    """The namespace has too many calls waiting; the step tries again later."""


@dataclass
class _Call:
    key: Key
    namespace: str
    app: str  # namespace/name, to wake
    fn: Callable[[], Any]


@dataclass
class _Done:
    value: Any = None
    error: BaseException | None = None
    at: float = field(default_factory=time.monotonic)


class Outbound:
    def __init__(self, threads: int = THREADS, per_namespace: int = PER_NAMESPACE,
                 queued_per_namespace: int = QUEUED_PER_NAMESPACE) -> None:
        self.threads, self.per_namespace, self.queued_per_namespace = threads, per_namespace, queued_per_namespace
        self.wake: Callable[[str], None] = lambda _app: None  # the controller re-enqueues the app
        self._cond = threading.Condition()
        self._waiting: dict[str, deque[_Call]] = {}  # namespace -> calls not started, in order
        self._turns: deque[str] = deque()  # namespaces with waiting calls, in turn
        self._running: dict[str, int] = {}
        self._pending: set[Key] = set()  # waiting or running
        self._done: dict[Key, _Done] = {}
        self._started = 0

    # --- what steps use -------------------------------------------------------------------------------

    def take(self, key: Key) -> _Done | None:
        """The finished call's outcome, removed; None while it runs or when there is none."""
        with self._cond:
            self._expire()
            return self._done.pop(key, None)

    def submit(self, key: Key, namespace: str, app: str, fn: Callable[[], Any]) -> None:
        """Run `fn` for this call unless it is already waiting or running; Busy when the namespace is full."""
        with self._cond:
            if key in self._pending:
                return
            queue = self._waiting.setdefault(namespace, deque())
            if len(queue) >= self.queued_per_namespace:
                raise Busy(f"{len(queue)} calls of namespace {namespace} are waiting to be sent")
            queue.append(_Call(key, namespace, app, fn))
            self._pending.add(key)
            if namespace not in self._turns:
                self._turns.append(namespace)
            if self._started < self.threads:
                self._started += 1
                threading.Thread(target=self._work, name=f"outbound-{self._started}", daemon=True).start()
            self._cond.notify()

    def running(self, key: Key) -> bool:
        with self._cond:
            return key in self._pending

    def pending(self, app_uid: str, step_id: str) -> bool:
        """Whether a call of this step is waiting or running (the step need not be evaluated again meanwhile)."""
        with self._cond:
            return any(k[0] == app_uid and k[1] == step_id for k in self._pending)

    def has_results(self, app_uid: str) -> bool:
        with self._cond:
            return any(k[0] == app_uid for k in self._done)

    # --- the threads ----------------------------------------------------------------------------------

    def _next(self) -> _Call | None:
        """The next call to run: from the first namespace in turn below its limit (it goes to the back)."""
        for _ in range(len(self._turns)):
            namespace = self._turns.popleft()
            queue = self._waiting.get(namespace)
            if not queue:
                self._waiting.pop(namespace, None)
                continue
            if self._running.get(namespace, 0) >= self.per_namespace:
                self._turns.append(namespace)
                continue
            call = queue.popleft()
            if queue:
                self._turns.append(namespace)
            else:
                self._waiting.pop(namespace, None)
            self._running[namespace] = self._running.get(namespace, 0) + 1
            return call
        return None

    def _work(self) -> None:
        while True:
            with self._cond:
                call = self._next()
                while call is None:
                    self._cond.wait()
                    call = self._next()
            done = _Done()
            try:
                done.value = call.fn()
            except Exception as err:  # the call's failure is its outcome, for the step to report
                done.error = err
            done.at = time.monotonic()
            with self._cond:
                self._running[call.namespace] -= 1
                self._pending.discard(call.key)
                self._done[call.key] = done
                self._cond.notify_all()
            try:
                self.wake(call.app)
            except Exception:  # waking is best effort: the step's backoff brings the app back anyway
                log.exception("waking an app failed", extra=fields(key=call.app))

    def _expire(self) -> None:
        now = time.monotonic()
        for key in [k for k, d in self._done.items() if now - d.at > RESULT_TTL]:
            del self._done[key]
