"""What a status program can read of its context, and a verdict kept while nothing it reads changes."""

from __future__ import annotations

from velashard.core import health
from velashard.core.programreads import context_paths, readable, value_at

POLICY = '''_ready: *0 | int
if context.output.status.readyReplicas != _|_ { _ready: context.output.status.readyReplicas }
off: context.output.metadata.annotations [ "app.oam.dev/disable-health-check" ]
isHealth: _ready == context . output.spec.replicas
'''


def test_chains_of_selectors_and_literal_indexes_are_what_a_program_reads():
    assert context_paths(POLICY) == {("output", "status", "readyReplicas"), ("output", "spec", "replicas"),
                                     ("output", "metadata", "annotations", "app.oam.dev/disable-health-check")}
    assert context_paths('x: [for o in context.outputs if o.kind == "Ingress" {o}]\nn: context.name') == \
        {("outputs",), ("name",)}
    assert context_paths('x: context.output.metadata.annotations[k]') == {("output", "metadata", "annotations")}
    for anything in ("c: context\nx: c.output", "x: context[k]", "// the context"):
        assert context_paths(anything) is None


def test_what_is_readable_stands_for_whole_objects_by_version_and_for_parts_by_value():
    ctx = {"output": {"status": {"ready": 1}}, "name": "web"}
    assert value_at(ctx, ("output", "status", "ready")) == 1 and value_at(ctx, ("output", "spec")) == "<absent>"
    paths = frozenset({("output",), ("output", "status"), ("name",)})
    assert readable(paths, ctx, lambda p: f"whole {p}") == [
        (("name",), "whole ('name',)"), (("output",), "whole ('output',)"), (("output", "status"), {"ready": 1})]
    assert readable(None, ctx, lambda p: "everything") == "everything"


def test_a_verdict_is_kept_while_nothing_its_programs_read_changes(monkeypatch):
    evaluated = []
    real = health._evaluate
    monkeypatch.setattr(health, "_evaluate", lambda *args: evaluated.append(args[1]) or real(*args))
    status = {"healthPolicy": "isHealth: context.output.status.ready == context.output.spec.replicas"}
    names = {"name": "web", "appName": "keep-verdicts", "appRevision": "keep-verdicts-v1"}

    def deployment(rv: str, ready: int, annotations: dict) -> dict:
        return {"kind": "Deployment", "metadata": {"uid": "u", "resourceVersion": rv, "annotations": annotations},
                "spec": {"replicas": 2}, "status": {"ready": ready}}

    assert health.definition_status(status, names, deployment("1", 2, {}), {}, {}) == (True, None)
    assert health.definition_status(status, names, deployment("2", 2, {"revision": "1"}), {}, {}) == (True, None)
    assert len(evaluated) == 1  # only an annotation changed: the same verdict, not evaluated again
    assert health.definition_status(status, names, deployment("3", 1, {"revision": "1"}), {}, {}) == (False, None)
    assert len(evaluated) == 2
