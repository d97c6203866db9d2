"""The workflow engine (KubeVela's step semantics) over an in-memory cluster: order, suspend, timeout, if,
inputs/outputs, step-group, dependsOn and the step types' objects."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from velashard.core.workflow import StepError, evaluate, export_object, workflow_phase
from velashard.core.workflow_spec import parse_duration, parse_steps

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


class World:
    """Components become healthy when `healthy` says so; objects live in a dict."""

    def __init__(self, healthy: set[str] | None = None, broken: set[str] | None = None):
        self.healthy = healthy if healthy is not None else {"a", "b", "c"}
        self.broken = broken or set()
        self.objects: dict[tuple[str, str], dict] = {}
        self.apps: dict[str, str] = {}
        self.applied: list[list[str]] = []

    def apply_components(self, names):
        self.applied.append(list(names))
        bad = [n for n in names if n in self.broken]
        if bad:
            raise StepError(f"{bad[0]} is invalid")
        waiting = [n for n in names if n not in self.healthy]
        return not waiting, "; ".join(f"{n}: not ready" for n in waiting)

    def apply_object(self, obj):
        live = {**obj, "status": {"readyReplicas": obj.get("spec", {}).get("replicas", 0)}}
        self.objects[(obj["kind"], obj["metadata"]["name"])] = live
        return live

    def read_object(self, api_version, kind, name, namespace):
        return self.objects.get((kind, name))

    def app_phase(self, namespace, name):
        return self.apps.get(name)


def app(steps=None, components=("a", "b")):
    spec = {"components": [{"name": n, "type": "webservice"} for n in components]}
    if steps is not None:
        spec["workflow"] = {"steps": steps}
    return {"metadata": {"name": "demo", "namespace": "ns"}, "spec": spec}


def run(application, world, previous=None, variables=None, now=T0):
    return evaluate(application, parse_steps(application["spec"]), previous or {}, variables or {}, now, world,
                    "demo-v1")


def phases(ev):
    return [(s["name"], s["phase"]) for s in ev.status["steps"]]


def test_default_workflow_deploys_every_component_and_reports_kubevela_fields():
    ev = run(app(), World())
    st = ev.status
    assert phases(ev) == [("deploy", "succeeded")] and st["finished"] and not st["terminated"]
    assert st["mode"] == "StepByStep-DAG" and st["appRevision"] == "demo-v1"
    step = st["steps"][0]
    assert set(step) >= {"id", "name", "type", "phase", "firstExecuteTime", "lastExecuteTime"}
    assert workflow_phase(st, True) == "running"


def test_steps_run_one_by_one():
    a = app([{"name": "s1", "type": "apply-component", "properties": {"component": "a"}},
             {"name": "s2", "type": "apply-component", "properties": {"component": "b"}}])
    world = World(healthy=set())
    ev = run(a, world)
    assert phases(ev) == [("s1", "running"), ("s2", "pending")] and world.applied == [["a"]]
    world.healthy = {"a", "b"}
    ev = run(a, world, ev.status)
    assert phases(ev) == [("s1", "succeeded"), ("s2", "succeeded")]


def test_last_execute_time_moves_only_when_the_step_does():
    """A reconcile that finds a running step as it was writes nothing new into the app's status."""
    world = World(healthy=set())
    ev = run(app(), world)
    again = run(app(), world, ev.status, now=T0 + timedelta(seconds=5))
    assert again.status["steps"][0]["lastExecuteTime"] == ev.status["steps"][0]["lastExecuteTime"]
    world.healthy = {"a", "b"}
    done = run(app(), world, again.status, now=T0 + timedelta(seconds=9))
    assert phases(done) == [("deploy", "succeeded")]
    assert done.status["steps"][0]["lastExecuteTime"] != ev.status["steps"][0]["lastExecuteTime"]


def test_suspend_waits_for_resume_or_its_duration():
    a = app([{"name": "wait", "type": "suspend"}, {"name": "go", "type": "deploy"}])
    ev = run(a, World())
    assert phases(ev) == [("wait", "suspending"), ("go", "pending")] and ev.status["suspend"]
    assert workflow_phase(ev.status, True) == "workflowSuspending"
    resumed = {**ev.status, "suspend": False}
    assert phases(run(a, World(), resumed)) == [("wait", "succeeded"), ("go", "succeeded")]

    timed = app([{"name": "wait", "type": "suspend", "properties": {"duration": "30s"}}])
    ev = run(timed, World())
    assert phases(ev) == [("wait", "suspending")] and ev.requeue_after == 30
    assert phases(run(timed, World(), ev.status, now=T0 + timedelta(seconds=31))) == [("wait", "succeeded")]


def test_timeout_fails_the_step_and_later_steps_are_skipped_unless_if_always():
    a = app([{"name": "slow", "type": "apply-component", "timeout": "1m", "properties": {"component": "a"}},
             {"name": "next", "type": "apply-component", "properties": {"component": "b"}},
             {"name": "notify", "type": "export2config", "if": "always",
              "properties": {"configName": "report", "data": {"result": "done"}}}])
    world = World(healthy=set())
    ev = run(a, world)
    assert phases(ev)[0] == ("slow", "running")
    ev = run(a, world, ev.status, now=T0 + timedelta(minutes=2))
    assert phases(ev) == [("slow", "failed"), ("next", "skipped"), ("notify", "succeeded")]
    assert ev.status["steps"][0]["reason"] == "Timeout"
    assert ev.status["finished"] and ev.status["terminated"]
    assert workflow_phase(ev.status, True) == "workflowFailed"
    assert world.objects[("ConfigMap", "report")]["data"] == {"result": "done"}


def test_if_reads_earlier_steps_status_with_cue_operators():
    a = app([{"name": "s1", "type": "apply-component", "properties": {"component": "a"}},
             {"name": "only-if-failed", "type": "apply-component", "if": 'status["s1"].failed',
              "properties": {"component": "b"}},
             {"name": "on-success", "type": "apply-component", "if": "status.s1.succeeded && !status.s1.timeout",
              "properties": {"component": "b"}}])
    ev = run(a, World())
    assert phases(ev) == [("s1", "succeeded"), ("only-if-failed", "skipped"), ("on-success", "succeeded")]


def test_outputs_flow_into_inputs():
    a = app([{"name": "read", "type": "read-object", "properties": {"apiVersion": "v1", "kind": "ConfigMap",
                                                                    "name": "src"},
              "outputs": [{"name": "level", "valueFrom": 'value.data["level"]'}]},
             {"name": "write", "type": "apply-object", "inputs": [{"from": "level", "parameterKey": "value.data.level"}],
              "properties": {"value": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dst"}}}}])
    world = World()
    ev = run(a, world)
    assert phases(ev) == [("read", "running"), ("write", "pending")]  # src does not exist yet
    world.objects[("ConfigMap", "src")] = {"data": {"level": "debug"}}
    ev = run(a, world, ev.status)
    assert phases(ev) == [("read", "succeeded"), ("write", "succeeded")] and ev.variables == {"level": "debug"}
    assert world.objects[("ConfigMap", "dst")]["data"] == {"level": "debug"}


def test_step_group_runs_sub_steps_as_a_dag():
    a = app([{"name": "group", "type": "step-group", "subSteps": [
        {"name": "g-a", "type": "apply-component", "properties": {"component": "a"}},
        {"name": "g-b", "type": "apply-component", "properties": {"component": "b"}, "dependsOn": ["g-a"]},
        {"name": "g-c", "type": "apply-component", "properties": {"component": "c"}}]}],
        components=("a", "b", "c"))
    world = World(healthy={"c"})
    ev = run(a, world)
    group = ev.status["steps"][0]
    assert group["phase"] == "running"
    assert [(s["name"], s["phase"]) for s in group["subSteps"]] == [("g-a", "running"), ("g-b", "pending"),
                                                                    ("g-c", "succeeded")]
    world.healthy = {"a", "b", "c"}
    ev = run(a, world, ev.status)
    assert ev.status["steps"][0]["phase"] == "succeeded" and ev.status["finished"]


def test_depends_on_app_and_apply_deployment():
    a = app([{"name": "wait-db", "type": "depends-on-app", "properties": {"name": "db"}},
             {"name": "canary", "type": "apply-deployment", "properties": {"image": "nginx", "replicas": 2}}])
    world = World()
    ev = run(a, world)
    assert phases(ev) == [("wait-db", "running"), ("canary", "pending")]
    assert "now: absent" in ev.status["steps"][0]["message"]
    world.apps["db"] = "running"
    ev = run(a, world, ev.status)
    assert phases(ev) == [("wait-db", "succeeded"), ("canary", "succeeded")]
    deployment = world.objects[("Deployment", "canary")]
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx"


def test_a_failing_apply_fails_the_step_with_its_message():
    ev = run(app(), World(broken={"b"}))
    assert phases(ev) == [("deploy", "failed")] and ev.status["message"] == "b is invalid"


def test_deploy_auto_false_waits_for_approval():
    a = app([{"name": "approve-and-deploy", "type": "deploy", "properties": {"auto": False}}])
    world = World()
    ev = run(a, world)
    assert phases(ev) == [("approve-and-deploy", "suspending")] and world.applied == []
    ev = run(a, world, {**ev.status, "suspend": False})
    assert phases(ev) == [("approve-and-deploy", "succeeded")]


def test_export2secret_docker_registry():
    secret = export_object("export2secret", {"secretName": "reg", "kind": "docker-registry",
                                             "dockerRegistry": {"username": "u", "password": "p"}}, "ns")
    assert secret["type"] == "kubernetes.io/dockerconfigjson" and ".dockerconfigjson" in secret["stringData"]


@pytest.mark.parametrize("steps, message", [
    ([{"name": "x", "type": "nope"}], 'unsupported type "nope"'),
    ([{"name": "x", "type": "suspend", "properties": {"duration": "soon"}}], "properties.duration"),
    ([{"name": "x", "type": "deploy", "timeout": "5 minutes"}], "timeout"),
    ([{"name": "x", "type": "deploy"}, {"name": "x", "type": "deploy"}], "unique: x"),
    ([{"name": "x", "type": "deploy", "dependsOn": ["y"]}], "unknown steps y"),
    ([{"name": "x", "type": "step-group"}], "needs subSteps"),
    ([{"name": "x", "type": "apply-component", "properties": {"component": "zz"}}], "must name a component"),
    ([{"name": "x", "type": "deploy", "outputs": [{"name": "o"}]}], "needs name and valueFrom"),
])
def test_invalid_steps_are_named(steps, message):
    with pytest.raises(ValueError) as err:
        parse_steps(app(steps)["spec"])
    assert message in str(err.value)


def test_go_durations():
    assert parse_duration("1h30m") == 5400 and parse_duration("250ms") == 0.25 and parse_duration("0") == 0
    with pytest.raises(ValueError):
        parse_duration("5 m")
