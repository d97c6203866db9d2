"""Rendering apps from the built-in definitions, and the workflow planner."""

from __future__ import annotations

import pytest

from velashard.apis import labels
from velashard.core.builtins import builtin_definitions
from velashard.core.health import definition_status, resource_health
from velashard.core.render_cache import render_count
from velashard.core.definitions import Definitions
from velashard.core.rendered import RenderError
from velashard.core.rendering import render_app
from velashard.cue.programs import PROGRAMS
from velashard.core.revisions import app_hash, revisions_to_prune
from velashard.core.usage import used_definitions
from velashard.core.appworkflow import app_phase
from velashard.workflow.spec import parse_workflow


@pytest.fixture(scope="module")
def defs() -> Definitions:
    objs = builtin_definitions()
    for i, d in enumerate(objs):
        d["metadata"].update(uid=f"uid-{i}", resourceVersion="1")
    return Definitions.from_objects(*[[d for d in objs if d["kind"] == kind]
                                      for kind in ("ComponentDefinition", "TraitDefinition", "PolicyDefinition")])


def app(*components: dict) -> dict:
    return {"metadata": {"name": "demo", "namespace": "team"}, "spec": {"components": list(components)}}


def test_webservice_scaler_expose(defs):
    rendered = render_app(app({"name": "web", "type": "webservice",
                               "properties": {"image": "nginx:1", "ports": [{"port": 80, "expose": True}]},
                               "traits": [{"type": "scaler", "properties": {"replicas": 2}},
                                          {"type": "expose", "properties": {"port": [9090]}}]}),
                          defs, 1)
    comp = rendered.components[0]
    deploy, services = comp.workload, comp.outputs
    assert deploy["kind"] == "Deployment" and deploy["spec"]["replicas"] == 2
    assert deploy["metadata"]["namespace"] == "team"
    assert deploy["metadata"]["labels"] == {labels.APP_NAME: "demo", labels.APP_NAMESPACE: "team",
                                            labels.APP_COMPONENT: "web", labels.APP_REVISION: "demo-v1",
                                            labels.RESOURCE_TYPE: "WORKLOAD", labels.WORKLOAD_TYPE: "webservice"}
    # expose's Service takes the component's name, as webservice's does: the later one is what is applied
    assert [s["metadata"]["labels"][labels.TRAIT_TYPE] for s in services] == ["expose"]
    selector = deploy["spec"]["selector"]["matchLabels"]
    assert all(deploy["spec"]["template"]["metadata"]["labels"][k] == v for k, v in selector.items())
    assert deploy["spec"]["template"]["spec"]["containers"][0]["ports"] == [
        {"containerPort": 80, "protocol": "TCP", "name": "port-80"}]
    assert [(s["metadata"]["name"], s["spec"]["ports"][0]["port"]) for s in services] == [("web", 9090)]
    assert comp.traits == ["scaler", "expose"]


def test_container_traits(defs):
    rendered = render_app(app({"name": "w", "type": "webservice", "properties": {"image": "busybox", "args": ["-a", "-b"],
                                                                             "env": [{"name": "A", "value": "1"}]},
                               "traits": [{"type": "env", "properties": {"env": {"B": "2"}}},
                                          {"type": "command", "properties": {"delArgs": ["-a"], "addArgs": ["-c"]}},
                                          {"type": "resource", "properties": {"cpu": "500m", "memory": "128Mi"}},
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
    assert container["resources"] == {"requests": {"cpu": "500m", "memory": "128Mi"},
                                      "limits": {"cpu": "500m", "memory": "128Mi"}}
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
    ({"name": "x", "type": "worker", "properties": {"image": 3}}, "InvalidParameter", "image", "conflicting values"),
    ({"name": "x", "type": "worker", "properties": {}}, "InvalidParameter", "image", "is required"),
    ({"name": "x", "type": "worker", "properties": {"image": "a"},
      "traits": [{"type": "scaler", "properties": {"replicas": "two"}}]}, "InvalidParameter", "replicas",
     "conflicting values"),
])
def test_render_errors_name_component_definition_and_field(defs, component, reason, field, fragment):
    with pytest.raises(RenderError) as err:
        render_app(app(component), defs, 1)
    assert err.value.reason == reason and err.value.field == field and fragment in str(err.value), str(err.value)
    assert str(err.value).startswith('component "x"')


def custom_defs(template: str, name: str = "custom") -> Definitions:
    definition = {"kind": "ComponentDefinition", "metadata": {"name": name, "uid": "u1", "resourceVersion": "1"},
                  "spec": {"schematic": {"cue": {"template": template}}}}
    return Definitions({name: definition}, {})


CONFIGMAP = 'output: {apiVersion: "v1", kind: "ConfigMap", data: a: "1"}\n'


@pytest.mark.parametrize("template, fragment", [
    ("output: {", "does not compile"),
    ('import "tool/exec"\noutput: exec.Run', "not supported"),
    ("output: nothere", 'reference "nothere" not found'),
    ("nothing: 1", "has no output"),
    ('output: "a string"', "must be an object with apiVersion and kind"),
    ('output: {apiVersion: "v1", kind: "ConfigMap", data: a: 1 & 2}', "conflicting values"),
])
def test_template_errors_name_the_definition(template, fragment):
    with pytest.raises(RenderError) as err:
        render_app(app({"name": "c", "type": "custom"}), custom_defs(template), 1)
    assert err.value.reason == "TemplateError" and fragment in str(err.value), str(err.value)
    assert 'component "c"' in str(err.value)


def test_a_template_that_does_not_compile_names_line_and_column():
    with pytest.raises(RenderError) as err:
        render_app(app({"name": "c", "type": "custom"}), custom_defs("output: {\n  a: 1 +\n}"), 1)
    assert "custom.cue:3:1" in str(err.value), str(err.value)


def test_kube_schematic_and_caches():
    definition = {"metadata": {"name": "kube-worker", "uid": "k1", "resourceVersion": "7"}, "spec": {"schematic": {
        "kube": {"template": {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {
            "template": {"spec": {"containers": [{"name": "main", "image": "placeholder"}]}}}},
            "parameters": [{"name": "image", "type": "string", "required": True,
                            "fieldPaths": ["spec.template.spec.containers[0].image"]},
                           {"name": "replicas", "type": "number", "default": 2, "fieldPaths": ["spec.replicas"]}]}}}}
    defs = Definitions({"kube-worker": definition}, {})
    rendered = render_app(app({"name": "k", "type": "kube-worker", "properties": {"image": "redis:7"}}), defs, 1)
    deploy = rendered.components[0].workload
    assert deploy["spec"]["replicas"] == 2
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "redis:7"
    with pytest.raises(RenderError):
        render_app(app({"name": "k", "type": "kube-worker", "properties": {}}), defs, 1)
    tdefs = custom_defs(CONFIGMAP)
    render_app(app({"name": "c", "type": "custom"}), tdefs, 1)
    programs, rendered_before = PROGRAMS.info()[0], render_count()
    render_app(app({"name": "c", "type": "custom"}), tdefs, 2)
    assert PROGRAMS.info()[0] == programs  # the same template text: compiled once
    assert render_count() == rendered_before + 1  # a new revision renders once
    render_app(app({"name": "c", "type": "custom"}), tdefs, 2)
    assert render_count() == rendered_before + 1  # a re-sync evaluates nothing


def test_hash_and_revision_pruning():
    assert app_hash({"a": 1}, "defs") == app_hash({"a": 1}, "defs") != app_hash({"a": 2}, "defs")
    assert app_hash({"a": 1}, "defs-1") != app_hash({"a": 1}, "defs-2")
    revs = [{"metadata": {"name": f"r{i}"}, "spec": {"revision": i}} for i in range(1, 6)]
    assert revisions_to_prune(revs, 3, keep="r5") == ["r1", "r2"]
    assert revisions_to_prune(revs, 10, keep="r5") == []


def test_workflow_planning_and_phase():
    spec = {"components": [{"name": "a"}, {"name": "b"}]}
    default = parse_workflow(spec)
    assert default.default and [(s.name, s.type) for s in default.steps] == [("deploy", "deploy")]
    spec["workflow"] = {"steps": [{"type": "apply-component", "properties": {"component": "a"}},
                                  {"type": "suspend"}, {"name": "rest", "type": "deploy"}]}
    assert [s.name for s in parse_workflow(spec).steps] == ["apply-component-1", "suspend-2", "rest"]
    assert app_phase("succeeded", True) == "running"
    assert app_phase("succeeded", False) == "unhealthy"
    assert app_phase("suspending", True) == "workflowSuspending"
    assert app_phase("failed", True) == "workflowFailed"
    assert app_phase("terminated", True) == "workflowTerminated"
    assert app_phase("executing", True) == "runningWorkflow"


def test_health_rules_and_cue_status_programs():
    deploy = {"kind": "Deployment", "metadata": {"generation": 2}, "spec": {"replicas": 2},
              "status": {"observedGeneration": 2, "availableReplicas": 2, "updatedReplicas": 2}}
    assert resource_health(deploy) == (True, "Ready:2/2")
    assert resource_health({**deploy, "status": {"observedGeneration": 1}})[0] is False
    assert resource_health(None) == (False, "not found")
    job = {"kind": "Job", "spec": {}, "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    assert resource_health(job) == (True, "Complete")
    assert resource_health({"kind": "Service", "metadata": {}}) == (True, "Exists")
    status = {"healthPolicy": "isHealth: context.output.status.availableReplicas == parameter.want",
              "customStatus": 'message: "\\(context.output.status.availableReplicas) of \\(parameter.want)"'}
    names = {"name": "c", "appName": "a", "appRevision": "a-v1"}
    assert definition_status(status, names, deploy, {}, {"want": 2}) == (True, "2 of 2")
    assert definition_status(status, names, deploy, {}, {"want": 3}) == (False, "2 of 3")
    healthy, message = definition_status({"healthPolicy": "isHealth: context.output.nope.deeper"}, names, deploy, {},
                                         {})
    assert healthy is False and "health policy" in message
    assert definition_status(None, names, deploy, {}, {}) == (None, None)


def trait_defs(trait: str) -> Definitions:
    base = custom_defs(CONFIGMAP)
    base.traits["t"] = {"kind": "TraitDefinition", "metadata": {"name": "t", "uid": trait, "resourceVersion": "1"},
                        "spec": {"schematic": {"cue": {"template": trait}}}}
    return base


def render_with_trait(template: str, properties: dict | None = None) -> dict:
    trait = {"type": "t", **({"properties": properties} if properties is not None else {})}
    return render_app(app({"name": "c", "type": "custom", "traits": [trait]}), trait_defs(template), 1).components[0]


def test_trait_patch_strategies_and_context_output():
    # The trait reads the workload rendered so far through context.output.
    comp = render_with_trait('// +patchStrategy=jsonPatch\n'
                             'patch: operations: [{op: "add", path: "/data/b", value: context.output.data.a + parameter.x}]\n'
                             'parameter: x: *"2" | string')
    assert comp.workload["data"] == {"a": "1", "b": "12"}
    comp = render_with_trait('// +patchStrategy=jsonMergePatch\npatch: data: {a: null, c: "3"}')
    assert comp.workload["data"] == {"c": "3"}
    comp = render_with_trait('patch: data: b: parameter.b\nparameter: b: string', {"b": "x"})
    assert comp.workload["data"] == {"a": "1", "b": "x"}
    with pytest.raises(RenderError) as err:
        render_with_trait('// +patchStrategy=jsonPatch\npatch: operations: [{op: "replace", path: "/nope/x", value: 1}]')
    assert (err.value.reason, err.value.trait) == ("PatchError", "t")
    with pytest.raises(RenderError) as err:
        render_with_trait('patch: data: a: "2"')
    assert err.value.reason == "PatchError" and 'data.a: conflicting values "1" and "2"' in str(err.value)


def test_trait_outputs_and_errs():
    comp = render_with_trait('outputs: svc: {apiVersion: "v1", kind: "Service", metadata: name: "s"}')
    assert [o["kind"] for o in comp.outputs] == ["Service"]
    with pytest.raises(RenderError) as err:
        render_with_trait('errs: ["the trait refuses: \\(parameter.why)"]\nparameter: why: string', {"why": "no"})
    assert err.value.reason == "InvalidParameter" and "the trait refuses: no" in str(err.value)


def test_trait_patch_outputs_reach_earlier_outputs():
    defs = trait_defs('patchOutputs: extra: metadata: labels: patched: "yes"')
    defs.components["custom"]["spec"]["schematic"]["cue"]["template"] = (
        CONFIGMAP + 'outputs: extra: {apiVersion: "v1", kind: "Secret", metadata: name: "s"}')
    comp = render_app(app({"name": "c", "type": "custom", "traits": [{"type": "t"}]}), defs, 1).components[0]
    assert comp.outputs[0]["metadata"]["labels"]["patched"] == "yes"


def test_closed_parameters_refuse_unknown_fields_open_ones_take_them():
    open_defs = custom_defs('output: {apiVersion: "v1", kind: "ConfigMap", data: k: parameter.anything}\n'
                            "parameter: {...}")
    rendered = render_app(app({"name": "c", "type": "custom", "properties": {"anything": "v"}}), open_defs, 1)
    assert rendered.components[0].workload["data"] == {"k": "v"}
    closed = custom_defs(CONFIGMAP + "parameter: close({known?: string})")
    with pytest.raises(RenderError) as err:
        render_app(app({"name": "c", "type": "custom", "properties": {"other": "v"}}), closed, 1)
    assert (err.value.reason, err.value.field) == ("InvalidParameter", "other"), str(err.value)


def test_context_variables_and_namespace_default():
    template = '''output: {
    apiVersion: "v1", kind: "ConfigMap", metadata: namespace: "elsewhere"
    data: {rev: context.appRevision, num: "\\(context.appRevisionNum)", app: "\\(context.appName)/\\(context.namespace)"
        team: context.appLabels.team, comps: "\\(len(context.components))", cluster: context.cluster
        minor: "\\(context.clusterVersion.minor)", hash: context.revision}
}
outputs: extra: {apiVersion: "v1", kind: "Secret", metadata: name: "s"}'''
    a = app({"name": "c", "type": "custom"})
    a["metadata"]["labels"] = {"team": "blue"}
    defs = custom_defs(template)
    defs.cluster_version = {"major": "1", "minor": "29+", "gitVersion": "v1.29.2"}
    comp = render_app(a, defs, 4).components[0]
    data = comp.workload["data"]
    assert {k: data[k] for k in ("rev", "num", "app", "team", "comps", "cluster", "minor")} == {
        "rev": "demo-v4", "num": "4", "app": "demo/team", "team": "blue", "comps": "1", "cluster": "local",
        "minor": "29"}
    assert len(data["hash"]) == 16  # the component's own revision: a hash of its spec, as KubeVela's
    assert comp.workload["metadata"]["namespace"] == "elsewhere"  # only a default
    secret = comp.outputs[0]
    assert secret["metadata"]["namespace"] == "team" and secret["metadata"]["labels"][labels.APP_COMPONENT] == "c"


def test_applies_to_workloads_and_conflicts_with_are_noted_not_refused():
    # KubeVela renders a trait beyond its appliesToWorkloads (its own examples do so): noted in the condition.
    defs = trait_defs("patch: {}")
    defs.components["custom"]["spec"]["workload"] = {"definition": {"apiVersion": "v1", "kind": "ConfigMap"},
                                                    "type": "configmaps"}
    defs.traits["t"]["spec"]["appliesToWorkloads"] = ["deployments.apps"]
    comp = render_app(app({"name": "c", "type": "custom", "traits": [{"type": "t"}]}), defs, 1).components[0]
    assert comp.notes == ['component "c": trait "t" does not declare that it applies to component type "custom" '
                          "(appliesToWorkloads: deployments.apps)"]
    defs.traits["t"]["spec"]["appliesToWorkloads"] = ["configmaps"]
    defs.traits["t"]["metadata"]["resourceVersion"] = "2"  # a stored definition's change is a new version
    assert render_app(app({"name": "c", "type": "custom", "traits": [{"type": "t"}]}), defs, 1).components[0].notes == []
    defs.traits["u"] = {**defs.traits["t"], "metadata": {"name": "u"}, "spec": {
        **defs.traits["t"]["spec"], "conflictsWith": ["t"]}}
    comp = render_app(app({"name": "c", "type": "custom", "traits": [{"type": "t"}, {"type": "u"}]}), defs,
                      1).components[0]
    assert comp.notes == ['component "c": trait "u" conflicts with trait "t" (conflictsWith)']


def test_policy_definitions_validate_their_parameters():
    defs = custom_defs(CONFIGMAP)
    defs.policies["limits"] = {"kind": "PolicyDefinition", "metadata": {"name": "limits"}, "spec": {
        "schematic": {"cue": {"template": "parameter: max: int & <10"}}}}
    a = app({"name": "c", "type": "custom"})
    a["spec"]["policies"] = [{"name": "p", "type": "limits", "properties": {"max": 3}}]
    render_app(a, defs, 1)
    a["spec"]["policies"][0]["properties"]["max"] = 30
    with pytest.raises(RenderError) as err:
        render_app(a, defs, 1)
    assert err.value.field == "max" and 'policy definition "limits"' in str(err.value)


def test_policy_outputs_are_objects_of_the_app():
    defs = custom_defs(CONFIGMAP)
    defs.policies["quota"] = {"kind": "PolicyDefinition", "metadata": {"name": "quota", "uid": "p1"}, "spec": {
        "schematic": {"cue": {"template": """
parameter: cpu: *"2" | string
output: {apiVersion: "v1", kind: "ResourceQuota", spec: hard: cpu: parameter.cpu}
outputs: limits: {apiVersion: "v1", kind: "LimitRange", metadata: name: "\\(context.appName)-limits"}
"""}}}}
    defs.policies["plain"] = {"kind": "PolicyDefinition", "metadata": {"name": "plain", "uid": "p2"}, "spec": {
        "schematic": {"cue": {"template": "parameter: {}"}}}}
    a = app({"name": "c", "type": "custom"})
    a["spec"]["policies"] = [{"name": "team-quota", "type": "quota", "properties": {"cpu": "4"}},
                             {"name": "p", "type": "plain"}, {"name": "t", "type": "topology"}]
    quota, limits = render_app(a, defs, 3).policy_objects
    assert quota["spec"] == {"hard": {"cpu": "4"}}
    # named after the policy unless the template names it, in the app's namespace, labelled as KubeVela does
    assert (quota["metadata"]["name"], quota["metadata"]["namespace"]) == ("team-quota", "team")
    assert limits["metadata"]["name"] == "demo-limits"
    assert quota["metadata"]["labels"] == {labels.APP_NAME: "demo", labels.APP_NAMESPACE: "team",
                                           labels.APP_COMPONENT: "team-quota", labels.APP_REVISION: "demo-v3"}
    a["spec"]["policies"][0]["properties"]["cpu"] = 4
    with pytest.raises(RenderError) as err:
        render_app(a, defs, 3)
    assert err.value.field == "cpu" and err.value.component == "policy team-quota"


def test_ref_objects_placeholder_and_validation(defs):
    props = {"objects": [{"resource": "configmap", "name": "cfg"}]}
    comp = render_app(app({"name": "r", "type": "ref-objects", "properties": props}), defs, 1).components[0]
    assert comp.workload == {"__refObjects__": props}
    with pytest.raises(RenderError) as err:
        render_app(app({"name": "r", "type": "ref-objects", "properties": {"objects": "cfg"}}), defs, 1)
    assert err.value.reason == "InvalidParameter" and err.value.field == "objects"


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


def test_render_again_on_new_resource_version():
    tdefs = custom_defs(CONFIGMAP)
    render_app(app({"name": "c", "type": "custom"}), tdefs, 1)
    size = render_count()
    tdefs.components["custom"]["metadata"]["resourceVersion"] = "2"
    render_app(app({"name": "c", "type": "custom"}), tdefs, 1)
    assert render_count() == size + 1  # a new definition generation renders again


def test_unknown_container_name_is_an_invalid_parameter(defs):
    with pytest.raises(RenderError) as err:
        render_app(app({"name": "w", "type": "worker", "properties": {"image": "busybox"},
                        "traits": [{"type": "command", "properties": {"containerName": "nope", "addArgs": ["-x"]}}]}),
                   defs, 1)
    assert err.value.reason == "InvalidParameter" and "nope" in str(err.value)


def test_a_status_write_on_a_definition_is_not_a_new_revision():
    tdefs = custom_defs(CONFIGMAP)
    spec = {"components": [{"name": "c", "type": "custom"}]}
    tdefs.components["custom"]["metadata"].update(generation=1, resourceVersion="5")
    before = app_hash(spec, used_definitions(spec, tdefs))
    tdefs.components["custom"]["metadata"]["resourceVersion"] = "6"  # e.g. its TemplateValid condition written
    tdefs.components["custom"]["status"] = {"conditions": [{"type": "TemplateValid", "status": "True"}]}
    assert app_hash(spec, used_definitions(spec, tdefs)) == before  # no app becomes a new revision
    tdefs.components["custom"]["spec"]["schematic"]["cue"]["template"] = CONFIGMAP.replace('"1"', '"2"')
    tdefs.components["custom"]["metadata"].update(generation=2, resourceVersion="7")
    assert app_hash(spec, used_definitions(spec, tdefs)) != before
