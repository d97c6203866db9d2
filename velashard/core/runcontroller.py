"""The WorkflowRun controller's wiring: the runs this process serves (label-selected on its shard when sharded, as
applications are), the Workflow templates they refer to, and the reconciler they feed (wrapped for sharding:
drains, proofs of assignment, moves). It shares the application controller's engine settings, step definitions
and outbound calls; what a reconcile does is in workflowruns.py."""

from __future__ import annotations

from typing import Any

import logging

from velashard.apis.oam import WORKFLOW_RUNS, WORKFLOWS
from velashard.core import proven
from velashard.core.authors import AuthConfig
from velashard.core.controller import ApplicationController, Options
from velashard.core.events import record_event
from velashard.core.workflowruns import WorkflowRunReconciler
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.controller import Controller
from velashard.kube.discovery import Discovery
from velashard.kube.manager import Manager
from velashard.observability import fields
from velashard.sharding.keys import AssignmentCheck
from velashard.sharding.shard_reconciler import ShardReconciler
from velashard.workflow import runs
from velashard.workflow.executor import WorkflowEngine
from velashard.workflow.templates import Lookup

log = logging.getLogger("velashard.core.runcontroller")

TEMPLATE_INDEX = "workflowRef"


def run_changed(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Skip the events of our own status writes; its metadata, its spec and operations on its status pass."""
    if old is None or old is new:
        return True
    strip = ("resourceVersion", "managedFields")
    old_meta = {k: v for k, v in old["metadata"].items() if k not in strip}
    new_meta = {k: v for k, v in new["metadata"].items() if k not in strip}
    return old_meta != new_meta or old.get("spec") != new.get("spec") or runs.operated(old, new)


def _template_of(run: dict[str, Any]) -> list[str]:
    name = runs.template_name(run)
    return [f'{run["metadata"].get("namespace", "")}/{name}'] if name else []


def served(client: KubeClient) -> bool:
    """Whether the cluster serves WorkflowRuns and Workflows (their CRDs are installed): one discovery read. Where
    the API server cannot say now, they are taken as served (their informers wait for it, as the others do)."""
    try:
        listing = client.request("discovery", "GET", f"/apis/{WORKFLOW_RUNS.api_version}")
    except errors.NotFound:
        return False
    except (errors.KubeError, OSError) as err:
        log.warning("cannot tell whether WorkflowRuns are served; running their controller", extra=fields(
            error=str(err)))
        return True
    plurals = {r.get("name") for r in listing.get("resources") or []}
    return {WORKFLOW_RUNS.plural, WORKFLOWS.plural} <= plurals


class WorkflowRunController:
    def __init__(self, manager: Manager, engine: WorkflowEngine, step_definition: Lookup, auth: AuthConfig,
                 workers: int = 4, shard_selector: str | None = None, assignment_key_namespace: str | None = None):
        self.client = manager.client
        self.runs = manager.informer(WORKFLOW_RUNS, label_selector=shard_selector, packed=True,
                                     indexers={TEMPLATE_INDEX: _template_of})
        self.templates = manager.informer(WORKFLOWS)
        self.reconciler = WorkflowRunReconciler(self.client, Discovery(self.client), self.runs.store.get,
                                                self.templates.store.get_by, engine, step_definition, auth)
        reconcile: Any = self.reconciler
        if shard_selector:
            check = None
            if assignment_key_namespace is not None:
                check = AssignmentCheck(manager, assignment_key_namespace, proven.verdicts(), kind=WORKFLOW_RUNS.kind)
                check.on_first_key(self._enqueue_all)
            reconcile = ShardReconciler(reconcile, self.client, WORKFLOW_RUNS, self.runs.store.get, check=check,
                                        event=lambda run, *event: record_event(self.client, _typed(run), *event,
                                                                               must_record=True))
        self.controller = Controller("workflowrun", reconcile, workers)  # the worker's chain, built above
        self.controller.watch(self.runs, predicate=run_changed)
        # a template's change wakes the runs that refer to it (a run waiting for its template to exist among them)
        self.controller.watch(self.templates, to_keys=self._referring,
                              predicate=lambda old, new: old is None or old.get("steps") != new.get("steps") or
                              old.get("mode") != new.get("mode"))
        manager.add_controller(self.controller)

    def _referring(self, template: dict[str, Any]) -> list[str]:
        meta = template["metadata"]
        return [f'{r["metadata"]["namespace"]}/{r["metadata"]["name"]}' for r in
                self.runs.store.by_index(TEMPLATE_INDEX, f'{meta.get("namespace", "")}/{meta["name"]}')]

    def _enqueue_all(self) -> None:
        for key in self.runs.store.keys():
            self.controller.enqueue(key)

    def enqueue(self, key: str) -> None:
        if key in self.runs.store:
            self.controller.enqueue(key)


def _typed(run: dict[str, Any]) -> dict[str, Any]:
    return {**run, "apiVersion": WORKFLOW_RUNS.api_version, "kind": WORKFLOW_RUNS.kind}



def run_controller(manager: Manager, apps: ApplicationController, options: Options) -> WorkflowRunController | None:
    """The WorkflowRun controller beside the application controller: the same shard, workers, authors, engine
    settings, step definitions and outbound calls (a call that ends wakes whichever of the two made it). None,
    with a warning, where the cluster does not serve WorkflowRuns (their CRDs, which `velashard install` and the
    chart install, are missing): nothing else depends on them."""
    if not served(apps.client):
        log.warning("WorkflowRuns are not served: their CRDs (workflowruns.core.oam.dev, workflows.core.oam.dev) "
                    "are not installed; install them with `velashard install` to run WorkflowRuns")
        return None
    engine = WorkflowEngine(options.workflow, outbound=apps.engine.outbound, egress=options.egress)
    runs_controller = WorkflowRunController(manager, engine, apps.step_definition, options.auth, options.workers,
                                            options.shard_selector, options.assignment_key_namespace)

    def wake(key: str) -> None:
        if key in apps.apps.store:
            apps.controller.enqueue(key)
        runs_controller.enqueue(key)
    apps.engine.outbound.wake = wake
    return runs_controller
