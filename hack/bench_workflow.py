"""What a workflow of CUE steps costs the controller per step, side by side in one run, printing one JSON object.

Two workflows of 5 steps go through the engine (velashard.workflow.engine.run, the pass the controller makes)
from start to finish, alternating, N times each:

- `cue`: five realistic templates, KubeVela-shaped (written here): apply a component (the engine's own
  apply-component template), write a ConfigMap (kube.#Apply), read it back (kube.#Read) into an output,
  wait on what it read (builtin.#ConditionalWait) and a legacy vela/op step that puts and gets a variable,
  with inputs and outputs between them;
- `bare`: the same five steps, whose templates run no action and evaluate next to nothing.

Components and objects go to an in-memory Delivery and client that answer at once, so the figures are the
engine's own work: scheduling, template evaluation, actions found and filled back. The goal: `cue` costs at
most 2 ms more per step than `bare` (`extra_ms_per_step`). The passes of a settled workflow (the controller's
re-syncs) are timed too.

    python hack/bench_workflow.py [--runs 200]
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import statistics
import sys
import time
from datetime import datetime, timezone
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from velashard.kube import errors  # noqa: E402
from velashard.kube.resources import Resource  # noqa: E402
from velashard.workflow import engine  # noqa: E402
from velashard.workflow.backoff import RunMemory  # noqa: E402
from velashard.workflow.context import WorkflowContext  # noqa: E402
from velashard.workflow.delivery import ComponentResult  # noqa: E402
from velashard.workflow.spec import parse_workflow  # noqa: E402
from velashard.workflow.steptypes import convert  # noqa: E402
from velashard.workflow.task import CueTasks  # noqa: E402

STEPS = 5
APP = {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
       "metadata": {"name": "shop", "namespace": "prod", "uid": "u-1"},
       "spec": {"components": [{"name": "web", "type": "webservice",
                                "properties": {"image": "nginx:1.25", "ports": [{"port": 80}]}}]}}
BASIC = {"name": "shop", "appName": "shop", "namespace": "prod", "appRevision": "shop-v1", "appRevisionNum": 1,
         "appLabels": {"team": "a"}, "appAnnotations": {}, "publishVersion": "", "workflowName": "",
         "cluster": "local"}

WRITE = '''
import "vela/kube"
write: kube.#Apply & {
	$params: value: {
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: {name: parameter.name, namespace: context.namespace}
		data: parameter.data
	}
}
parameter: {name: string, data: [string]: string}
'''
READ = '''
import "vela/kube"
output: kube.#Read & {
	$params: value: {
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: {name: parameter.name, namespace: context.namespace}
	}
}
parameter: name: string
'''
GATE = '''
import "vela/builtin"
ready: builtin.#ConditionalWait & {
	$params: {continue: parameter.level == "info", message: "level is \\(parameter.level)"}
}
parameter: level: string
'''
LEGACY = '''
import "vela/op"
put: op.#DoVar & {method: "Put", path: "release.level", value: parameter.level}
get: op.#DoVar & {path: "release.level"}
summary: "\\(context.appName) at \\(get.value)"
parameter: level: string
'''
BARE = "parameter: {...}\n"

WORKFLOW = {"workflow": {"steps": [
    {"name": "web", "type": "apply-component", "properties": {"component": "web"}},
    {"name": "write", "type": "write", "properties": {"name": "settings", "data": {"level": "info"}}},
    {"name": "read", "type": "read", "properties": {"name": "settings"},
     "outputs": [{"name": "level", "valueFrom": "output.value.data.level"}]},
    {"name": "gate", "type": "gate", "inputs": [{"from": "level", "parameterKey": "level"}]},
    {"name": "legacy", "type": "legacy", "inputs": [{"from": "level", "parameterKey": "level"}],
     "outputs": [{"name": "summary", "valueFrom": "summary"}]}]}}


def definitions(bare: bool) -> dict[str, Any]:
    templates = {"write": WRITE, "read": READ, "gate": GATE, "legacy": LEGACY}
    return {name: {"spec": {"schematic": {"cue": {"template": BARE if bare else text}}}}
            for name, text in templates.items()}


class InMemory:
    """A Delivery and a client that answer at once: what steps apply is kept, what they read is that."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}

    def components(self) -> list[dict[str, Any]]:
        return copy.deepcopy(APP["spec"]["components"])

    def policies(self) -> list[dict[str, Any]]:
        return []

    def apply_component(self, component: dict[str, Any], namespace: str | None = None,
                        patch: dict[str, Any] | None = None, replica_key: str = "") -> ComponentResult:
        return ComponentResult(True, "", {"apiVersion": "apps/v1", "kind": "Deployment",
                                          "metadata": {"name": component["name"], "namespace": "prod"},
                                          "status": {"readyReplicas": 1}}, {})

    def render_component(self, component: dict[str, Any], namespace: str | None = None,
                         patch: dict[str, Any] | None = None) -> ComponentResult:
        return self.apply_component(component, namespace, patch)

    def dispatch(self, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for obj in objects:
            meta = obj["metadata"]
            self.objects[(obj["kind"], meta.get("namespace", ""), meta["name"])] = dict(
                obj, metadata=dict(meta, resourceVersion="1"))
        return [self.objects[(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])]
                for o in objects]

    def resource(self, api_version: str, kind: str) -> Resource:
        return Resource("", "v1", kind.lower() + "s", kind)

    def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        found = self.objects.get((res.kind, namespace or "", name))
        if found is None:
            raise errors.NotFound(404, "NotFound", f"{res.plural} {name} not found")
        return found


def one_run(bare: bool) -> tuple[float, float, dict[str, Any]]:
    """(seconds of the passes that ran the steps, seconds of a settled pass, the final status)."""
    workflow = parse_workflow(WORKFLOW)
    world = InMemory()
    lookup = definitions(bare)
    tasks = CueTasks(APP, lambda kind, _ns: lookup.get(kind), BASIC, world, world)  # type: ignore[arg-type]
    context, memory = WorkflowContext(), RunMemory()
    status: dict[str, Any] = {"appRevision": "shop-v1"}
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    started = time.perf_counter()
    outcome = engine.run(convert(workflow, world.components()), status, tasks, context, memory, now, BASIC)
    ran = time.perf_counter() - started
    started = time.perf_counter()
    engine.run(convert(workflow, world.components()), outcome.status, tasks, context, memory, now, BASIC)
    return ran, time.perf_counter() - started, outcome.status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    for bare in (False, True):  # warm: templates compiled, packages loaded
        _, _, status = one_run(bare)
        phases = [s["phase"] for s in status["steps"]]
        if phases != ["succeeded"] * STEPS:
            raise SystemExit(f"the {'bare' if bare else 'cue'} workflow did not succeed: {status['steps']}")
    times: dict[str, list[float]] = {"cue": [], "bare": [], "cue_settled": [], "bare_settled": []}
    gc.disable()
    try:
        for _ in range(args.runs):
            for name, bare in (("cue", False), ("bare", True)):
                ran, settled, _ = one_run(bare)
                times[name].append(ran)
                times[f"{name}_settled"].append(settled)
    finally:
        gc.enable()
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    extra = (med["cue"] - med["bare"]) / STEPS
    print(json.dumps({
        "benchmark": "workflow", "steps": STEPS, "runs": args.runs, "cores": os.cpu_count(),
        "cue_ms_per_workflow": round(med["cue"], 3), "bare_ms_per_workflow": round(med["bare"], 3),
        "cue_ms_per_step": round(med["cue"] / STEPS, 3), "bare_ms_per_step": round(med["bare"] / STEPS, 3),
        "extra_ms_per_step": round(extra, 3),
        "settled_pass_ms": {"cue": round(med["cue_settled"], 3), "bare": round(med["bare_settled"], 3)},
        "goal_extra_ms_per_step_max": 2.0, "meets_goal": extra <= 2.0}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
