"""The workflow engine's scheduling and its CUE steps, with templates whose actions touch no cluster (vela/builtin
and the run's variables): order, DAG and dependsOn, if, timeout, inputs and outputs, step-group, errors and
retries, backoff, suspend and resume, and what bad templates and bad specs give."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from velashard.workflow import engine, operations
from velashard.workflow.backoff import RunMemory, Settings, wait_interval
from velashard.workflow.context import WorkflowContext
from velashard.workflow.spec import parse_workflow
from velashard.workflow.task import CueTasks

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
APP = {"metadata": {"name": "demo", "namespace": "ns", "uid": "u-1"}, "spec": {}}


def definition(template: str) -> dict:
    return {"spec": {"schematic": {"cue": {"template": template}}}}


# Test-only step definitions (in our own words): a message, a gate that waits on a parameter, a variable writer.
DEFINITIONS = {
    "note": definition('''
import "vela/builtin"
parameter: {text: string}
say: builtin.#Message & {$params: message: parameter.text}
echo: "noted \\(parameter.text)"
'''),
    "gate": definition('''
import "vela/builtin"
parameter: {open: bool}
wait: builtin.#ConditionalWait & {$params: {continue: parameter.open, message: "gate closed"}}
'''),
    "count": definition('''
import "vela/op"
parameter: {n: int}
put: op.#DoVar & {method: "Put", path: "counter.value", value: parameter.n * 2}
get: op.#DoVar & {path: "counter.value"}
total: get.value + 1
'''),
    "boom": definition('''
import "vela/builtin"
parameter: {why: *"broken" | string}
fail: builtin.#Fail & {$params: message: parameter.why}
'''),
    "stop": definition('''
import "vela/builtin"
stop: builtin.#Break & {$params: message: "enough"}
after: builtin.#Message & {$params: message: "never said"}
'''),
    "conflict": definition('''
parameter: {n: int}
x: parameter.n & 2
'''),
    "nowhere": definition('''
import "vela/builtin"
parameter: {}
w: builtin.#ConditionalWait & {$params: continue: missing.field == 1}
missing: {}
'''),
    "loop": definition('''
import "vela/builtin"
parameter: {}
many: {for i in list.Range(0, 100, 1) {"m\\(i)": builtin.#Message & {$params: message: "\\(i)"}}}
'''.replace('import "vela/builtin"', 'import "vela/builtin"\nimport "list"')),
}


class Harness:
    """Passes over one workflow, keeping what the controller would keep between reconciles."""

    def __init__(self, steps: list[dict] | None = None, mode: dict | None = None, settings: Settings | None = None):
        spec: dict = {"workflow": {"steps": steps or []}}
        if mode:
            spec["workflow"]["mode"] = mode
        self.workflow = parse_workflow(spec)
        self.context = WorkflowContext()
        self.memory = RunMemory()
        self.status: dict = {"appRevision": "demo-v1"}
        self.settings = settings or Settings()
        self.now = T0
        self.outcome: engine.Outcome | None = None

    def step(self, seconds: float = 0.0) -> engine.Outcome:
        self.now += timedelta(seconds=seconds)
        tasks = CueTasks(APP, lambda t, ns: DEFINITIONS.get(t), {"name": "demo", "namespace": "ns"}, None, None)
        self.outcome = engine.run(self.workflow, self.status, tasks, self.context, self.memory, self.now,
                                  {"name": "demo"}, self.settings)
        self.memory.produced = engine.status_digest(self.outcome.status)
        self.status = self.outcome.status
        return self.outcome

    def phases(self) -> list[tuple[str, str]]:
        return [(s["name"], s["phase"]) for s in self.status.get("steps") or []]

    def of(self, name: str) -> dict:
        from velashard.workflow.phases import iter_statuses
        return next(s for s in iter_statuses(self.status["steps"]) if s["name"] == name)


def test_steps_run_one_by_one_and_appear_when_reached():
    h = Harness([{"name": "a", "type": "note", "properties": {"text": "one"}},
                 {"name": "b", "type": "gate", "properties": {"open": False}},
                 {"name": "c", "type": "note", "properties": {"text": "three"}}])
    out = h.step()
    assert out.state == "executing" and h.phases() == [("a", "succeeded"), ("b", "running")]
    assert (h.of("a")["message"], h.of("b")["reason"], h.of("b")["message"]) == ("one", "Wait", "gate closed")
    assert h.status["mode"] == "StepByStep-DAG" and h.status["startTime"] == "2026-01-01T00:00:00Z"
    h.workflow = parse_workflow({"workflow": {"steps": [
        {"name": "a", "type": "note", "properties": {"text": "one"}},
        {"name": "b", "type": "gate", "properties": {"open": True}},
        {"name": "c", "type": "note", "properties": {"text": "three"}}]}})
    out = h.step(2)
    assert out.state == "succeeded" and h.phases() == [("a", "succeeded"), ("b", "succeeded"), ("c", "succeeded")]
    assert h.status["finished"] and not h.status["terminated"] and h.status["endTime"] == "2026-01-01T00:00:02Z"


def test_a_waiting_step_is_not_run_again_before_its_backoff():
    h = Harness([{"name": "b", "type": "gate", "properties": {"open": False}}])
    assert h.step().requeue_after == 1
    before = dict(h.of("b"))
    assert h.step(0.5).requeue_after == pytest.approx(0.5)  # the same status within the backoff: nothing ran
    assert h.of("b") == before and h.memory.backoff_times == {before["id"]: 0}
    waits = []
    for _ in range(12):
        out = h.step(h.outcome.requeue_after)
        waits.append(out.requeue_after)
    # KubeVela's: 2^tries x 0.05 s, at least 1 s, at most --max-workflow-wait-backoff-time
    assert waits == [1, 1, 1, 1, 1, 3, 6, 12, 25, 51, 60, 60]
    assert h.of("b")["lastExecuteTime"] == before["lastExecuteTime"]  # nothing changed: no new timestamp


def test_dag_mode_and_depends_on():
    h = Harness([{"name": "late", "type": "note", "properties": {"text": "x"}, "dependsOn": ["slow"]},
                 {"name": "slow", "type": "gate", "properties": {"open": False}},
                 {"name": "free", "type": "note", "properties": {"text": "y"}}], mode={"steps": "DAG"})
    h.step()
    assert dict(h.phases()) == {"slow": "running", "free": "succeeded", "late": "pending"}
    assert h.of("late")["message"] == "Pending on DependsOn: slow"
    assert h.status["mode"] == "DAG-DAG"


def test_if_conditions_and_skipping_after_a_failure():
    h = Harness([{"name": "bad", "type": "boom", "properties": {"why": "no way"}},
                 {"name": "next", "type": "note", "properties": {"text": "x"}},
                 {"name": "cleanup", "type": "note", "if": "always", "properties": {"text": "tidy"}},
                 {"name": "report", "type": "note", "if": 'status.bad.failed && status["bad"].reason == "Action"',
                  "properties": {"text": "bad failed"}},
                 {"name": "never", "type": "note", "if": "status.bad.succeeded", "properties": {"text": "x"}},
                 {"name": "broken-if", "type": "note", "if": "status.nope.phase ==", "properties": {"text": "x"}}])
    out = h.step()
    assert dict(h.phases()) == {"bad": "failed", "next": "skipped", "cleanup": "succeeded", "report": "succeeded",
                                "never": "skipped", "broken-if": "skipped"}
    assert (h.of("bad")["reason"], h.of("bad")["message"]) == ("Action", "no way")
    assert h.of("broken-if")["message"].startswith("pre check error: invalid if value")
    assert out.state == "failed" and h.status["terminated"] and h.status["finished"]


def test_timeout_fails_the_step_and_later_ones_are_skipped():
    h = Harness([{"name": "slow", "type": "gate", "timeout": "30s", "properties": {"open": False}},
                 {"name": "after", "type": "note", "properties": {"text": "x"}},
                 {"name": "always", "type": "note", "if": "always", "properties": {"text": "x"}}])
    h.step()
    assert h.phases() == [("slow", "running")]
    h.step(31)
    assert dict(h.phases()) == {"slow": "failed", "after": "skipped", "always": "succeeded"}
    assert h.of("slow")["reason"] == "Timeout" and h.outcome.state == "failed"


def test_outputs_flow_into_inputs_and_if_sees_inputs():
    h = Harness([{"name": "first", "type": "note", "properties": {"text": "a"},
                  "outputs": [{"name": "said", "valueFrom": "echo"}]},
                 {"name": "sum", "type": "count", "properties": {"n": 20},
                  "outputs": [{"name": "total", "valueFrom": "total"}, {"name": "nothing", "valueFrom": "nope"}]},
                 {"name": "second", "type": "note", "inputs": [{"from": "said", "parameterKey": "text"}],
                  "if": 'inputs.said == "noted a"'}])
    assert h.step().state == "succeeded"
    assert h.context.vars == {"said": "noted a", "counter": {"value": 40}, "total": 41, "nothing": None}
    assert h.of("second")["message"] == "noted a"
    assert "failed to get output from nope" in h.of("sum")["message"]


def test_a_missing_input_keeps_the_step_pending():
    h = Harness([{"name": "needs", "type": "note", "inputs": [{"from": "never", "parameterKey": "text"}]}])
    h.step()
    assert h.phases() == [("needs", "pending")] and h.of("needs")["message"] == "Pending on Input: never"


def test_step_group_runs_sub_steps_and_takes_their_phase():
    h = Harness([{"name": "group", "type": "step-group", "subSteps": [
        {"name": "s1", "type": "note", "properties": {"text": "x"}},
        {"name": "s2", "type": "gate", "properties": {"open": False}, "dependsOn": ["s1"]}]}])
    h.step()
    group = h.of("group")
    assert group["phase"] == "running" and [(s["name"], s["phase"]) for s in group["subSteps"]] == [
        ("s1", "succeeded"), ("s2", "running")]
    skipped = Harness([{"name": "bad", "type": "boom"},
                       {"name": "group", "type": "step-group", "subSteps": [{"name": "s", "type": "note",
                                                                             "properties": {"text": "x"}}]}])
    skipped.step()
    assert skipped.of("group")["phase"] == "skipped" and skipped.of("s")["phase"] == "skipped"


def test_errors_are_retried_then_fail_for_good_and_the_workflow_terminates():
    h = Harness([{"name": "odd", "type": "conflict", "properties": {"n": 3}},
                 {"name": "later", "type": "note", "properties": {"text": "x"}}], settings=Settings(max_error_retries=3))
    h.step()
    assert (h.of("odd")["phase"], h.of("odd")["reason"]) == ("failed", "Execute")
    assert "conflict" in h.of("odd")["message"] and 'step "odd"' in h.of("odd")["message"]
    assert h.outcome.state == "executing"
    for _ in range(3):
        h.step(h.outcome.requeue_after or 1)
    assert h.of("odd")["reason"] == "FailedAfterRetries" and h.status["terminated"]
    assert h.outcome.state == "failed" and dict(h.phases())["later"] == "skipped"
    # a failed step waits up to --max-workflow-failed-backoff-time between tries
    memory = RunMemory(backoff_times={"x": 14})
    assert wait_interval(["x"], memory, True, Settings()) == 300
    assert wait_interval(["x"], memory, False, Settings()) == 60


def test_a_break_ends_the_step_and_its_later_actions_do_not_run():
    h = Harness([{"name": "s", "type": "stop"}, {"name": "next", "type": "note", "properties": {"text": "x"}}])
    h.step()
    assert (h.of("s")["phase"], h.of("s")["reason"], h.of("s")["message"]) == ("succeeded", "Terminate", "enough")
    assert h.status["terminated"]


def test_unknown_types_bad_templates_and_runaway_templates_fail_the_step_with_a_message():
    h = Harness([{"name": "odd", "type": "no-such-step"}])
    h.step()
    assert h.of("odd")["message"] == 'step "odd": no WorkflowStepDefinition "no-such-step" in namespace ns or ' \
                                     "vela-system"
    DEFINITIONS["bad-cue"] = definition("parameter: {\n  x: \n}\n")
    try:
        h = Harness([{"name": "bad", "type": "bad-cue"}])
        h.step()
        assert h.of("bad")["reason"] == "Rendering" and "does not compile" in h.of("bad")["message"]
        assert h.status["terminated"]
    finally:
        del DEFINITIONS["bad-cue"]
    h = Harness([{"name": "many", "type": "loop"}])
    h.step()
    assert "ran 64 actions in one pass" in h.of("many")["message"]
    h = Harness([{"name": "incomplete", "type": "nowhere"}])
    h.step()
    assert "action w (builtin.wait): its parameters are not complete" in h.of("incomplete")["message"]


def test_suspend_for_a_duration_then_resume_by_itself():
    h = Harness([{"name": "pause", "type": "suspend", "properties": {"duration": "10s", "message": "hold on"}},
                 {"name": "go", "type": "note", "properties": {"text": "x"}}])
    out = h.step()
    assert out.state == "suspending" and out.requeue_after == 10 and h.status["suspend"]
    assert (h.of("pause")["phase"], h.of("pause")["message"]) == ("suspending", "hold on")
    assert h.step(5).state == "suspending"
    assert h.step(6).state == "succeeded" and dict(h.phases()) == {"pause": "succeeded", "go": "succeeded"}


def test_suspend_until_resumed_and_terminate():
    h = Harness([{"name": "approve", "type": "suspend"}, {"name": "go", "type": "note", "properties": {"text": "x"}}])
    h.step()
    assert h.of("approve")["message"] == "Suspended by field suspend"
    assert h.step(60).state == "suspending"  # nothing resumes it by itself
    h.status = operations.resume(h.status)
    assert h.of("approve")["phase"] == "running" and not h.status["suspend"]
    assert h.step(1).state == "succeeded"
    t = Harness([{"name": "approve", "type": "suspend"}])
    t.step()
    t.status = operations.terminate(t.status)
    assert (t.of("approve")["phase"], t.of("approve")["reason"]) == ("failed", "Terminate")
    assert t.step(1).state == "terminated"


def test_operations_refuse_what_does_not_apply_and_restart_from_a_failed_step():
    with pytest.raises(operations.OperationError, match="not running"):
        operations.suspend(None)
    h = Harness([{"name": "a", "type": "note", "properties": {"text": "x"}, "outputs": [{"name": "o",
                                                                                      "valueFrom": "echo"}]},
                 {"name": "bad", "type": "boom", "outputs": [{"name": "b", "valueFrom": "parameter.why"}]},
                 {"name": "c", "type": "note", "properties": {"text": "y"}}])
    h.step()
    assert dict(h.phases()) == {"a": "succeeded", "bad": "failed", "c": "skipped"}
    with pytest.raises(operations.OperationError, match="non-failed"):
        operations.restart_from(h.status, h.workflow, "a")
    status, outputs = operations.restart_from(h.status, h.workflow, "bad")
    assert [s["name"] for s in status["steps"]] == ["a"] and outputs == ["b"]
    assert not status["terminated"] and not status["finished"] and "endTime" not in status
    assert operations.resume({"suspend": False, "steps": []}) is None


@pytest.mark.parametrize("steps, message", [
    ([{"name": "a", "type": "note"}, {"name": "a", "type": "note"}], "names must be unique: a"),
    ([{"name": "a", "type": "note", "dependsOn": ["zz"]}], 'step "a": dependsOn names unknown steps zz'),
    ([{"name": "a", "type": "note", "timeout": "soon"}], 'step "a": timeout: "soon" is not a duration'),
    ([{"name": "a", "type": "note", "subSteps": [{"type": "note"}]}], "only a step-group has subSteps"),
    ([{"name": "g", "type": "step-group", "subSteps": [{"name": "i", "type": "step-group"}]}],
     "a step-group cannot be a sub-step"),
    ([{"name": "a", "type": "note", "outputs": [{"valueFrom": "x"}]}], "each of outputs needs a name"),
    ([{"name": "a"}], 'step "a": type is required'),
])
def test_invalid_workflows_are_named(steps, message):
    with pytest.raises(ValueError, match=message):
        parse_workflow({"workflow": {"steps": steps}})
    with pytest.raises(ValueError, match="workflow.mode.steps must be StepByStep or DAG"):
        parse_workflow({"workflow": {"steps": [{"type": "note"}], "mode": {"steps": "Parallel"}}})


def test_restart_requests_wait_for_the_run_to_finish():
    from velashard.core.appworkflow import restart_due
    finished = {"finished": True, "endTime": "2026-01-01T00:00:00Z"}
    running = {"finished": False}
    assert restart_due("true", finished, T0) == (True, True, None)
    assert restart_due("true", running, T0) == (False, False, None)
    # a time: due once it has come, and only if the run finished before it
    assert restart_due("2026-01-01T00:10:00Z", finished, T0) == (False, False, 600.0)
    assert restart_due("2026-01-01T00:10:00Z", finished, T0 + timedelta(minutes=11)) == (True, True, None)
    assert restart_due("2025-12-31T23:00:00Z", finished, T0) == (False, True, None)  # done already: dropped
    # a duration: that long after each finish, the annotation staying
    assert restart_due("5m", finished, T0 + timedelta(minutes=1)) == (False, False, 240.0)
    assert restart_due("5m", finished, T0 + timedelta(minutes=6)) == (True, False, None)
    assert restart_due("5m", running, T0) == (False, False, None)
    assert restart_due("soon", finished, T0) == (False, False, None)
    assert restart_due(None, finished, T0) == (False, False, None)


def test_a_timed_out_step_still_gives_its_outputs():
    h = Harness([{"name": "hold", "type": "suspend", "timeout": "5s",
                  "outputs": [{"name": "said", "valueFrom": 'context.stepName + " timed out"'}]},
                 {"name": "next", "type": "note", "inputs": [{"from": "said", "parameterKey": "text"}],
                  "if": 'inputs.said == "hold timed out"'}])
    h.step()
    assert h.step(6).state == "failed"
    assert (h.of("hold")["phase"], h.of("hold")["reason"]) == ("failed", "Timeout")
    assert (h.of("next")["phase"], h.of("next")["message"]) == ("succeeded", "hold timed out")


def test_an_input_replaces_the_property_at_its_key():
    h = Harness([{"name": "a", "type": "note", "properties": {"text": "x"}, "outputs": [{"name": "o",
                                                                                      "valueFrom": "echo"}]},
                 {"name": "b", "type": "note", "properties": {"text": "as written"},
                  "inputs": [{"from": "o", "parameterKey": "text"}]}])
    h.step()
    assert h.of("b")["message"] == "noted x"
