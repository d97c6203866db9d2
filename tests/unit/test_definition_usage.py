"""Definitions resolve in the app's namespace, then vela-system; an app's revision hash covers the definitions it
uses and no other; the index of which apps use which definition follows the apps' events."""

from __future__ import annotations

import copy

import pytest

from velashard.core.definitions import Definitions, lookup_order, resolve, table
from velashard.core.rendered import RenderError
from velashard.core.rendering import render_app
from velashard.core.revisions import app_hash, legacy_current
from velashard.core.usage import COMPONENT, POLICY, STEP, TRAIT, UsageIndex, spec_hash, used_definitions, uses

SYSTEM = "vela-system"


def definition(kind: str, name: str, namespace: str, template: str, uid: str = "", rv: str = "1") -> dict:
    meta = {"name": name, "namespace": namespace, "resourceVersion": rv}
    if uid:
        meta.update(uid=uid, generation=1)
    return {"kind": kind, "metadata": meta, "spec": {"schematic": {"cue": {"template": template}}}}


def configmap(value: str) -> str:
    return f'output: {{apiVersion: "v1", kind: "ConfigMap", data: {{v: "{value}", p: parameter.p}}}}\n' \
           'parameter: p: *"" | string\n'


def annotate(value: str) -> str:
    return f'patch: metadata: annotations: trait: "{value}"\nparameter: {{}}\n'


def app(namespace: str, *components: dict, **spec) -> dict:
    return {"metadata": {"name": "a", "namespace": namespace}, "spec": {"components": list(components), **spec}}


def test_lookup_order_is_the_apps_namespace_then_the_system_namespace():
    assert lookup_order("team-b") == ("team-b", SYSTEM)
    assert lookup_order(SYSTEM) == (SYSTEM,)
    assert lookup_order("") == ("default", SYSTEM)  # an app that names no namespace is in default (KubeVela)
    get = table([definition(COMPONENT, "worker", SYSTEM, configmap("system")),
                 definition(COMPONENT, "worker", "team-a", configmap("tenant")),
                 {"kind": COMPONENT, "metadata": {"name": "file-only"}, "spec": {}}])  # a file: the system's
    assert resolve(get, "team-a", "worker")["metadata"]["namespace"] == "team-a"
    assert resolve(get, "team-b", "worker")["metadata"]["namespace"] == SYSTEM
    assert resolve(get, "team-b", "file-only") is not None
    assert resolve(get, "team-b", "nothing") is None


def test_a_tenants_same_named_definition_reaches_only_its_own_namespace():
    objects = [definition(COMPONENT, "worker", SYSTEM, configmap("system")),
               definition(COMPONENT, "worker", "team-a", configmap("tenant")),
               definition(COMPONENT, "only-a", "team-a", configmap("a")),
               definition(TRAIT, "mark", "team-a", annotate("tenant"))]
    component = {"name": "w", "type": "worker"}
    for namespace, value in (("team-a", "tenant"), ("team-b", "system"), (SYSTEM, "system")):
        defs = Definitions.from_objects([o for o in objects if o["kind"] == COMPONENT],
                                        [o for o in objects if o["kind"] == TRAIT], namespace=namespace)
        rendered = render_app(app(namespace, component), defs, 1)
        assert rendered.components[0].workload["data"]["v"] == value, namespace
    team_b = Definitions.from_objects([o for o in objects if o["kind"] == COMPONENT],
                                      [o for o in objects if o["kind"] == TRAIT], namespace="team-b")
    assert "only-a" not in team_b.components and "mark" not in team_b.traits
    with pytest.raises(RenderError, match='unknown component type "only-a"'):
        render_app(app("team-b", {"name": "w", "type": "only-a"}), team_b, 1)
    with pytest.raises(RenderError, match='unknown trait type "mark"'):
        render_app(app("team-b", {**component, "traits": [{"type": "mark"}]}), team_b, 1)


def test_uses_names_components_traits_policies_overrides_and_steps():
    spec = {"components": [{"name": "a", "type": "webservice", "traits": [{"type": "scaler"}, {"type": "gateway"}]},
                           {"name": "b", "type": "worker"}, "not-a-component", {"name": "c"}],
            "policies": [{"name": "o", "type": "override", "properties": {"components": [
                {"type": "cron-task", "traits": [{"type": "labels"}]}]}}, {"name": "t", "type": "topology"}],
            "workflow": {"steps": [{"name": "s1", "type": "suspend"}, {"name": "s2", "type": "notification"},
                                   {"name": "g", "type": "step-group", "subSteps": [
                                       {"name": "x", "type": "apply-component"}, {"name": "y", "type": "webhook"}]}]}}
    assert uses(spec) == {(COMPONENT, "webservice"), (COMPONENT, "worker"), (COMPONENT, "cron-task"),
                          (TRAIT, "scaler"), (TRAIT, "gateway"), (TRAIT, "labels"),
                          (POLICY, "override"), (POLICY, "topology"), (STEP, "notification"), (STEP, "webhook")}
    assert uses(None) == uses({"components": "x", "workflow": []}) == frozenset()


def test_the_revision_hash_covers_only_the_definitions_the_app_uses():
    objects = [definition(COMPONENT, "worker", SYSTEM, configmap("1"), uid="w"),
               definition(TRAIT, "mark", SYSTEM, annotate("1"), uid="m"),
               definition(TRAIT, "unused", SYSTEM, annotate("1"), uid="u")]

    def digest(objs: list[dict], spec: dict, namespace: str = "team") -> str:
        defs = Definitions.from_objects([o for o in objs if o["kind"] == COMPONENT],
                                        [o for o in objs if o["kind"] == TRAIT], namespace=namespace)
        return app_hash(spec, used_definitions(spec, defs))

    plain = {"components": [{"name": "w", "type": "worker"}]}
    marked = {"components": [{"name": "w", "type": "worker", "traits": [{"type": "mark"}]}]}
    before = (digest(objects, plain), digest(objects, marked))
    edited = copy.deepcopy(objects)
    edited[2]["spec"]["schematic"]["cue"]["template"] = annotate("2")  # nobody uses it
    edited[2]["metadata"]["resourceVersion"] = "2"
    edited.append(definition(TRAIT, "new-unused", SYSTEM, annotate("x"), uid="n"))
    assert (digest(edited, plain), digest(edited, marked)) == before
    edited[1]["spec"]["schematic"]["cue"]["template"] = annotate("2")  # only `marked` uses it
    edited[1]["metadata"]["resourceVersion"] = "2"
    assert digest(edited, plain) == before[0] and digest(edited, marked) != before[1]
    # a tenant's copy of the same spec in another namespace changes nothing, not even its own apps' revisions
    copied = objects + [dict(copy.deepcopy(objects[1]), metadata={"name": "mark", "namespace": "team", "uid": "c",
                                                                  "resourceVersion": "9"})]
    assert digest(copied, marked) == before[1] and digest(copied, marked, "other") == before[1]
    # a different spec in the app's own namespace is what the app uses
    shadow = objects + [definition(TRAIT, "mark", "team", annotate("mine"), uid="s")]
    assert digest(shadow, marked) != before[1] and digest(shadow, marked, "other") == before[1]


def test_a_missing_definition_is_recorded_and_its_arrival_is_a_change():
    spec = {"components": [{"name": "w", "type": "later"}]}
    assert used_definitions(spec, Definitions()) == {COMPONENT: {"later": None}}
    arrived = Definitions({"later": definition(COMPONENT, "later", SYSTEM, configmap("1"))})
    assert used_definitions(spec, arrived)[COMPONENT]["later"] is not None


def test_spec_hash_ignores_status_and_metadata_and_is_cached_by_version():
    one = definition(TRAIT, "t", SYSTEM, annotate("1"), uid="x", rv="3")
    other = dict(copy.deepcopy(one), status={"conditions": []},
                 metadata={"name": "t", "namespace": "elsewhere", "uid": "y", "resourceVersion": "8"})
    assert spec_hash(one) == spec_hash(other)
    changed = copy.deepcopy(one)
    changed["spec"]["schematic"]["cue"]["template"] = annotate("2")
    changed["metadata"]["resourceVersion"] = "4"
    assert spec_hash(changed) != spec_hash(one)


def test_the_index_follows_the_apps_and_answers_by_namespace():
    index = UsageIndex()
    handler = index.handler()
    a1 = app("team-a", {"name": "w", "type": "worker", "traits": [{"type": "scaler"}]})
    a1["metadata"]["name"] = "a1"
    b1 = app("team-b", {"name": "w", "type": "worker", "traits": [{"type": "scaler"}]})
    b1["metadata"]["name"] = "b1"
    s1 = app(SYSTEM, {"name": "w", "type": "worker"})
    s1["metadata"]["name"] = "s1"
    for obj in (a1, b1, s1):
        handler.on_add(obj)
    assert index.users(TRAIT, SYSTEM, "scaler") == ["team-a/a1", "team-b/b1"]
    assert index.users(TRAIT, "team-a", "scaler") == ["team-a/a1"]  # a tenant's own scaler: its apps only
    assert index.users(TRAIT, "team-c", "scaler") == []
    assert index.users(COMPONENT, SYSTEM, "worker") == ["team-a/a1", "team-b/b1", "vela-system/s1"]
    # team-a has its own worker: the system's worker is not what its apps use
    assert index.users(COMPONENT, SYSTEM, "worker", own=lambda ns: ns == "team-a") == ["team-b/b1",
                                                                                          "vela-system/s1"]
    assert index.users(TRAIT, SYSTEM, "hpa") == []
    updated = copy.deepcopy(b1)
    updated["spec"]["components"][0]["traits"] = [{"type": "hpa"}]
    handler.on_update(b1, updated)
    assert index.users(TRAIT, SYSTEM, "scaler") == ["team-a/a1"]
    assert index.users(TRAIT, SYSTEM, "hpa") == ["team-b/b1"]
    handler.on_update(updated, updated)  # a resync: nothing to do
    handler.on_delete(a1)
    assert index.users(TRAIT, SYSTEM, "scaler") == [] and index.users(COMPONENT, "team-a", "worker") == []


def test_a_revision_recorded_before_usage_hashing_stays_current_until_something_used_changes():
    comp = definition(COMPONENT, "worker", SYSTEM, configmap("1"), uid="w")
    trait = definition(TRAIT, "mark", SYSTEM, annotate("1"), uid="m")
    unused = definition(TRAIT, "unused", SYSTEM, annotate("1"), uid="u")
    legacy = "c/worker@w:g1,t/mark@m:g1,t/unused@u:g1"  # what the earlier versions recorded: every definition
    spec = {"components": [{"name": "w", "type": "worker", "traits": [{"type": "mark"}]}]}
    revision = {"spec": {"revision": 3, "hash": app_hash(spec, legacy), "definitions": legacy}}
    defs = Definitions({"worker": comp}, {"mark": trait, "unused": unused})
    assert legacy_current(revision, spec, defs)
    unused["metadata"]["generation"] = 2  # the old hash covered it, but the app does not use it
    assert legacy_current(revision, spec, defs)
    assert not legacy_current(revision, {**spec, "policies": []}, defs)  # the spec changed
    trait["metadata"]["generation"] = 2
    assert not legacy_current(revision, spec, defs)  # a used definition changed
    assert not legacy_current({"spec": {"hash": "x", "definitions": {}}}, spec, defs)  # not a legacy record
