"""The Application controller's pure parts: status assembly, policies, component health, revision numbers,
and the shard wrapper's decisions."""

from __future__ import annotations

import pytest

from velashard.apis import labels
from velashard.core import status
from velashard.core.health import component_health
from velashard.core.policies import unsupported_policies, with_overrides
from velashard.core.rendered import RenderedComponent
from velashard.core.revisions import revision_number
from velashard.kube.controller import DONE, Terminal
from velashard.sharding.shard_reconciler import MovedAway, ShardReconciler, check_dependent, wants_drain

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"


def test_an_unchanged_condition_keeps_its_transition_time_and_a_changed_one_moves():
    stored = {"conditions": [status.condition("Rendered", True, "Rendered", "", T0),
                             status.condition("Healthy", False, "Unhealthy", "web: Ready:0/1", T0)]}
    out = status.with_phase(stored, {"latestRevision": {"revision": 2}}, "running", 7,
                            [status.condition("Rendered", True, "Rendered", "", T1),
                             status.condition("Healthy", True, "Healthy", "", T1)])
    assert out["status"] == "running" and out["observedGeneration"] == 7 and out["latestRevision"]["revision"] == 2
    assert [(c["type"], c["lastTransitionTime"]) for c in out["conditions"]] == [("Rendered", T0), ("Healthy", T1)]


def test_workflow_conditions_say_why_not_finished_and_name_unhealthy_components():
    workflow = {"finished": True, "terminated": True, "message": "web is invalid",
                "steps": [{"name": "web", "type": "apply-component", "phase": "failed", "message": "web is invalid"}]}
    finished, healthy = status.workflow_conditions(workflow, {"web": (False, "not found"), "db": (True, "Ready:1/1")},
                                                   T0)
    assert (finished["status"], finished["reason"], finished["message"]) == ("False", "Failed", "web is invalid")
    assert (healthy["status"], healthy["reason"], healthy["message"]) == ("False", "Unhealthy", "web: not found")
    suspended = status.workflow_conditions({"suspend": True}, {}, T0)
    assert [c["reason"] for c in suspended] == ["Suspended", "Healthy"]


def test_services_list_each_component_with_its_health_and_traits_in_kubevela_shape():
    comp = RenderedComponent("web", "webservice", {"apiVersion": "apps/v1", "kind": "Deployment"}, [],
                             ["scaler", "gateway"], [])
    assert status.services([comp], {"web": (True, "Ready:1/1")}, {("web", "gateway"): (False, "Ingress web: x")},
                           "team") == [
        {"name": "web", "namespace": "team", "cluster": "local", "healthy": True, "message": "Ready:1/1",
         "workloadDefinition": {"apiVersion": "apps/v1", "kind": "Deployment"},
         "traits": [{"type": "scaler", "healthy": True},
                    {"type": "gateway", "healthy": False, "message": "Ingress web: x"}]}]
    assert status.applied_resources([{"apiVersion": "v1", "kind": "Service", "name": "web", "namespace": "team",
                                      "component": "web", "trait": "gateway"}]) == [
        {"creator": "workflow", "apiVersion": "v1", "kind": "Service", "name": "web", "namespace": "team"}]
    assert status.policy_status({"policies": [{"name": "gc", "type": "garbage-collect"}]}) == [
        {"name": "gc", "type": "garbage-collect"}]


def test_policies_beyond_the_local_cluster_or_unknown_are_reported_and_overrides_merge():
    spec = {"components": [{"name": "web", "type": "webservice", "properties": {"image": "a", "port": 80},
                            "traits": [{"type": "scaler", "properties": {"replicas": 1}}]}],
            "policies": [{"type": "topology", "properties": {"clusters": ["local"]}},
                         {"type": "topology", "properties": {"clusters": ["east"]}}, {"type": "garbage-collect"},
                         {"type": "webhook-notification"},
                         {"type": "override", "properties": {"components": [
                             {"name": "web", "properties": {"image": "b"},
                              "traits": [{"type": "scaler", "properties": {"replicas": 3}}, {"type": "expose"}]}]}}]}
    assert unsupported_policies(spec) == ["topology", "webhook-notification"]
    app = {"metadata": {"name": "a"}, "spec": spec}
    comp = with_overrides(app)["spec"]["components"][0]
    assert comp["properties"] == {"image": "b", "port": 80}
    assert comp["traits"] == [{"type": "scaler", "properties": {"replicas": 3}}, {"type": "expose"}]
    assert spec["components"][0]["properties"]["image"] == "a"  # the app itself is untouched


def test_component_health_uses_the_policy_for_the_workload_and_names_unhealthy_objects():
    workload = {"kind": "Deployment", "metadata": {"name": "web"}}
    service = {"kind": "Service", "metadata": {"name": "web"}}
    live = [{"kind": "Deployment", "spec": {"replicas": 2}, "status": {"readyReplicas": 2}}, None]
    status = {"healthPolicy": "isHealth: context.output.status.readyReplicas == 2"}
    assert component_health([workload, service], workload, live, status) == (False, "healthy; not found")
    assert component_health([workload], workload, live[:1], None) == (False, "Ready:0/2")
    status["customStatus"] = 'message: "ready: \\(context.output.status.readyReplicas)"'
    assert component_health([workload], workload, live[:1], status) == (True, "ready: 2")


@pytest.mark.parametrize("existing,latest,want", [
    ([], 0, 1),
    ([{"spec": {"revision": 3, "hash": "abc"}}], 3, 3),  # recorded, but the status write was lost
    ([{"spec": {"revision": 3, "hash": "old"}}], 2, 4),
])
def test_a_revision_number_is_reused_for_the_same_hash_else_the_next(existing, latest, want):
    app = {"status": {"latestRevision": {"revision": latest}}}
    assert revision_number(app, existing, "abc") == want


def _obj(shard: str | None, **extra_labels: str) -> dict:
    lbls = dict(extra_labels)
    if shard:
        lbls[labels.SCHEDULED_SHARD_ID] = shard
    return {"kind": "ResourceTracker", "metadata": {"name": "t", "namespace": "ns", "labels": lbls}}


def test_a_dependent_labelled_for_another_shard_means_the_app_moved():
    check_dependent(_obj("s1"), _obj("s1"))
    with pytest.raises(MovedAway, match="belongs to shard s2"):
        check_dependent(_obj("s1"), _obj("s2"))
    # Not a failure: a workflow step that reports Terminal errors in the app's status must let it through.
    assert not issubclass(MovedAway, Terminal)


def test_drain_is_honoured_unless_the_app_is_being_deleted():
    assert wants_drain(_obj("s1", **{labels.DRAIN: "s2"}))
    deleting = _obj("s1", **{labels.DRAIN: "s2"})
    deleting["metadata"]["deletionTimestamp"] = T0
    assert not wants_drain(deleting) and not wants_drain(_obj("s1")) and not wants_drain(None)


def test_the_wrapper_lets_go_of_an_app_that_moved_and_passes_everything_else_through():
    released: list[str] = []

    def inner(key: str):
        if key == "ns/moved":
            check_dependent(_obj("s1"), _obj("s2"))
        if key == "ns/bad":
            raise Terminal("bad input")
        return DONE

    wrapper = ShardReconciler(inner, client=None, resource=None, lookup=lambda key: _obj("s1"),
                              on_release=released.append)
    assert wrapper("ns/ok") is DONE and wrapper("ns/moved") is DONE
    with pytest.raises(Terminal, match="bad input"):
        wrapper("ns/bad")
    assert released == ["ns/moved"]

