"""The WorkflowRun reconcile (kubevela/workflow's controller, in the same engine as applications' workflows): make
the run's workflow (its steps, or its Workflow template's), run a pass of it as the run's author, write the run's
status; a finished run is left alone until it is restarted. Pure parts are velashard.workflow.runs."""

from __future__ import annotations

import copy
import logging
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable

from velashard.apis.oam import WORKFLOW_API_VERSION, WORKFLOW_RUNS
from velashard.core import status as app_status
from velashard.core.authors import AuthConfig, author_of, refusal
from velashard.core.events import record_event
from velashard.core.rundelivery import RunDelivery
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.controller import DONE, Result, Retry, Terminal, requeue_after
from velashard.kube.discovery import Discovery
from velashard.observability import fields
from velashard.workflow import phases as ph
from velashard.workflow import runs
from velashard.workflow.executor import WorkflowEngine
from velashard.workflow.templates import Lookup

log = logging.getLogger("velashard.core.workflowruns")

Templates = Callable[[str, str], "dict[str, Any] | None"]  # (namespace, name) -> the Workflow, or None
STALE_RETRY = 0.2  # seconds: how soon a pass that found the cache behind our own write looks again
# what a finished run's Event says, by its state (KubeVela's messages)
FINISHED = {ph.WF_SUCCEEDED: ("Normal", "WorkflowRun finished successfully"),
            ph.WF_FAILED: ("Warning", "WorkflowRun finished with failure"),
            ph.WF_TERMINATED: ("Normal", "WorkflowRun finished with termination")}


class WorkflowRunReconciler:
    def __init__(self, client: KubeClient, discovery: Discovery, lookup: Callable[[str], dict[str, Any] | None],
                 templates: Templates, engine: WorkflowEngine, step_definition: Lookup, auth: AuthConfig = AuthConfig(),
                 retry_after: float = 5.0):
        self.client, self.discovery, self.lookup, self.templates = client, discovery, lookup, templates
        self.engine, self.step_definition, self.auth = engine, step_definition, auth
        self.retry_after = retry_after  # a run whose workflow cannot be made yet (its Workflow may come)
        # key -> the resourceVersion our last status write replaced, until the cache shows a newer one: a pass over
        # the run as it was before that write would run again the steps the write recorded as done
        self._replaced: dict[str, str] = {}
        self._lock = threading.Lock()

    def __call__(self, key: str) -> Result:
        found = self.lookup(key)
        if found is None or found["metadata"].get("deletionTimestamp"):
            self._forget_write(key)
            return DONE  # its context ConfigMap is owned by it: the garbage collector takes it
        if self._stale(key, found["metadata"].get("resourceVersion", "")):
            return requeue_after(STALE_RETRY)
        run = copy.deepcopy(found)
        run["apiVersion"], run["kind"] = WORKFLOW_API_VERSION, WORKFLOW_RUNS.kind
        if runs.settled(run):
            self.engine.forget(run, runs.engine_status(run.get("status")))
            return DONE
        moment = datetime.now(timezone.utc)
        stamp = ph.timestamp(moment)
        problem = refusal(run, self.auth)
        if problem:
            self._write(run, runs.not_generated(run.get("status"), problem, stamp))
            raise Terminal(problem)
        refused: list[str] = []
        author = self.client.acting_as(author_of(run, self.auth) if self.auth.enabled else None,
                                       lambda err: refused.append(err.message))
        template = None
        name = runs.template_name(run)
        if name:
            template = self.templates(run["metadata"]["namespace"], name)
        try:
            workflow = runs.workflow_of(run, template)
        except runs.RunError as err:
            status = runs.not_generated(run.get("status"), str(err), stamp)
            if status != run.get("status") and self._write(run, status):  # said once, as the status says it
                record_event(self.client, run, "Warning", "Generate", f"fail to generate workflow runners: {err}")
            raise Retry(f"workflow run: {err}", after=self.retry_after) from None
        previous = runs.engine_status(run.get("status"))
        if previous:
            previous["mode"] = str(workflow.mode)  # as the engine left it, so that an unchanged run waits its backoff
        try:
            outcome = self.engine.execute(run, workflow, previous, runs.context_of(run), author,
                                          RunDelivery(run, author, self.discovery), self.step_definition, moment)
        except errors.Forbidden as err:
            raise Retry(f"the author was refused: {err.message}") from err
        except errors.KubeError as err:
            raise Retry(f"workflow run: {err.message}") from err
        condition = runs.ready(stamp) if outcome.state == ph.WF_SUCCEEDED else None
        status = runs.run_status(outcome.status, workflow.mode, run.get("status"), condition)
        authorized = self._authorized(author, refused, stamp)
        before = next((c for c in (run.get("status") or {}).get("conditions") or [] if c.get("type") == "Authorized"),
                      None)
        if not outcome.ran and not refused and before is not None and before.get("status") == "False":
            authorized = before  # no step ran (the run waits out its backoff): a refusal a step met stays said
        status["conditions"] = runs.with_condition(list(status.get("conditions") or []), authorized)
        if not self._write(run, status):
            return DONE
        if runs.ended(status):
            self.engine.forget(run, outcome.status)
            etype, message = FINISHED[runs.phase_of(status)]
            record_event(self.client, run, etype, "Execute", message)
            log.info("workflow run finished", extra=fields(key=key, state=runs.phase_of(status)))
            return DONE
        if refused:
            raise Retry(f"the author was refused: {refused[0]}")
        return requeue_after(max(outcome.requeue_after, 0.05)) if outcome.requeue_after is not None else DONE

    @staticmethod
    def _authorized(author: KubeClient, refused: list[str], now: str) -> dict[str, Any]:
        """Condition Authorized, as an application has it: whom the run acts as, or what its author was refused."""
        if refused:
            return app_status.condition("Authorized", False, "Forbidden", "; ".join(refused), now)
        who = author.identity
        return app_status.condition("Authorized", True, "Authorized", f"acts as {who}" if who is not None else
                                    "acts as the controller (authentication is off)", now)

    def _write(self, run: dict[str, Any], status: dict[str, Any]) -> bool:
        """Write the status if it changed; False when the run is gone."""
        if status == run.get("status"):
            return True
        try:
            written = self.client.update_status(WORKFLOW_RUNS, dict(run, status=status))
        except errors.Conflict as err:
            raise Retry("the workflow run changed meanwhile; running again") from err
        except errors.NotFound:
            return False
        key = f'{run["metadata"]["namespace"]}/{run["metadata"]["name"]}'
        if not self._await_cached(key, written["metadata"]["resourceVersion"]):
            with self._lock:  # remembered only while the cache lags (a busy API server or watch)
                self._replaced[key] = run["metadata"].get("resourceVersion", "")
        return True

    def _stale(self, key: str, cached: str) -> bool:
        """Whether the cache still holds the run as it was before our last write of its status."""
        with self._lock:
            replaced = self._replaced.get(key)
            if replaced is None:
                return False
            if replaced != cached:
                del self._replaced[key]
                return False
            return True

    def _forget_write(self, key: str) -> None:
        with self._lock:
            self._replaced.pop(key, None)

    def _await_cached(self, key: str, resource_version: str, timeout: float = 1.0) -> bool:
        """Hold the worker until the cache shows our write (usually milliseconds); False if it did not in time."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            cached = self.lookup(key)
            if cached is None or cached["metadata"].get("resourceVersion") == resource_version:
                return True
            time.sleep(0.005)
        return False
