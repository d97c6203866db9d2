"""Field sets and the server-side apply field manager, as pure functions."""

from __future__ import annotations

import pytest

from velashard.apiserver import errors
from velashard.apiserver.storage import managed_fields
from velashard.apiserver.storage.managed_fields import APPLY, Write, apply, decode, record
from velashard.apiserver.storage.resources import Registry, ResourceType
from velashard.patch import fieldset

DEPLOYMENTS = Registry().lookup("apps", "v1", "deployments")
CONFIGMAPS = Registry().lookup("", "v1", "configmaps")
NOW, LATER = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"


def deployment(replicas=2, image="nginx:1.25", env=None, labels=None):
    container = {"name": "app", "image": image, "ports": [{"containerPort": 80}]}
    if env is not None:
        container["env"] = env
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": labels or {"app": "web"}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [container]}}}}


def applied_by(rt, live, config, manager, force=False, sub=None, now=NOW):
    """One apply as the server runs it: merge, then record managedFields on the result."""
    write = Write(manager, APPLY, config, force)
    new = apply(rt, live, config, write, sub)
    new["metadata"]["managedFields"] = record(rt, live, new, write, sub, now)
    return new


def owned(obj, manager):
    return next(e.fields for e in decode(obj) if e.manager == manager)


def test_fields_v1_encoding_round_trips_with_list_map_keys_and_dot_members():
    leaves = managed_fields.tracked_leaves(DEPLOYMENTS, deployment(), None)
    encoded = fieldset.to_fields_v1(leaves)
    container = encoded["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"app"}']
    assert container["."] == {} and container["f:image"] == {}
    assert 'k:{"containerPort":80,"protocol":"TCP"}' in container["f:ports"]  # defaulted key field
    assert encoded["f:spec"]["f:selector"] == {}  # label selectors are atomic
    assert "f:name" not in encoded["f:metadata"]  # server-owned metadata is never tracked
    assert fieldset.from_fields_v1(encoded) == frozenset(leaves)
    assert fieldset.path_string(('f:spec', 'f:template', 'f:spec', 'f:containers', 'k:{"name":"app"}',
                                 'f:image')) == '.spec.template.spec.containers[name="app"].image'


def test_conflict_names_manager_and_field_and_force_moves_ownership():
    live = applied_by(DEPLOYMENTS, None, deployment(), "kubectl")
    with pytest.raises(errors.APIError) as err:
        applied_by(DEPLOYMENTS, live, deployment(replicas=3), "other")
    assert err.value.code == 409 and err.value.reason == "Conflict"
    assert err.value.message == 'Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas'
    assert err.value.details["causes"] == [{"reason": "FieldManagerConflict", "message": 'conflict with "kubectl"',
                                            "field": ".spec.replicas"}]
    # Applying the same value is no conflict: the field becomes shared.
    shared = applied_by(DEPLOYMENTS, live, deployment(), "other")
    assert ("f:spec", "f:replicas") in owned(shared, "kubectl") & owned(shared, "other")
    forced = applied_by(DEPLOYMENTS, live, deployment(replicas=3), "other", force=True, now=LATER)
    assert forced["spec"]["replicas"] == 3
    assert ("f:spec", "f:replicas") in owned(forced, "other")
    assert ("f:spec", "f:replicas") not in owned(forced, "kubectl")


def test_several_conflicts_are_grouped_by_manager():
    live = applied_by(DEPLOYMENTS, None, deployment(), "a")
    with pytest.raises(errors.APIError) as err:
        applied_by(DEPLOYMENTS, live, deployment(replicas=5, image="nginx:2"), "b")
    assert err.value.message == ('Apply failed with 2 conflicts: conflicts with "a":\n- .spec.replicas\n'
                                 '- .spec.template.spec.containers[name="app"].image')


def test_fields_no_longer_applied_are_removed_unless_someone_else_owns_them():
    live = applied_by(DEPLOYMENTS, None, deployment(env=[{"name": "A", "value": "1"}],
                                                    labels={"app": "web", "tier": "front"}), "kubectl")
    other = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"tier": "front"}}}
    live = applied_by(DEPLOYMENTS, live, other, "helm")
    after = applied_by(DEPLOYMENTS, live, deployment(), "kubectl", now=LATER)
    container = after["spec"]["template"]["spec"]["containers"][0]
    assert "env" not in container  # only kubectl owned it
    assert after["metadata"]["labels"] == {"app": "web", "tier": "front"}  # helm still owns tier


def test_update_takes_changed_fields_from_appliers():
    live = applied_by(DEPLOYMENTS, None, deployment(), "kubectl")
    new = deployment(replicas=4)
    new["metadata"]["managedFields"] = record(DEPLOYMENTS, live, new, Write("hpa"), None, LATER)
    assert owned(new, "hpa") == {("f:spec", "f:replicas")}
    assert ("f:spec", "f:replicas") not in owned(new, "kubectl")
    entry = next(e for e in new["metadata"]["managedFields"] if e["manager"] == "hpa")
    assert entry["operation"] == "Update" and entry["apiVersion"] == "apps/v1" and entry["time"] == LATER


def test_status_writes_leave_the_owners_of_other_fields_alone():
    live = applied_by(DEPLOYMENTS, None, deployment(), "kubectl")
    new = dict(live, status={"replicas": 2})
    new["metadata"] = dict(live["metadata"])
    new["metadata"]["managedFields"] = record(DEPLOYMENTS, live, new, Write("kube-controller-manager"), "status",
                                              LATER)
    assert owned(new, "kubectl") == owned(live, "kubectl")
    entry = next(e for e in new["metadata"]["managedFields"] if e["manager"] == "kube-controller-manager")
    assert entry["subresource"] == "status" and entry["fieldsV1"] == {"f:status": {"f:replicas": {}}}


def test_entries_out_of_a_write_s_reach_are_kept_as_stored_without_decoding(monkeypatch):
    live = applied_by(DEPLOYMENTS, None, deployment(), "kubectl")
    status = dict(live, status={"replicas": 2})
    status["metadata"] = dict(live["metadata"])
    status["metadata"]["managedFields"] = record(DEPLOYMENTS, live, status, Write("kube-controller-manager"),
                                                 "status", LATER)
    decoded = []
    real = fieldset.from_fields_v1
    monkeypatch.setattr(fieldset, "from_fields_v1", lambda raw: decoded.append(raw) or real(raw))
    again = dict(status, status={"replicas": 3})
    entries = record(DEPLOYMENTS, status, again, Write("kube-controller-manager"), "status", LATER)
    spec_entry = next(e for e in status["metadata"]["managedFields"] if e["manager"] == "kubectl")
    assert not any(raw is spec_entry["fieldsV1"] for raw in decoded)  # a status write never reads kubectl's
    assert next(e for e in entries if e["manager"] == "kubectl") == spec_entry
    # and a write to the rest never reads the status entry, nor changes it
    status_entry = next(e for e in status["metadata"]["managedFields"] if e["manager"] == "kube-controller-manager")
    decoded.clear()
    scaled = dict(status, spec=dict(status["spec"], replicas=5))
    entries = record(DEPLOYMENTS, status, scaled, Write("hpa"), None, LATER)
    assert not any(raw is status_entry["fieldsV1"] for raw in decoded)
    assert next(e for e in entries if e["manager"] == "kube-controller-manager") == status_entry
    assert fieldset.from_fields_v1(next(e for e in entries if e["manager"] == "kubectl")["fieldsV1"]) == \
        owned(status, "kubectl") - {("f:spec", "f:replicas")}  # the updater took replicas from the applier


def test_a_manager_whose_fields_did_not_change_keeps_its_stored_fields_v1(monkeypatch):
    live = applied_by(DEPLOYMENTS, None, deployment(), "kubectl")
    first = dict(live, status={"replicas": 2})
    first["metadata"] = dict(live["metadata"])
    first["metadata"]["managedFields"] = record(DEPLOYMENTS, live, first, Write("kcm"), "status", NOW)
    encoded = []
    real = fieldset.to_fields_v1
    monkeypatch.setattr(fieldset, "to_fields_v1", lambda fields: encoded.append(fields) or real(fields))
    second = dict(first, status={"replicas": 3})  # the same field, a new value
    entries = record(DEPLOYMENTS, first, second, Write("kcm"), "status", LATER)
    mine = next(e for e in entries if e["manager"] == "kcm")
    before = next(e for e in first["metadata"]["managedFields"] if e["manager"] == "kcm")
    assert mine["fieldsV1"] is before["fieldsV1"] and not encoded
    assert mine["time"] == LATER  # it wrote a field, so its time moves


def test_has_fields_agrees_with_decoding():
    for raw in ({}, {".": {}}, {"f:a": {}}, {"f:a": 5}, {"f:a": {"f:b": "x"}}, {"f:a": {"f:b": {}}}, "x", None):
        assert fieldset.has_fields(raw) == bool(fieldset.from_fields_v1(raw)), raw


def test_sets_merge_and_crd_list_types_follow_the_schema():
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "args": {"type": "array", "items": {"type": "string"}}}}}}
    rt = ResourceType("example.com", "v1", "widgets", "Widget", True, schema=schema, crd_name="widgets.example.com")
    first = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "finalizers": ["a"]},
             "spec": {"ports": [{"name": "http", "port": 80}], "tags": ["x"], "args": ["1"]}}
    live = applied_by(rt, None, first, "one")
    second = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "finalizers": ["b"]},
              "spec": {"ports": [{"name": "grpc", "port": 90}], "tags": ["y"]}}
    merged = applied_by(rt, live, second, "two")
    assert [p["name"] for p in merged["spec"]["ports"]] == ["http", "grpc"]  # granular list-map
    assert merged["spec"]["tags"] == ["x", "y"] and merged["metadata"]["finalizers"] == ["a", "b"]
    assert ("f:spec", "f:args") in owned(merged, "one")  # atomic: one leaf
    assert ("f:spec", "f:tags", 'v:"y"') in owned(merged, "two")
    with pytest.raises(errors.APIError):
        applied_by(rt, merged, {**second, "spec": {"args": ["2"]}}, "two")  # atomic list owned by "one"


def test_patch_options_validation_is_kube_apiservers():
    with pytest.raises(errors.APIError) as err:
        managed_fields.validate_patch_options(None, None, apply=True)
    assert err.value.code == 422 and err.value.message == ('PatchOptions.meta.k8s.io "" is invalid: fieldManager: '
                                                           'Required value: is required for apply patch')
    with pytest.raises(errors.APIError) as err:
        managed_fields.validate_patch_options("m", "true", apply=False)
    assert "force: Forbidden: may not be specified for non-apply patch" in err.value.message
    assert managed_fields.manager_name(None, "kubectl-client-side-apply/v1.32.4 (linux/amd64)") == \
        "kubectl-client-side-apply"
    assert managed_fields.manager_name("mine", "kubectl/v1.32") == "mine"


def test_configmap_data_is_granular():
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}}
    live = applied_by(CONFIGMAPS, None, cm, "one")
    both = applied_by(CONFIGMAPS, live, {**cm, "data": {"b": "2"}}, "two")
    assert both["data"] == {"a": "1", "b": "2"}


def test_a_ca_bundle_set_by_an_update_survives_an_apply_of_the_webhooks_without_it():
    # Webhook configurations' webhooks are a list-map keyed by name: the master's caBundle (an Update) and Helm's
    # apply of the chart's webhooks (no caBundle) own different fields of the same item, so an upgrade applies.
    webhooks = Registry().lookup("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations")

    def config(bundle=None):
        client = {"service": {"name": "velashard", "namespace": "vela-system"}}
        if bundle:
            client["caBundle"] = bundle
        return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": "velashard-mutating"},
                "webhooks": [{"name": "a.core.oam.dev", "clientConfig": client, "sideEffects": "None"}]}

    live = applied_by(webhooks, None, config(), "helm")
    patched = config("Q0E=")
    patched["metadata"]["managedFields"] = record(webhooks, live, patched, Write("velashard"), None, LATER)
    upgraded = applied_by(webhooks, patched, config(), "helm", now=LATER)
    assert upgraded["webhooks"][0]["clientConfig"]["caBundle"] == "Q0E="
