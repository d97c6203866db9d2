"""Rendering apps from the built-in definitions, and the workflow planner."""

from __future__ import annotations

import pytest

from velashard.apis import labels
from velashard.core.builtins import builtin_definitions
from velashard.core.health import policy_health, resource_health
from velashard.core.rendering import Definitions, RenderError, render_app, template_cache_info
from velashard.core.revisions import app_hash, revisions_to_prune
from velashard.core.workflow import workflow_phase
from velashard.core.workflow_spec import parse_steps


@pytest.fixture(scope="module")
def defs() -> Definitions:
    objs = builtin_definitions()
    for i, d in enumerate(objs):
        d["metadata"].update(uid=f"uid-{i}", resourceVersion="1")
    return Definitions.from_objects([d for d in objs if d["kind"] == "ComponentDefinition"],
                                    [d for d in objs if d["kind"] == "TraitDefinition"])


def app(*components: dict) -> dict:
    return {"metadata": {"name": "demo", "namespace": "team"}, "spec": {"components": list(components)}}


def test_webservice_scaler_expose(defs):
    rendered = render_app(app({"name": "web", "type": "webservice",
                               "properties": {"image": "nginx:1", "ports": [{"port": 80, "expose": True}]},
                               "traits": [{"type": "scaler", "properties": {"replicas": 2}},
                                          {"type": "expose", "properties": {"port": [9090], "name": "web-extra"}}]}),
                          defs, 1)
    comp = rendered.components[0]
    deploy, services = comp.workload, comp.outputs
    assert deploy["kind"] == "Deployment" and deploy["spec"]["replicas"] == 2
    assert deploy["metadata"]["namespace"] == "team"
    assert deploy["metadata"]["labels"] == {labels.APP_NAME: "demo", labels.APP_NAMESPACE: "team",
                                            labels.APP_COMPONENT: "web", labels.APP_REVISION: "demo-v1",
                                            labels.RESOURCE_TYPE: "WORKLOAD", labels.WORKLOAD_TYPE: "webservice"}
    assert [s["metadata"]["labels"][labels.TRAIT_TYPE] for s in services] == ["AuxiliaryWorkload", "expose"]
    selector = deploy["spec"]["selector"]["matchLabels"]
    assert all(deploy["spec"]["template"]["metadata"]["labels"][k] == v for k, v in selector.items())
    assert deploy["spec"]["template"]["spec"]["containers"][0]["ports"] == [
        {"containerPort": 80, "protocol": "TCP", "name": "port-80"}]
    assert [(s["metadata"]["name"], s["spec"]["ports"][0]["port"]) for s in services] == [("web", 80),
                                                                                         ("web-extra", 9090)]
    assert comp.traits == ["scaler", "expose"]


def test_container_traits(defs):
    rendered = render_app(app({"name": "w", "type": "worker", "properties": {"image": "busybox", "args": ["-a", "-b"],
                                                                             "env": [{"name": "A", "value": "1"}]},
                               "traits": [{"type": "env", "properties": {"env": {"B": "2"}}},
                                          {"type": "command", "properties": {"delArgs": ["-a"], "addArgs": ["-c"]}},
                                          {"type": "resource", "properties": {"cpu": "500m"}},
                                          {"type": "labels", "properties": {"team": "x"}},
                                          {"type": "annotations", "properties": {"note": "y"}},
                                          {"type": "json-patch", "properties": {"operations": [
                                              {"op": "add", "path": "/spec/paused", "value": True}]}},
                                          {"type": "json-merge-patch", "properties": {"spec": {"minReadySeconds": 3}}}]}),
                          defs, 1)
    deploy = rendered.components[0].workload
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    assert container["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert container["args"] == ["-b", "-c"]
    assert container["resources"] == {"requests": {"cpu": "500m"}, "limits": {"cpu": "500m"}}
    assert deploy["metadata"]["labels"]["team"] == "x" and deploy["spec"]["template"]["metadata"]["labels"]["team"] == "x"
    assert deploy["metadata"]["annotations"] == {"note": "y"}
    assert deploy["spec"]["paused"] is True and deploy["spec"]["minReadySeconds"] == 3


def test_task_and_k8s_objects(defs):
    rendered = render_app(app({"name": "job", "type": "task", "properties": {"image": "busybox", "count": 2}},
                              {"name": "raw", "type": "k8s-objects", "properties": {"objects": [
                                  {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}},
                                  {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "b"}}]}}), defs, 3)
    job = rendered.components[0].workload
    assert job["kind"] == "Job" and job["spec"]["completions"] == 2
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    raw = rendered.components[1]
    assert raw.workload["kind"] == "ConfigMap" and [o["kind"] for o in raw.outputs] == ["Secret"]


@pytest.mark.parametrize("component,reason,field,fragment", [
    ({"name": "x", "type": "nope"}, "UnknownType", "type", 'unknown component type "nope"'),
    ({"name": "x", "type": "worker", "properties": {"image": "a"}, "traits": [{"type": "nope"}]}, "UnknownType",
     "type", 'trait "nope"'),
    ({"name": "x", "type": "worker", "properties": {"image": 3}}, "InvalidParameter", "image", "not of type"),
    ({"name": "x", "type": "worker", "properties": {"image": "a", "imagee": "b"}}, "InvalidParameter", "imagee",
     'unknown parameter "imagee"'),
    ({"name": "x", "type": "worker", "properties": {}}, "InvalidParameter", "image", "required"),
    ({"name": "x", "type": "worker", "properties": {"image": "a"},
      "traits": [{"type": "scaler", "properties": {"replicas": -1}}]}, "InvalidParameter", "replicas", "minimum"),
])
def test_render_errors_name_component_trait_and_field(defs, component, reason, field, fragment):
    with pytest.raises(RenderError) as err:
        render_app(app(component), defs, 1)
    assert err.value.reason == reason and err.value.field == field and fragment in str(err.value)
    assert str(err.value).startswith('component "x"')


def custom_defs(template: str) -> Definitions:
    definition = {"metadata": {"name": "custom", "uid": "u1", "resourceVersion": "1"},
                  "spec": {"schematic": {"jinja": {"template": template, "parameters": {"type": "object"}}}}}
    return Definitions({"custom": definition}, {})


def test_template_errors_and_sandbox(defs):
    for template, fragment in [("output: {{ broken", "template error"),
                               ("output: {{ ''.__class__.__mro__[1].__subclasses__() }}", "template error"),
                               ("output: [unclosed", "valid YAML"),
                               ("nothing: here", "no output")]:
        with pytest.raises(RenderError) as err:
            render_app(app({"name": "c", "type": "custom"}), custom_defs(template), 1)
        assert err.value.reason == "TemplateError" and fragment in str(err.value), str(err.value)


def test_kube_schematic_and_template_cache():
    definition = {"metadata": {"name": "kube-worker", "uid": "k1", "resourceVersion": "7"}, "spec": {"schematic": {
        "kube": {"template": {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {
            "template": {"spec": {"containers": [{"name": "main", "image": "placeholder"}]}}}},
            "parameters": [{"name": "image", "type": "string", "required": True,
                            "fieldPaths": ["spec.template.spec.containers[0].image"]},
                           {"name": "replicas", "type": "integer", "default": 2, "fieldPaths": ["spec.replicas"]}]}}}}
    defs = Definitions({"kube-worker": definition}, {})
    rendered = render_app(app({"name": "k", "type": "kube-worker", "properties": {"image": "redis:7"}}), defs, 1)
    deploy = rendered.components[0].workload
    assert deploy["spec"]["replicas"] == 2
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "redis:7"
    with pytest.raises(RenderError):
        render_app(app({"name": "k", "type": "kube-worker", "properties": {}}), defs, 1)
    tdefs = custom_defs("output: {apiVersion: v1, kind: ConfigMap}")
    render_app(app({"name": "c", "type": "custom"}), tdefs, 1)
    size = template_cache_info()[0]
    render_app(app({"name": "c", "type": "custom"}), tdefs, 2)
    assert template_cache_info()[0] == size  # same uid and resourceVersion: compiled once


def test_hash_and_revision_pruning():
    assert app_hash({"a": 1}, "defs") == app_hash({"a": 1}, "defs") != app_hash({"a": 2}, "defs")
    assert app_hash({"a": 1}, "defs-1") != app_hash({"a": 1}, "defs-2")
    revs = [{"metadata": {"name": f"r{i}"}, "spec": {"revision": i}} for i in range(1, 6)]
    assert revisions_to_prune(revs, 3, keep="r5") == ["r1", "r2"]
    assert revisions_to_prune(revs, 10, keep="r5") == []


def test_workflow_planning_and_phase():
    spec = {"components": [{"name": "a"}, {"name": "b"}]}
    assert [(s.name, s.type) for s in parse_steps(spec)] == [("deploy", "deploy")]
    spec["workflow"] = {"steps": [{"type": "apply-component", "properties": {"component": "a"}},
                                  {"type": "suspend"}, {"name": "rest", "type": "deploy"}]}
    assert [s.name for s in parse_steps(spec)] == ["apply-component-1", "suspend-2", "rest"]
    assert workflow_phase({"finished": True}, True) == "running"
    assert workflow_phase({"finished": True}, False) == "unhealthy"
    assert workflow_phase({"suspend": True}, True) == "workflowSuspending"
    assert workflow_phase({"finished": True, "steps": [{"phase": "failed"}]}, True) == "workflowFailed"
    assert workflow_phase({}, True) == "runningWorkflow"


def test_health_rules():
    deploy = {"kind": "Deployment", "metadata": {"generation": 2}, "spec": {"replicas": 2},
              "status": {"observedGeneration": 2, "availableReplicas": 2, "updatedReplicas": 2}}
    assert resource_health(deploy) == (True, "Ready:2/2")
    assert resource_health({**deploy, "status": {"observedGeneration": 1}})[0] is False
    assert resource_health(None) == (False, "not found")
    job = {"kind": "Job", "spec": {}, "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    assert resource_health(job) == (True, "Complete")
    assert resource_health({"kind": "Service", "metadata": {}}) == (True, "Exists")
    assert policy_health("context.output.status.ready == 3", {"status": {"ready": 3}})[0] is True
    assert policy_health("context.output.__class__", {})[0] is False


def test_error_message_names_component_trait_and_field(defs):
    with pytest.raises(RenderError) as err:
        render_app(app({"name": "web", "type": "webservice", "properties": {"image": "nginx"},
                        "traits": [{"type": "scaler", "properties": {"replicas": "x"}}]}), defs, 1)
    assert str(err.value) == """component "web" trait "scaler": parameter "replicas": 'x' is not of type 'integer'"""
    assert (err.value.component, err.value.trait, err.value.field) == ("web", "scaler", "replicas")


def test_sandbox_blocks_dunder_access():
    with pytest.raises(RenderError) as err:
        render_app(app({"name": "c", "type": "custom"}), custom_defs("output: {{ ''.__class__.__mro__ }}"), 1)
    assert err.value.reason == "TemplateError" and "unsafe" in str(err.value)


def trait_defs(template: str, patch_type: str, parameters: dict | None = None) -> Definitions:
    base = custom_defs("output: {apiVersion: v1, kind: ConfigMap, data: {a: '1'}}")
    base.traits["t"] = {"metadata": {"name": "t", "uid": f"t-{patch_type}", "resourceVersion": "1"},
                        "spec": {"schematic": {"jinja": {"template": template, "patchType": patch_type,
                                                         "parameters": parameters or {"type": "object"}}}}}
    return base


def test_custom_trait_patch_types_and_context_output():
    # The trait reads the workload rendered so far through context.output.
    json_patch = trait_defs("patch:\n- {op: add, path: /data/b, value: '{{ context.output.data.a }}{{ parameter.x }}'}",
                            "json-patch", {"type": "object", "properties": {"x": {"type": "string", "default": "2"}}})
    obj = render_app(app({"name": "c", "type": "custom", "traits": [{"type": "t"}]}), json_patch, 1).components[0]
    assert obj.workload["data"] == {"a": "1", "b": "12"}
    merge = trait_defs("patch: {data: {a: null, c: '3'}}", "json-merge-patch")
    obj = render_app(app({"name": "c", "type": "custom", "traits": [{"type": "t"}]}), merge, 1).components[0]
    assert obj.workload["data"] == {"c": "3"}
    bad = trait_defs("patch:\n- {op: replace, path: /nope/x, value: 1}", "json-patch")
    with pytest.raises(RenderError) as err:
        render_app(app({"name": "c", "type": "custom", "traits": [{"type": "t"}]}), bad, 1)
    assert (err.value.reason, err.value.trait) == ("PatchError", "t")


def test_additional_properties_only_when_schema_allows():
    open_defs = custom_defs("output: {apiVersion: v1, kind: ConfigMap, data: {k: '{{ parameter.anything }}'}}")
    # An absent additionalProperties means closed: unknown parameters are usually typos.
    open_defs.components["custom"]["spec"]["schematic"]["jinja"]["parameters"] = {
        "type": "object", "additionalProperties": True}
    rendered = render_app(app({"name": "c", "type": "custom", "properties": {"anything": "v"}}), open_defs, 1)
    assert rendered.components[0].workload["data"] == {"k": "v"}
    closed = custom_defs("output: {apiVersion: v1, kind: ConfigMap}")
    closed.components["custom"]["spec"]["schematic"]["jinja"]["parameters"] = {
        "type": "object", "properties": {"known": {"type": "string"}}}
    with pytest.raises(RenderError) as err:
        render_app(app({"name": "c", "type": "custom", "properties": {"other": "v"}}), closed, 1)
    assert (err.value.reason, err.value.field) == ("InvalidParameter", "other")


def test_context_variables_and_namespace_default():
    template = ("output:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata: {namespace: elsewhere}\n"
                "  data: {rev: '{{ context.revision }}', app: '{{ context.appName }}/{{ context.appNamespace }}',"
                " team: '{{ context.appLabels.team }}'}\n"
                "outputs:\n  extra: {apiVersion: v1, kind: Secret, metadata: {name: s}}")
    a = app({"name": "c", "type": "custom"})
    a["metadata"]["labels"] = {"team": "blue"}
    comp = render_app(a, custom_defs(template), 4).components[0]
    assert comp.workload["data"] == {"rev": "demo-v4", "app": "demo/team", "team": "blue"}
    assert comp.workload["metadata"]["namespace"] == "elsewhere"  # only a default
    secret = comp.outputs[0]
    assert secret["metadata"]["namespace"] == "team" and secret["metadata"]["labels"][labels.APP_COMPONENT] == "c"


def test_ref_objects_placeholder_and_validation(defs):
    props = {"objects": [{"resource": "configmap", "name": "cfg"}]}
    comp = render_app(app({"name": "r", "type": "ref-objects", "properties": props}), defs, 1).components[0]
    assert comp.workload == {"__refObjects__": props}
    with pytest.raises(RenderError) as err:
        render_app(app({"name": "r", "type": "ref-objects", "properties": {"objects": [{"bogus": 1}]}}), defs, 1)
    assert err.value.reason == "InvalidParameter" and "bogus" in str(err.value)


def test_depends_on_and_duplicate_names(defs):
    worker = {"name": "a", "type": "worker", "properties": {"image": "x"}}
    rendered = render_app(app(worker, {**worker, "name": "b", "dependsOn": ["a"]}), defs, 1)
    assert [c.depends_on for c in rendered.components] == [[], ["a"]]
    with pytest.raises(RenderError) as err:
        render_app(app({**worker, "dependsOn": ["zz"]}), defs, 1)
    assert err.value.field == "dependsOn" and '"zz"' in str(err.value)
    with pytest.raises(RenderError):
        render_app(app(worker, worker), defs, 1)


def test_webservice_service_only_for_exposed_ports(defs):
    comp = render_app(app({"name": "w", "type": "webservice", "properties": {"image": "x", "ports": [{"port": 80}]}}),
                      defs, 1).components[0]
    assert comp.outputs == []


def test_fingerprint_and_recompile_on_new_resource_version():
    tdefs = custom_defs("output: {apiVersion: v1, kind: ConfigMap}")
    before = tdefs.fingerprint()
    render_app(app({"name": "c", "type": "custom"}), tdefs, 1)
    size = template_cache_info()[0]
    tdefs.components["custom"]["metadata"]["resourceVersion"] = "2"
    assert tdefs.fingerprint() != before
    render_app(app({"name": "c", "type": "custom"}), tdefs, 1)
    assert template_cache_info()[0] == size + 1  # a new resourceVersion compiles again


def test_unknown_container_name_is_an_invalid_parameter(defs):
    with pytest.raises(RenderError) as err:
        render_app(app({"name": "w", "type": "worker", "properties": {"image": "busybox"},
                        "traits": [{"type": "command", "properties": {"containerName": "nope", "addArgs": ["-x"]}}]}),
                   defs, 1)
    assert err.value.reason == "InvalidParameter" and err.value.field == "containerName"
    assert 'no container named "nope"' in str(err.value)
