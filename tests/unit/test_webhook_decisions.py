"""Admission decisions (pure) and the Flask app's handling of malformed reviews."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from velashard.sharding.proof import Signer
from velashard.webhook.decisions import (MutationContext, ReviewError, ValidationContext, mutate, parse_review,
                                         validate)
from velashard.webhook.app import create_app
from velashard.webhook.paths import DEFINITIONS_PATH, MUTATING_PATH, VALIDATING_PATH

SHARD = "controller.core.oam.dev/scheduled-shard-id"
MARK = "controller.core.oam.dev/shard-assigned-by-webhook"
MARK_PATH = MARK.replace("/", "~1")
PROOF = "controller.core.oam.dev/shard-assignment-proof"
PROOF_PATH = PROOF.replace("/", "~1")
SIGNER = Signer.generate()


def request(op="CREATE", labels=None, old_labels=None, user="alice", steps=None, old_annotations=None):
    obj = {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
           "metadata": {"name": "a", "namespace": "n", **({"labels": labels} if labels is not None else {})},
           "spec": {"components": [], **({"workflow": {"steps": steps}} if steps else {})}}
    old = None if old_labels is None else {**obj, "metadata": {"name": "a", "namespace": "n", "labels": old_labels,
                                                                 "annotations": old_annotations or {}}}
    return {"uid": "u1", "operation": op, "kind": {"group": "core.oam.dev", "version": "v1beta1",
                                                    "kind": "Application"},
            "namespace": "n", "name": "a", "object": obj, "oldObject": old, "userInfo": {"username": user}}


def patch_of(answer):
    response = answer["response"]
    return json.loads(base64.b64decode(response["patch"])) if "patch" in response else []


def test_mutate_schedules_with_a_proof_and_names_steps():
    ctx = MutationContext(pick=lambda app: "shard-1", signer=SIGNER)
    assert patch_of(mutate(request(), ctx)) == [
        {"op": "add", "path": "/metadata/labels", "value": {}},
        {"op": "add", "path": "/metadata/labels/controller.core.oam.dev~1scheduled-shard-id", "value": "shard-1"},
        {"op": "add", "path": "/metadata/annotations", "value": {}},
        {"op": "add", "path": f"/metadata/annotations/{PROOF_PATH}", "value": SIGNER.sign("n", "a", "shard-1")},
        {"op": "add", "path": f"/metadata/annotations/{MARK_PATH}", "value": "shard-1"}]
    assert SIGNER.proves("n", "a", "shard-1", SIGNER.sign("n", "a", "shard-1"))
    assert patch_of(mutate(request(labels={SHARD: "x"}), ctx)) == []
    named = patch_of(mutate(request(labels={SHARD: "x"}, steps=[{"type": "deploy"}, {"name": "b", "type": "suspend"}]),
                            ctx))
    assert named == [{"op": "add", "path": "/spec/workflow/steps/0/name", "value": "deploy-1"}]
    off = MutationContext(pick=lambda app: "shard-1", signer=SIGNER, auto_schedule=False)
    assert patch_of(mutate(request(), off)) == []
    assert patch_of(mutate(request(), MutationContext(pick=lambda app: None, signer=SIGNER))) == []


def test_a_removed_label_comes_back_only_with_a_valid_proof():
    ctx = MutationContext(pick=lambda app: "shard-1", signer=SIGNER)
    proven = request("UPDATE", labels={}, old_labels={SHARD: "shard-9"},
                     old_annotations={PROOF: SIGNER.sign("n", "a", "shard-9")})
    restored = patch_of(mutate(proven, ctx))
    assert restored[0]["value"] == "shard-9" and restored[-1] == {
        "op": "add", "path": f"/metadata/annotations/{PROOF_PATH}", "value": SIGNER.sign("n", "a", "shard-9")}
    assert not [op for op in restored if op["path"].endswith(MARK_PATH)]  # inheriting is no new choice
    # A shard handing back an assignment without a valid proof: left for the background scheduler, which moves
    # the app with its dependents (the webhook would only relabel the app).
    for annotations in ({}, {PROOF: "forged"}, {PROOF: SIGNER.sign("n", "a", "shard-8")},
                        {PROOF: Signer.generate().sign("n", "a", "shard-9")}):
        handed_back = request("UPDATE", labels={}, old_labels={SHARD: "shard-9"}, old_annotations=annotations)
        assert patch_of(mutate(handed_back, ctx)) == []


def test_mutate_strips_a_users_copy_of_its_mark():
    ctx = MutationContext(pick=lambda app: "shard-1", signer=SIGNER)
    forged = request(labels={SHARD: "shard-2"})
    forged["object"]["metadata"]["annotations"] = {MARK: "shard-2"}
    assert patch_of(mutate(forged, ctx)) == [{"op": "remove", "path": f"/metadata/annotations/{MARK_PATH}"}]
    copied = request()
    copied["object"]["metadata"]["annotations"] = {MARK: "shard-2", PROOF: "copied"}
    assert patch_of(mutate(copied, ctx)) == [
        {"op": "remove", "path": f"/metadata/annotations/{MARK_PATH}"},
        {"op": "add", "path": "/metadata/labels", "value": {}},
        {"op": "add", "path": "/metadata/labels/controller.core.oam.dev~1scheduled-shard-id", "value": "shard-1"},
        {"op": "add", "path": f"/metadata/annotations/{PROOF_PATH}", "value": SIGNER.sign("n", "a", "shard-1")},
        {"op": "add", "path": f"/metadata/annotations/{MARK_PATH}", "value": "shard-1"}]


def test_an_app_without_a_name_yet_is_left_to_the_background_scheduler():
    """generateName: the name its proof must carry is chosen after admission."""
    ctx = MutationContext(pick=lambda app: "shard-1", signer=SIGNER)
    unnamed = request()
    unnamed["name"] = ""
    unnamed["object"]["metadata"] = {"generateName": "a-", "namespace": "n"}
    assert patch_of(mutate(unnamed, ctx)) == []


def test_validate_checks_components_only():
    assert validate(request("UPDATE", labels={SHARD: "b"}, old_labels={SHARD: "a"}),
                    ValidationContext())["response"]["allowed"] is True  # the guard is a policy now
    checked = ValidationContext(check_components=lambda obj: 'component "x": unknown type')
    assert validate(request(), checked)["response"]["status"]["code"] == 422
    # an app written without metadata.namespace is checked with its definitions as its namespace resolves them
    seen = []
    unnamespaced = request()
    del unnamespaced["object"]["metadata"]["namespace"]
    validate(unnamespaced, ValidationContext(check_components=lambda obj: seen.append(obj["metadata"]) or None))
    assert seen == [{"name": "a", "namespace": "n"}]


@pytest.mark.parametrize("body,fragment", [
    (b"not json", "not JSON"), (b"[]", "JSON object"), (b'{"kind":"Pod"}', "AdmissionReview"),
    (b'{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"}', "request is missing"),
    (b'{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"x","operation":"EAT"}}',
     "operation"),
])
def test_parse_review_errors(body, fragment):
    with pytest.raises(ReviewError) as err:
        parse_review(body)
    assert fragment in str(err.value)


@pytest.fixture(scope="module")
def http():
    app = create_app(MutationContext(pick=lambda a: "s", signer=SIGNER), ValidationContext())
    return app.test_client()


def test_http_answers_and_errors(http):
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request()}
    ok = http.post(MUTATING_PATH, data=json.dumps(review))
    assert ok.status_code == 200 and ok.json["response"]["uid"] == "u1"
    assert http.post(VALIDATING_PATH, data=b"{").status_code == 400
    assert http.get(MUTATING_PATH).status_code == 405
    assert http.post("/nope", data=b"{}").status_code == 404


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.binary(max_size=300),
                 st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                              lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                                  st.sampled_from(["kind", "apiVersion", "request", "uid", "operation", "object",
                                                   "oldObject", "metadata", "labels", "userInfo", "spec"]),
                                  inner, max_size=5), max_leaves=20).map(lambda v: json.dumps(v).encode())))
def test_fuzzed_reviews_never_get_a_5xx(http, body):
    for path in (MUTATING_PATH, VALIDATING_PATH):
        assert http.post(path, data=body).status_code in (200, 400)


def test_drain_acknowledgement_is_left_unscheduled():
    ctx = MutationContext(pick=lambda app: "shard-1", signer=SIGNER)
    req = request("UPDATE", labels={}, old_labels={SHARD: "a", "controller.core.oam.dev/drain": "b"})
    assert patch_of(mutate(req, ctx)) == []


def test_configurations_and_certificate_renewal():
    import datetime

    from velashard.webhook.certificates import make_ca, make_serving_cert
    from velashard.webhook.certstore import needs_renewal
    from velashard.webhook.runner import WebhookOptions, configurations, serving_hosts

    opts = WebhookOptions(url="https://dev.example:9443")
    mutating, validating = configurations(opts, b"CA")
    create_hook, update_hook = mutating["webhooks"]
    for hook in (create_hook, update_hook):
        assert hook["clientConfig"]["url"] == f"https://dev.example:9443{MUTATING_PATH}"
        assert hook["failurePolicy"] == "Ignore" and hook["timeoutSeconds"] == 5
    assert create_hook["rules"][0]["operations"] == ["CREATE"] and "objectSelector" not in create_hook
    assert update_hook["objectSelector"]["matchExpressions"][0] == {"key": SHARD, "operator": "DoesNotExist"}
    # without ValidateComponentWhenSharding only definitions are validated
    assert [h["clientConfig"]["url"] for h in validating["webhooks"]] == [f"https://dev.example:9443{DEFINITIONS_PATH}"]
    _, gated = configurations(WebhookOptions(url=opts.url, validate_components=True,
                                             validating_failure_policy="Ignore"), b"CA")
    assert gated["webhooks"][0]["clientConfig"]["url"].endswith(VALIDATING_PATH)
    assert gated["webhooks"][1]["clientConfig"]["url"].endswith(DEFINITIONS_PATH)
    assert gated["webhooks"][0]["failurePolicy"] == "Ignore"
    in_cluster, _ = configurations(WebhookOptions(), b"CA")
    assert in_cluster["webhooks"][0]["clientConfig"]["service"]["name"] == "velashard-webhook"
    assert serving_hosts(opts)[0] == "dev.example"
    now = datetime.datetime.now(datetime.timezone.utc)
    serving = make_serving_cert(make_ca(), ["127.0.0.1"], days=40)
    assert not needs_renewal(serving, now) and needs_renewal(serving, now + datetime.timedelta(days=11))


@pytest.mark.parametrize("body,codes", [
    (b"[" * 100_000 + b"]" * 100_000, (400,)),  # nesting deeper than any parser's recursion
    (json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        **request(), "object": {**request()["object"], "metadata": {
            "name": "a", "namespace": "n", "annotations": {"big": "x" * 3_000_000}}}}}).encode(), (200,)),
    (b"{" + b" " * (5 * 1024 * 1024) + b"}", (413,)),  # over the 4 MiB limit
    (json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        **request(), "object": {**request()["object"], "metadata": {
            "name": "\u00e9\u4e2d\U0001F600", "namespace": "\u202e", "labels": {"\u00e9": "\ud7ff"}}}}},
               ensure_ascii=False).encode(), (200,)),
    ('{"kind":"AdmissionReview","request":{"uid":"\udcff"}}'.encode("utf-8", "surrogatepass"), (400,)),
    (b"\xff\xfe\x00{", (400,)),
])
def test_huge_deep_and_odd_unicode_reviews_get_a_4xx_or_an_answer(http, body, codes):
    for path in (MUTATING_PATH, VALIDATING_PATH):
        answer = http.post(path, data=body)
        assert answer.status_code in codes, (answer.status_code, answer.get_data()[:300])
        if answer.status_code == 200:
            assert answer.json["response"]["uid"] == "u1"


def definition_review(kind: str, template: str, operation: str = "CREATE") -> dict:
    return {"uid": "u1", "operation": operation, "kind": {"group": "core.oam.dev", "version": "v1beta1", "kind": kind},
            "object": {"metadata": {"name": "d", "namespace": "vela-system"},
                       "spec": {"schematic": {"cue": {"template": template}}}}}


def test_definitions_whose_cue_does_not_compile_are_refused_with_line_and_column():
    from velashard.webhook.decisions import validate_definition

    ok = validate_definition(definition_review("TraitDefinition", "patch: spec: replicas: parameter.n\n"
                                                                  "parameter: n: *1 | int"))
    assert ok["response"]["allowed"] is True
    bad = validate_definition(definition_review("ComponentDefinition", "output: {\n  kind: \"ConfigMap\"\n"))
    assert bad["response"]["allowed"] is False and bad["response"]["status"]["code"] == 422
    assert 'ComponentDefinition "d"' in bad["response"]["status"]["message"]
    assert "line 3, column 1" in bad["response"]["status"]["message"]
    # a CUE workflow step compiles with the providers' packages importable; one that does not is refused
    step = validate_definition(definition_review("WorkflowStepDefinition", 'import "vela/op"\napply: op.#Apply'))
    assert step["response"]["allowed"] is True
    new_style = validate_definition(definition_review("WorkflowStepDefinition", 'import "vela/kube"\n'
                                                      'read: kube.#Read & {$params: value: parameter}\n'
                                                      'parameter: {...}\n'))
    assert new_style["response"]["allowed"] is True
    broken_step = validate_definition(definition_review("WorkflowStepDefinition",
                                                        'import "vela/op"\nwait: op.#ConditionalWait & {\n'))
    message = broken_step["response"]["status"]["message"]
    assert broken_step["response"]["allowed"] is False and 'WorkflowStepDefinition "d"' in message
    assert "does not compile" in message and "line 3, column 1" in message
    odd_package = validate_definition(definition_review("WorkflowStepDefinition", 'import "vela/helm"\nx: 1\n'))
    assert 'package "vela/helm" is not supported' in odd_package["response"]["status"]["message"]
    unknown_import = validate_definition(definition_review("TraitDefinition", 'import "tool/exec"\npatch: exec.Run'))
    assert unknown_import["response"]["allowed"] is False
    assert validate_definition(definition_review("Application", "x: ("))["response"]["allowed"] is True


def test_a_workflow_run_is_authored_placed_and_its_steps_named_as_kubevela_names_them():
    from velashard.core.authors import AuthConfig
    from velashard.sharding.proof import subject

    review = request()
    review["kind"] = {"group": "core.oam.dev", "version": "v1alpha1", "kind": "WorkflowRun"}
    review["object"] = {"apiVersion": "core.oam.dev/v1alpha1", "kind": "WorkflowRun",
                        "metadata": {"name": "a", "namespace": "n"},
                        "spec": {"workflowSpec": {"steps": [{"type": "suspend"}, {"name": "g", "type": "step-group",
                                                                                   "subSteps": [{"type": "x"}]}]}}}
    ops = {p["path"]: p.get("value") for p in patch_of(mutate(review, MutationContext(
        lambda _app: "shard-1", SIGNER, auth=AuthConfig())))}
    assert ops["/metadata/labels/" + SHARD.replace("/", "~1")] == "shard-1"
    proof = ops["/metadata/annotations/" + PROOF_PATH]
    assert SIGNER.proves("n", subject("WorkflowRun", "a"), "shard-1", proof)
    assert not SIGNER.proves("n", "a", "shard-1", proof)  # an application's proof it is not, nor the reverse
    assert ops["/metadata/annotations/app.oam.dev~1username"] == "alice"
    assert ops["/spec/workflowSpec/steps/0/name"] == "step-0"
    assert ops["/spec/workflowSpec/steps/1/subSteps/0/name"] == "step-1-0"
    assert subject("Application", "a") == subject("", "a") == "a"
