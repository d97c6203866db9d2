"""A finished evaluation is released (Instance.release, or `with`): its vertices form no cycle any more, so
reference counting frees them and the cyclic collector finds nothing of it (it was a third of a render's CPU)."""

from __future__ import annotations

import gc
from collections import Counter
from typing import Iterator

import pytest

from hack.bench_kubevela_tiers import kubevela_app
from velashard.core import rendering
from velashard.core.builtins import builtin_definitions
from velashard.core.definitions import Definitions
from velashard.cue import compile_sources

# References, a disjunction with a default, a pattern, a comprehension and an imported package: the parts of an
# evaluation that hold environments and parents.
TEMPLATE = """
import "strings"

output: {
	kind: "Deployment"
	metadata: name: context.name
	metadata: labels: {[string]: string} & {for k, v in parameter.labels {(k): strings.ToLower(v)}}
	spec: replicas: parameter.replicas
	spec: template: spec: containers: [for c in parameter.containers {name: c, image: parameter.image}]
}
parameter: {
	image: string
	replicas: *1 | int & >=0
	labels: [string]: string
	containers: [...string]
}
context: name: string
"""
DATA = {"context": {"name": "web"},
        "parameter": {"image": "nginx", "labels": {"Team": "A"}, "containers": ["main", "side"]}}
EXPECTED = {"kind": "Deployment", "metadata": {"name": "web", "labels": {"Team": "a"}},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "main", "image": "nginx"},
                                                                         {"name": "side", "image": "nginx"}]}}}}


EVALUATION_TYPES = {"Vertex", "Conjunct", "Env", "Data", "Pattern", "Group", "Context"}


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The cyclic collector off and empty, so that what the test's work leaves to it waits for `evaluations_left`."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def evaluations_left() -> Counter:
    """The evaluator's objects among what a collection finds unreachable now (the test process's other threads may
    leave garbage of their own: only the evaluator's counts)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return Counter(name for name in (type(obj).__name__ for obj in gc.garbage) if name in EVALUATION_TYPES)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def test_an_unreleased_evaluation_leaves_cycles_to_the_collector(collector_off: None) -> None:
    program = compile_sources({"t.cue": TEMPLATE})
    assert program.evaluate(DATA).export("output") == EXPECTED
    assert evaluations_left()["Vertex"] > 10  # what the release below avoids: the test would see it come back


def test_a_released_evaluation_leaves_nothing_to_the_collector(collector_off: None) -> None:
    program = compile_sources({"t.cue": TEMPLATE})
    with program.evaluate(DATA) as instance:
        out = instance.export("output")
        instance.tags("output")  # comment tags are read inside the block, as a trait's patch reads them
    instance.release()  # a second release is harmless
    del instance
    assert not evaluations_left()
    assert out == EXPECTED


def test_a_load_test_apps_render_leaves_nothing_to_the_collector(collector_off: None) -> None:
    objs = builtin_definitions()
    defs = Definitions.from_objects([d for d in objs if d["kind"] == "ComponentDefinition"],
                                    [d for d in objs if d["kind"] == "TraitDefinition"])
    def render(i: int) -> list[rendering.RenderedComponent]:
        app = kubevela_app(i)
        app["metadata"]["uid"] = f"u-{i}"
        return [rendering._render_component(app, spec, defs, 1) for spec in app["spec"]["components"]]

    render(1)  # compiles the templates (kept; what compiling evaluates once is the collector's)
    gc.collect()
    rendered = render(7)
    assert not evaluations_left()
    web, worker = rendered
    assert web.workload["kind"] == "Deployment" and web.workload["spec"]["replicas"] == 3
    assert [c["name"] for c in web.workload["spec"]["template"]["spec"]["containers"]] == ["web-7", "sidecar"]
    assert {o["kind"] for o in web.outputs} >= {"Service", "Ingress"}
    assert any(o["kind"] == "ConfigMap" for o in worker.outputs)

    broken = kubevela_app(8)
    broken["spec"]["components"][0]["properties"] = {"port": "eighty"}  # no image, a port that is no number
    with pytest.raises(rendering.RenderError, match="parameter"):
        rendering._render_component(broken, broken["spec"]["components"][0], defs, 1)
    assert not evaluations_left()  # a parameter error releases the evaluation too


def test_a_health_programs_evaluation_leaves_nothing_to_the_collector(collector_off: None) -> None:
    from velashard.core import health
    webservice = next(d for d in builtin_definitions() if d["metadata"]["name"] == "webservice")
    status = webservice["spec"]["status"]
    names = {"name": "web", "appName": "release-health", "appRevision": "release-health-v1"}

    def deployment(rv: str, ready: int) -> dict:
        return {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "uid": "u", "resourceVersion": rv, "generation": 1},
                "spec": {"replicas": 3},
                "status": {"observedGeneration": 1, "replicas": 3, "readyReplicas": ready, "updatedReplicas": 3}}

    health.definition_status(status, names, deployment("1", 3), {}, {}, owner="ns/release-health")  # compiles
    gc.collect()
    verdict = health.definition_status(status, names, deployment("2", 1), {}, {}, owner="ns/release-health")
    assert not evaluations_left()
    assert verdict[0] is False and "1" in (verdict[1] or "")
