"""The walk of one app's reconcile, traced (sys.setprofile) against the embedded API server: it goes down the
floors and back once. Nothing below the reconciler calls back into it or any floor above its own; each module is
entered only for what it is for; the workflow is parsed once; the tracker is written by the ResourceKeeper alone,
once for a new app and never for a settled one (issue 46)."""

from __future__ import annotations

import gc
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Iterator

import pytest

from tests.integration.helpers import eventually, trust_authorless_apps
from tests.workflowsteps import install_missing
from velashard.apis.oam import APPLICATIONS
from velashard.apiserver.http.server import APIServer
from velashard.core import settled
from velashard.core.controller import ApplicationController, Options
from velashard.core.install import install
from velashard.kube.client import KubeClient, requests_sent
from velashard.kube.manager import Manager
from velashard.kube.resources import DEPLOYMENTS

# Floors, top down: a call may go down or stay on its floor, never up. The helpers at the bottom (types, lookups,
# pure functions) are entered from anywhere.
FLOORS: dict[str, int] = {
    "velashard.sharding.shard_reconciler": 0, "velashard.core.controller": 0,
    "velashard.core.reconciler": 1,
    "velashard.core.runworkflow": 2, "velashard.workflow": 2,
    "velashard.core.stepdelivery": 3,
    "velashard.core.keeper": 4, "velashard.core.health": 4, "velashard.core.settled": 4,
    # rendering and its cache are one floor (the cache renders what it misses)
    "velashard.core.apply": 5, "velashard.core.rendering": 5, "velashard.core.render_cache": 5,
    "velashard.core.refobjects": 5, "velashard.core.revisions": 5, "velashard.core.managed": 5,
    "velashard.core.events": 5,
    "velashard.core.tracker": 6, "velashard.core.ownership": 6, "velashard.core.slotcache": 7,
    # what every floor uses: the run's phases and the workflow's parse, a reconcile's outcomes
    "velashard.workflow.phases": 8, "velashard.workflow.spec": 8, "velashard.workflow.delivery": 8,
}
BOTTOM = 8

# What each module of the reconcile is entered for, from outside it: its one idea, as the functions that say it.
ENTRIES: dict[str, set[str]] = {
    "velashard.core.reconciler": {"__call__"},
    "velashard.core.runworkflow": {"deploy_all", "run_steps"},
    "velashard.core.keeper": {"__init__", "use_kinds", "keep", "record", "dispatch", "dispatch_policy_objects",
                              "live", "collect_garbage", "refs_of", "recorded"},
    "velashard.core.health": {"__init__", "component", "trait", "objects"},
    "velashard.core.rendering": {"render_app", "render_component", "render_policies", "complete_ref_objects"},
    "velashard.core.rendered": {"__init__", "objects"},
    "velashard.core.definitions": {"__call__", "resolving", "step", "get", "__contains__", "__getitem__", "identity",
                                   "version"},
    "velashard.core.tracker": {"get", "version", "save", "managed_refs", "ref_of", "ref_key"},
    "velashard.core.settled": {"unchanged", "remember", "reads_of", "confirm_soon"},
}


def floor(module: str) -> int:
    for prefix in sorted(FLOORS, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return FLOORS[prefix]
    return BOTTOM


@dataclass
class Walk:
    """Calls between velashard modules during one reconcile: (caller module, caller, callee module, callee)."""
    edges: list[tuple[str, str, str, str]] = field(default_factory=list)
    tracker_writes: list[tuple[str, str]] = field(default_factory=list)  # (verb, the module that asked)

    def __call__(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        callee = frame.f_globals.get("__name__", "")
        back = frame.f_back
        if not callee.startswith("velashard") or back is None:
            return
        caller = back.f_globals.get("__name__", "")
        if caller == callee:
            return
        self.edges.append((caller, back.f_code.co_name, callee, frame.f_code.co_name))
        if callee == "velashard.kube.client" and frame.f_code.co_name in ("create", "update", "patch", "delete"):
            res = frame.f_locals.get("res")
            if getattr(res, "plural", "") == "resourcetrackers":
                asker = back.f_back.f_globals.get("__name__", "") if back.f_back is not None else ""
                self.tracker_writes.append((frame.f_code.co_name, asker))

    def upward(self) -> list[tuple[str, str, str, str]]:
        return [e for e in self.edges if e[0].startswith("velashard") and floor(e[2]) < floor(e[0])]

    def entered(self, module: str) -> set[str]:
        """The functions of `module` called from another floor."""
        return {e[3] for e in self.edges if e[2] == module and floor(e[0]) != floor(module)}

    def calls(self, function: str) -> int:
        return sum(1 for e in self.edges if e[3] == function)


@pytest.fixture(scope="module")
def held(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KubeClient, ApplicationController]]:
    """A cluster and an Application controller whose caches run but whose workers do not: the test reconciles."""
    server = APIServer(port=0, simulate_workloads=True).start()
    server.write_kubeconfig(str(tmp_path_factory.mktemp("walk") / "kubeconfig"))
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test", qps=500, burst=500)
    trust_authorless_apps(kube)
    install(kube)
    install_missing(kube)
    manager = Manager(kube, "master")
    apps = ApplicationController(manager, Options(workers=1, state_keep_interval=1.0, waiting_requeue=0.5))
    stop = threading.Event()
    thread = threading.Thread(target=manager.run, args=(stop,), daemon=True)
    thread.start()
    eventually(manager.ready, 30)
    apps.controller.stop()  # its queue takes nothing more: every reconcile below is the test's own
    yield kube, apps
    stop.set()
    thread.join(15)
    server.stop()


def walk(apps: ApplicationController, key: str) -> Walk:
    traced = Walk()
    sys.setprofile(traced)
    try:
        apps.reconcile(key)
    finally:
        sys.setprofile(None)
    return traced


def create(kube: KubeClient, apps: ApplicationController, name: str, spec: dict[str, Any]) -> str:
    kube.create(APPLICATIONS, {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
                               "metadata": {"name": name, "namespace": "default"}, "spec": spec}, "default")
    key = f"default/{name}"
    eventually(lambda: apps.apps.store.get(key) is not None)
    return key


def phase(kube: KubeClient, name: str) -> str:
    return (kube.get(APPLICATIONS, name, "default").get("status") or {}).get("status", "")


def assert_one_path(traced: Walk) -> None:
    assert not traced.upward(), f"calls up the floors: {sorted(set(traced.upward()))}"
    assert traced.calls("parse_workflow") == 1
    for module, entries in ENTRIES.items():
        assert traced.entered(module) <= entries, f"{module} entered for {traced.entered(module) - entries}"
    assert all(asker == "velashard.core.keeper" for _, asker in traced.tracker_writes) or not traced.tracker_writes
    saves = [e for e in traced.edges if e[2] == "velashard.core.tracker" and e[3] == "save"]
    assert {e[0] for e in saves} <= {"velashard.core.keeper"}, saves


def settle(kube: KubeClient, apps: ApplicationController, key: str, name: str) -> list[Walk]:
    """Reconcile until the app runs (the simulated workloads become ready meanwhile); every pass's walk."""
    walks = []

    def running() -> bool:
        walks.append(walk(apps, key))
        return phase(kube, name) == "running"
    eventually(running, timeout=30, interval=0.3)
    return walks


def test_a_default_workflow_app_walks_down_the_floors_once(held):
    kube, apps = held
    key = create(kube, apps, "walked", {"components": [{
        "name": "web", "type": "webservice", "properties": {"image": "nginx:1.25"},
        "traits": [{"type": "scaler", "properties": {"replicas": 2}}]}]})
    walks = settle(kube, apps, key, "walked")
    first, settled = walks[0], walk(apps, key)
    for traced in walks + [settled]:
        assert_one_path(traced)
    assert [verb for verb, _ in first.tracker_writes] == ["create"]
    assert sum(len(w.tracker_writes) for w in walks[1:]) == 0
    assert settled.tracker_writes == []
    # a settled app's objects were found in sync before, at the versions still live: nothing is merged again
    assert settled.calls("merged_for_update") == 0
    # rendering is one visit from the reconciler; its cache and schematics are its own business
    into_rendering = [e for e in settled.edges if e[2] == "velashard.core.rendering" and floor(e[0]) != 5]
    assert [(e[0], e[3]) for e in into_rendering] == [("velashard.core.reconciler", "render_app")]
    assert not [e for e in settled.edges if e[2] == "velashard.core.render_cache" and
                e[0] != "velashard.core.rendering"]
    # the status and the workflow read health through one reader; nothing else evaluates it
    assert {e[0] for e in settled.edges if e[3] in ("component_health", "definition_status")} <= {
        "velashard.core.health"}


def test_a_settled_pass_over_unchanged_versions_is_not_run_again_and_a_changed_one_is(held):
    kube, apps = held
    key = create(kube, apps, "kept", {"components": [{
        "name": "kept-web", "type": "webservice", "properties": {"image": "nginx:1.25"},
        "traits": [{"type": "scaler", "properties": {"replicas": 2}}]}]})
    settle(kube, apps, key, "kept")
    walk(apps, key)  # the first settled pass runs, sends nothing and is remembered
    sent = requests_sent()
    again = walk(apps, key)
    assert requests_sent() == sent
    assert again.calls("parse_workflow") == 0 and again.calls("render_app") == 0
    assert again.calls("merged_if_drifted") == 0 and again.calls("component") == 0  # nor health
    assert apps.reconcile(key).requeue_after == apps.reconciler.state_keep_interval  # the re-sync it answered
    # Other settings (a restart with other flags, say) are another basis: the pass runs.
    apps.reconciler.waiting_requeue += 0.5
    try:
        assert walk(apps, key).calls("render_app") == 1
    finally:
        apps.reconciler.waiting_requeue -= 0.5
    # Someone edits what the app applied: its version changed, so the next pass runs and puts it back.
    kube.patch(DEPLOYMENTS, "kept-web", {"spec": {"replicas": 5}}, "default")
    cache = apps.managed.get(DEPLOYMENTS)
    eventually(lambda: cache.store.get("default/kept-web")["spec"]["replicas"] == 5)
    drifted = walk(apps, key)
    assert drifted.calls("render_app") == 1 and drifted.calls("merged_if_drifted") >= 1
    assert kube.get(DEPLOYMENTS, "kept-web", "default")["spec"]["replicas"] == 2


def test_the_pass_that_settles_an_app_is_confirmed_soon_by_a_quiet_pass_that_is_remembered(held):
    kube, apps = held
    key = create(kube, apps, "confirmed", {"components": [{
        "name": "confirmed-web", "type": "webservice", "properties": {"image": "nginx:1.25"}}]})
    results = []

    def running() -> bool:
        results.append(apps.reconcile(key))
        return phase(kube, "confirmed") == "running"
    eventually(running, timeout=30, interval=0.3)
    # the pass that wrote "running" comes back in a second, not after the re-sync period...
    assert results[-1].requeue_after == settled.CONFIRM_AFTER
    # ...for a pass that writes nothing, answers the re-sync and is remembered, so a restart soon after finds it
    sent = requests_sent()
    assert apps.reconcile(key).requeue_after == apps.reconciler.state_keep_interval
    assert requests_sent() == sent
    again = walk(apps, key)
    assert again.calls("render_app") == 0 and requests_sent() == sent


def test_a_confirming_pass_is_asked_once_per_writing_pass_never_in_a_loop():
    key = "default/flapping"
    settled.forget(key)
    assert settled.confirm_soon(key)  # a pass wrote and settled the app
    assert not settled.confirm_soon(key)  # its confirming pass wrote again: back to the re-sync period
    assert settled.confirm_soon(key)  # a later change is confirmed again
    settled.forget(key)


def test_a_workflow_with_steps_walks_down_the_floors_once(held):
    kube, apps = held
    key = create(kube, apps, "stepped", {
        "components": [{"name": "api", "type": "webservice", "properties": {"image": "nginx:1.25"}}],
        "workflow": {"steps": [{"name": "deploy-api", "type": "apply-component", "properties": {"component": "api"}}]}})
    walks = settle(kube, apps, key, "stepped")
    settled = walk(apps, key)
    for traced in walks + [settled]:
        assert_one_path(traced)
    assert [verb for verb, _ in walks[0].tracker_writes] == ["create"]
    assert settled.tracker_writes == []
    steps = Counter(e[0] for e in walks[0].edges if e[2] == "velashard.core.keeper")
    assert set(steps) <= {"velashard.core.reconciler", "velashard.core.runworkflow", "velashard.core.stepdelivery",
                          "velashard.core.health"}, steps


LEFT_TO_REFERENCE_COUNTING = {"ReconcileContext", "KubeClient", "Definitions", "Vertex", "Instance", "Env"}


def cyclic_garbage(kube: KubeClient, apps: ApplicationController, key: str, name: str) -> Counter:
    """The types of what collections found unreachable while the app settled (kept in gc.garbage, not freed)."""
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        settle(kube, apps, key, name)
        gc.collect()
        return Counter(type(obj).__name__ for obj in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


@pytest.mark.parametrize("name, spec", [
    ("freed", {"components": [{"name": "freed-web", "type": "webservice", "properties": {"image": "nginx:1.25"},
                               "traits": [{"type": "scaler", "properties": {"replicas": 2}}]}]}),
    ("freed-steps", {"components": [{"name": "freed-api", "type": "webservice", "properties": {"image": "nginx"}}],
                     "workflow": {"steps": [
                         {"name": "deploy", "type": "apply-component", "properties": {"component": "freed-api"},
                          "outputs": [{"name": "deployed", "valueFrom": "output.value.metadata.name"}]},
                         {"name": "note", "type": "export2config", "if": "status.deploy.succeeded",
                          "inputs": [{"from": "deployed", "parameterKey": "data.name"}],
                          "properties": {"configName": "freed-note", "data": {"name": ""}}}]}}),
])
def test_a_reconcile_leaves_its_context_and_evaluations_to_reference_counting(held, name, spec):
    """Nothing a pass makes forms a cycle: its context, author client, definitions and CUE evaluations (renders,
    health programs, workflow steps) are freed when it ends. Cycles there sent every pass's app, definitions and
    vertices to the cyclic collector: a quarter of a converging shard's CPU, and 2 KiB per app held until a full
    collection. Every process freezes what survives a full collection (velashard/heap.py), so a cycle alive at that
    moment would never be freed."""
    kube, apps = held
    key = create(kube, apps, name, spec)
    found = cyclic_garbage(kube, apps, key, name)
    assert not found.keys() & LEFT_TO_REFERENCE_COUNTING, found
