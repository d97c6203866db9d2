"""velashard/workflow/runs.py: a WorkflowRun's workflow (its own steps or its template's), its context, its status
to and from the engine's, and the step names KubeVela's webhook gives."""

from __future__ import annotations

import pytest

from velashard.workflow import runs
from velashard.workflow.spec import Mode


def run(**spec) -> dict:
    return {"apiVersion": "core.oam.dev/v1alpha1", "kind": "WorkflowRun",
            "metadata": {"name": "r", "namespace": "team"}, "spec": spec}


def test_steps_of_the_run_or_of_its_template_with_the_runs_mode_first():
    own = runs.workflow_of(run(workflowSpec={"steps": [{"type": "suspend"}, {
        "type": "step-group", "mode": "StepByStep", "subSteps": [{"type": "suspend"}]}]}), None)
    assert [s.name for s in own.all_steps()] == ["step-0", "step-1", "step-1-0"]
    assert own.steps[1].mode == "StepByStep" and own.mode == Mode()
    template = {"mode": {"steps": "DAG"}, "steps": [{"name": "a", "type": "suspend"}]}
    referred = runs.workflow_of(run(workflowRef="t"), template)
    assert referred.mode == Mode("DAG", "DAG") and referred.steps[0].name == "a"
    assert runs.workflow_of(run(workflowRef="t", mode={"steps": "StepByStep"}), template).mode.steps == "StepByStep"
    with pytest.raises(runs.RunError, match='Workflow "t" not found in namespace team'):
        runs.workflow_of(run(workflowRef="t"), None)
    with pytest.raises(runs.RunError, match="needs spec.workflowSpec or spec.workflowRef"):
        runs.workflow_of(run(), None)
    with pytest.raises(runs.RunError, match="must be unique"):
        runs.workflow_of(run(workflowSpec={"steps": [{"name": "x", "type": "a"}, {"name": "x", "type": "b"}]}), None)
    assert runs.template_name(run(workflowRef="t")) == "t"
    assert runs.template_name(run(workflowRef="t", workflowSpec={"steps": []})) is None


def test_step_names_as_the_webhook_patches_them():
    steps = [{"type": "a"}, {"name": "b", "type": "step-group", "subSteps": [{"type": "c"}, {"name": "d"}]}]
    assert runs.step_names(steps) == [("/0/name", "step-0"), ("/1/subSteps/0/name", "step-1-0")]
    assert runs.step_names("not a list") == []


def test_context_is_name_and_namespace_with_the_runs_variables_over_them():
    assert runs.context_of(run(context={"env": "dev", "name": "override"})) == {
        "name": "override", "namespace": "team", "workflowName": "", "publishVersion": "", "env": "dev"}


def test_status_to_and_from_the_engine():
    assert runs.engine_status(None) == {} and runs.engine_status(dict(runs.EMPTY_STATUS)) == {}
    stored = {"mode": {"steps": "DAG", "subSteps": "DAG"}, "status": "executing", "startTime": "t0",
              "steps": [{"id": "1", "name": "a", "phase": "running"}], "suspend": False, "terminated": False,
              "finished": False, "conditions": [{"type": "WorkflowRun", "status": "False", "reason": "ReconcileError",
                                                 "message": "no template", "lastTransitionTime": "t"}]}
    engine = runs.engine_status(stored)
    assert "mode" not in engine and "conditions" not in engine and engine["steps"] == stored["steps"]
    written = runs.run_status({**engine, "mode": "DAG-DAG", "status": "succeeded"}, Mode("DAG", "DAG"), stored,
                              runs.ready("t1"))
    assert written["mode"] == {"steps": "DAG", "subSteps": "DAG"}
    assert [(c["type"], c["status"]) for c in written["conditions"]] == [("WorkflowRun", "True")]
    failed = runs.not_generated(None, "no template", "t")
    assert failed["status"] == "initializing" and failed["conditions"][0]["message"] == "no template"
    assert runs.with_condition(failed["conditions"], runs.failed("no template", "later")) == failed["conditions"]


def test_what_wakes_a_run():
    base = {"metadata": {}, "status": {"suspend": False, "steps": [{"name": "a"}], "finished": True}}
    assert runs.operated(base, {**base, "status": {**base["status"], "suspend": True}})
    assert runs.operated(base, {**base, "status": dict(runs.EMPTY_STATUS)})  # restarted
    assert not runs.operated(base, {**base, "status": {**base["status"], "message": "progress"}})
