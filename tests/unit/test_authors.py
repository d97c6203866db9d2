"""Who an Application acts as: what the webhook records for a writer, what the controller impersonates, and how a
refusal is worded."""

from __future__ import annotations

import base64
import json

from velashard.apis import labels
from velashard.core.authors import (AuthConfig, author_annotations, author_of, group_regex, recorded_groups,
                                    refusal, unrecorded_author)
from velashard.kube.client import Identity, describe_request
from velashard.sharding.proof import Signer
from velashard.webhook.decisions import MutationContext, mutate

TENANT = {"username": "system:serviceaccount:team-a:tenant",
          "groups": ["system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated"]}
CONTROLLER = "system:serviceaccount:vela-system:velashard"


def app(annotations=None, spec=None):
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": "a", "namespace": "team-a", **({"annotations": annotations} if annotations else {})},
            "spec": spec or {"components": [{"name": "c", "type": "webservice", "properties": {"image": "x"}}]}}


def review(op, obj, old=None, user=TENANT):
    return {"uid": "u1", "operation": op, "kind": {"group": "core.oam.dev", "version": "v1beta1",
                                                    "kind": "Application"},
            "namespace": "team-a", "name": "a", "object": obj, "oldObject": old, "userInfo": user}


def patched(answer, obj):
    """The object after the webhook's JSON patch."""
    from velashard.patch import apply_json_patch

    response = answer["response"]
    assert response["allowed"], response
    ops = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    return apply_json_patch(obj, ops)


def author_ctx(**kwargs):
    return MutationContext(pick=None, signer=None, auth=AuthConfig(**kwargs), controllers=(CONTROLLER,))


def test_group_pattern_matches_whole_names_with_alternatives():
    assert group_regex("kubevela:*") == "^(?:kubevela:.*)$"
    assert recorded_groups(["kubevela:ops", "not-kubevela:x", "system:masters", "kubevela:"], AuthConfig()) == \
        "kubevela:ops,kubevela:"
    both = AuthConfig(group_pattern="kubevela:*|system:masters")
    assert recorded_groups(["system:masters", "system:masters2", "kubevela:a"], both) == "system:masters,kubevela:a"
    assert recorded_groups(["a.b", "axb"], AuthConfig(group_pattern="a.b")) == "a.b"  # a dot is a dot


def test_an_app_acts_as_its_recorded_author_else_the_default_user():
    recorded = app({labels.APP_USERNAME: "alice", labels.APP_GROUP: "kubevela:ops,kubevela:dev"})
    assert author_of(recorded, AuthConfig()) == Identity("alice", ("kubevela:ops", "kubevela:dev"))
    assert author_of(app(), AuthConfig()) == Identity("kubevela:vela-core", ())
    assert author_of(app({labels.APP_GROUP: ""}), AuthConfig(default_user="nobody")) == Identity("nobody", ())
    # Without --authentication-with-user a recorded username is not honoured (KubeVela's meaning).
    assert author_of(recorded, AuthConfig(with_user=False)).user == "kubevela:vela-core"
    assert refusal(app({labels.APP_SERVICE_ACCOUNT: "default"}), AuthConfig()) is not None
    assert refusal(app({labels.APP_SERVICE_ACCOUNT: "default"}), AuthConfig(enabled=False)) is None
    assert author_annotations(TENANT, AuthConfig(with_user=False)) == {labels.APP_USERNAME: None,
                                                                       labels.APP_GROUP: ""}


def test_the_webhook_records_the_writer_over_whatever_the_request_carried():
    spoofed = app({labels.APP_USERNAME: "admin", labels.APP_GROUP: "system:masters"})
    created = patched(mutate(review("CREATE", spoofed), author_ctx()), spoofed)
    assert created["metadata"]["annotations"] == {labels.APP_USERNAME: TENANT["username"], labels.APP_GROUP: ""}
    plain = patched(mutate(review("CREATE", app()), author_ctx(group_pattern="system:service*")), app())
    assert plain["metadata"]["annotations"][labels.APP_GROUP] == "system:serviceaccounts,system:serviceaccounts:team-a"


def test_updates_change_the_author_only_when_they_change_the_spec_or_the_author():
    alice = app({labels.APP_USERNAME: "alice", labels.APP_GROUP: ""})
    relabelled = json.loads(json.dumps(alice))
    relabelled["metadata"]["labels"] = {"team": "a"}
    assert patched(mutate(review("UPDATE", relabelled, alice), author_ctx()), relabelled) == relabelled
    edited = app({labels.APP_USERNAME: "alice", labels.APP_GROUP: ""}, spec={"components": []})
    assert patched(mutate(review("UPDATE", edited, alice), author_ctx()), edited)["metadata"]["annotations"][
        labels.APP_USERNAME] == TENANT["username"]
    forged = app({labels.APP_USERNAME: "admin", labels.APP_GROUP: ""})
    assert patched(mutate(review("UPDATE", forged, alice), author_ctx()), forged)["metadata"]["annotations"][
        labels.APP_USERNAME] == TENANT["username"]
    # The controllers' own writes (finalizers, moves) never make them the author, spec changed or not.
    by_controller = patched(mutate(review("UPDATE", edited, alice, {"username": CONTROLLER}), author_ctx()), edited)
    assert by_controller["metadata"]["annotations"][labels.APP_USERNAME] == "alice"
    # Without --authentication-with-user only groups are recorded: a username sent along goes.
    no_user = patched(mutate(review("CREATE", forged), author_ctx(with_user=False)), forged)
    assert no_user["metadata"]["annotations"] == {labels.APP_GROUP: ""}


def test_the_service_account_annotation_is_refused_while_authenticating():
    named = app({labels.APP_SERVICE_ACCOUNT: "default"})
    answer = mutate(review("CREATE", named), author_ctx())["response"]
    assert not answer["allowed"] and "app.oam.dev/service-account-name" in answer["status"]["message"]
    off = MutationContext(pick=None, signer=None, auth=AuthConfig(enabled=False))
    assert mutate(review("CREATE", named), off)["response"]["allowed"]


def test_authors_and_scheduling_in_one_answer():
    signer = Signer.generate()
    ctx = MutationContext(pick=lambda _app: "shard-1", signer=signer, auth=AuthConfig())
    out = patched(mutate(review("CREATE", app()), ctx), app())
    assert out["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] == "shard-1"
    assert out["metadata"]["annotations"][labels.APP_USERNAME] == TENANT["username"]
    assert signer.proves("team-a", "a", "shard-1", out["metadata"]["annotations"][labels.ASSIGNMENT_PROOF])


def test_refusals_name_the_request_in_rbac_terms():
    assert describe_request("create", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings") == \
        "create clusterrolebindings.rbac.authorization.k8s.io at the cluster scope"
    assert describe_request("get", "/api/v1/namespaces/kube-system/secrets/token") == \
        'get secrets "token" in namespace kube-system'
    assert describe_request("list", "/apis/apps/v1/namespaces/team-b/deployments") == \
        "list deployments.apps in namespace team-b"
    assert describe_request("get", "/api/v1/namespaces/team-b") == 'get namespaces "team-b" at the cluster scope'
    assert describe_request("update", "/apis/core.oam.dev/v1beta1/namespaces/x/applications/a/status") == \
        'update applications.core.oam.dev/status "a" in namespace x'


def test_an_app_with_no_recorded_author_says_why_it_acts_as_the_default_user():
    authorless = {"metadata": {"name": "a", "annotations": {}}}
    why = unrecorded_author(authorless, AuthConfig(default_user="kubevela:vela-core"))
    assert why is not None and "no author was recorded" in why and "acts as the default user kubevela:vela-core" in why
    assert "mutatingwebhookconfigurations" in why
    recorded = {"metadata": {"annotations": {labels.APP_USERNAME: "alice"}}}
    assert unrecorded_author(recorded, AuthConfig()) is None
    groups_only = {"metadata": {"annotations": {labels.APP_GROUP: "kubevela:team"}}}
    assert unrecorded_author(groups_only, AuthConfig(with_user=False)) is None
    assert unrecorded_author(authorless, AuthConfig(enabled=False)) is None
