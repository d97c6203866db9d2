"""hack/workflow_corpus.py, the rules of the workflow example harness, on example files written here: what is
found, what is in scope and why not, how an example is pointed at the loopback servers, when a workflow is
resumed and whether it ended as documented."""

from __future__ import annotations

import textwrap

import yaml

from hack.workflow_corpus import Endpoints, Example, load, outcome, prepare, resumable
from velashard.core.builtins import builtin_definitions

BUILTIN = {d["metadata"]["name"] for d in builtin_definitions()}
END = Endpoints("http://127.0.0.1:9999", 2525)


def app(name: str, steps: list[dict], **spec) -> dict:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": {"name": name},
            "spec": {"components": [], "workflow": {"steps": steps}, **spec}}


def write(tmp_path, rel: str, *docs: dict) -> None:
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(docs))


def by_name(tmp_path) -> dict[str, Example]:
    return {ex.name: ex for ex in load(str(tmp_path), BUILTIN).examples}


def test_scope_and_reasons(tmp_path):
    write(tmp_path, "a/plain.yaml", app("plain", [{"name": "s", "type": "export2config",
                                                    "properties": {"configName": "c", "data": {}}}]))
    write(tmp_path, "a/chat.yaml", app("chat", [{"name": "s", "type": "notification"}]))
    write(tmp_path, "a/tf.yaml", app("tf", [{"name": "s", "type": "apply-terraform-config"}]))
    write(tmp_path, "a/unknown.yaml", app("unknown", [{"name": "s", "type": "no-such-step"}]))
    write(tmp_path, "a/far.yaml", app("far", [{"name": "s", "type": "deploy"}], policies=[
        {"name": "p", "type": "topology", "properties": {"clusters": ["local", "east"]}}]))
    write(tmp_path, "a/old-outputs.yaml", app("old-outputs", [{"name": "s", "type": "read-config",
                                                               "outputs": [{"name": "o", "fromKey": "config"}]}]))
    found = by_name(tmp_path)
    assert (found["plain"].scope, found["chat"].scope) == ("kubernetes", "http")
    assert "Terraform" in found["tf"].reason
    assert "no-such-step" in found["unknown"].reason
    assert "remote clusters" in found["far"].reason
    assert "valueFrom" in found["old-outputs"].reason


def test_workflow_runs_stay_runs_with_their_templates_and_copies_count_once(tmp_path):
    run = {"apiVersion": "core.oam.dev/v1alpha1", "kind": "WorkflowRun", "metadata": {"name": "run"},
           "spec": {"mode": {"steps": "DAG"}, "workflowSpec": {"steps": [{"name": "m", "type": "suspend"}]}}}
    write(tmp_path, "b/run.yaml", run)
    write(tmp_path, "c/copy.yaml", run)
    write(tmp_path, "b/ref.yaml", dict(run, metadata={"name": "ref", "namespace": "default"},
                                       spec={"workflowRef": "t", "context": {"env": "dev"}}))
    write(tmp_path, "b/lost.yaml", dict(run, metadata={"name": "lost"}, spec={"workflowRef": "nowhere"}))
    write(tmp_path, "d/template.yaml", {"apiVersion": "core.oam.dev/v1alpha1", "kind": "Workflow",
                                        "metadata": {"name": "t", "namespace": "default"},
                                        "steps": [{"name": "send", "type": "request",
                                                   "properties": {"url": "https://api.example.com/x"}}]})
    found = {ex.name: ex for ex in load(str(tmp_path), BUILTIN).examples}
    ex, ref = found["run"], found["ref"]
    assert ex.is_run and ex.app["spec"]["mode"] == {"steps": "DAG"}
    assert ex.copies == ["c/copy.yaml#run"]
    assert ref.scope == "http" and [o["kind"] for o in ref.objects] == ["Workflow"]
    assert "nowhere" in found["lost"].reason
    prepared, objects = prepare(ref, "ns1", END)
    assert prepared["metadata"]["namespace"] == objects[0]["metadata"]["namespace"] == "ns1"
    assert objects[0]["steps"][0]["properties"]["url"] == "http://127.0.0.1:9999/api.example.com/x"
    suspended = {"suspend": True, "steps": [{"name": "m", "phase": "suspending"}]}
    assert resumable(ex, suspended)
    assert outcome(ex, {"status": "succeeded", "finished": True}) == (True, "")
    assert outcome(ex, {"status": "failed", "finished": True}) == (True, "workflow run failed")


def test_definitions_beside_an_example_make_its_step_types_known(tmp_path):
    step = {"apiVersion": "core.oam.dev/v1beta1", "kind": "WorkflowStepDefinition", "metadata": {"name": "greet"},
            "spec": {"schematic": {"cue": {"template": "parameter: {}\n"}}}}
    replacing = dict(step, metadata={"name": "request"})
    write(tmp_path, "docs/defs/definitions/greet.yaml", step, replacing)
    write(tmp_path, "docs/defs/app.yaml", app("uses", [{"name": "s", "type": "greet"}]))
    write(tmp_path, "elsewhere/app.yaml", app("far-away", [{"name": "s", "type": "greet"}]))
    corpus = load(str(tmp_path), BUILTIN)
    found = {ex.name: ex for ex in corpus.examples}
    assert found["uses"].scope == "custom-definition"
    assert "greet" in found["far-away"].reason  # a definition from another folder does not count
    assert [d["metadata"]["name"] for d in corpus.replacing] == ["request"]


def test_markdown_blocks_and_prepared_for_loopback(tmp_path):
    chat = app("notify", [{"name": "hi", "type": "notification", "properties": {
        "slack": {"url": {"value": "<your slack url>"}, "message": {"text": "x"}},
        "dingding": {"url": {"secretRef": {"name": "hooks", "key": "ding"}}, "message": {}},
        "email": {"from": {"address": "<sender>", "password": {"value": "<pw>"}, "host": "smtp.example.com"},
                  "to": ["a@example.com"], "content": {"subject": "s", "body": "b"}}}},
        {"name": "get", "type": "request", "properties": {"url": "https://api.example.com/repos/x"}},
        {"name": "read", "type": "read-object", "properties": {"name": "x", "cluster": "<your cluster name"}}])
    (tmp_path / "doc.md").write_text("Text\n```yaml\n" + yaml.safe_dump(chat) + "```\n")
    (ex,) = load(str(tmp_path), BUILTIN).examples
    prepared, objects = prepare(ex, "ns1", END)
    steps = {s["name"]: s["properties"] for s in prepared["spec"]["workflow"]["steps"]}
    assert prepared["metadata"]["namespace"] == "ns1"
    assert steps["hi"]["slack"]["url"] == {"value": "http://127.0.0.1:9999/hook/ns1/hi"}
    assert objects == [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hooks", "namespace": "ns1"},
                        "stringData": {"ding": "http://127.0.0.1:9999/hook/ns1/hi"}}]
    mail = steps["hi"]["email"]["from"]
    assert (mail["host"], mail["port"], mail["address"]) == ("127.0.0.1", 2525, "workflow@example.com")
    assert steps["get"]["url"] == "http://127.0.0.1:9999/api.example.com/repos/x"
    assert steps["read"]["cluster"] == ""


def test_resumed_only_when_waiting_for_a_person():
    spec = Example("x#a", app("a", [{"name": "gate", "type": "suspend"}, {"name": "nap", "type": "suspend",
                                                            "properties": {"duration": "1m"}},
                     {"name": "limit", "type": "suspend", "timeout": "5s"}]))

    def suspended_on(step: str) -> dict:
        return {"workflow": {"suspend": True, "steps": [{"name": step, "phase": "suspending"}]}}
    assert resumable(spec, suspended_on("gate"))
    assert not resumable(spec, suspended_on("nap")) and not resumable(spec, suspended_on("limit"))
    assert not resumable(spec, {"workflow": {"suspend": False}})


def test_outcome_against_the_documented_one():
    ex = Example("x#a", app("a", []), expect={"wait": "failed:Timeout", "next": "skipped"})
    ended = {"status": "workflowFailed", "workflow": {"finished": True, "steps": [
        {"name": "wait", "phase": "failed", "reason": "Timeout"}, {"name": "next", "phase": "skipped",
                                                                    "reason": "Skip"}]}}
    assert outcome(ex, ended) == (True, "")
    plain = Example("x#b", app("b", []))
    assert outcome(plain, {"status": "running", "workflow": {"finished": True}}) == (True, "")
    assert outcome(plain, {"status": "workflowFailed", "workflow": {"finished": True}}) == \
        (True, "application workflowFailed")
    assert outcome(plain, {"status": "runningWorkflow", "workflow": {}})[0] is False


def test_go_raw_strings_are_read(tmp_path):
    (tmp_path / "e2e_test.go").write_text(textwrap.dedent('''\
        var app = `
        kind: Application
        apiVersion: core.oam.dev/v1beta1
        metadata:
          name: from-go
        spec:
          components: []
          workflow:
            steps:
            - {name: s, type: print-message-in-status, properties: {message: hi}}
        `
        '''))
    assert [ex.name for ex in load(str(tmp_path), BUILTIN).examples] == ["from-go"]
