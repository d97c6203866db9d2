"""The steps KubeVela's chart still installs though its sources call them deprecated (apply-application,
apply-application-in-parallel, apply-remaining, deploy2env, deploy2runtime), the replication policy on the local
cluster, kubevela/workflow's read-app and apply-app (vela/op) creating Applications as the author, and
restart-workflow with `after`."""

from __future__ import annotations

from velashard.apis.oam import APPLICATIONS, COMPONENT_DEFINITIONS, SYSTEM_NAMESPACE, WORKFLOW_STEP_DEFINITIONS
from velashard.kube import errors
from velashard.kube.resources import DEPLOYMENTS, NAMESPACES
from tests.integration.helpers import eventually
from tests.integration.workflow_steps import (finished, kube, ns, phase_of, resume, run_app, server,  # noqa: F401
                                              status, step, webservice)


def deployments(kube, ns: str) -> set[str]:
    return {d["metadata"]["name"] for d in kube.list(DEPLOYMENTS, ns)["items"]
            if not d["metadata"].get("deletionTimestamp")}


def test_apply_application_deploys_every_component_then_waits_for_approval(kube, ns, server):
    run_app(kube, ns, "whole", [step("apply-app", "apply-application"), step("approval", "suspend")],
            components=[webservice("one"), webservice("two")])
    eventually(lambda: (status(kube, ns, "whole").get("workflow") or {}).get("suspend"), timeout=40)
    assert deployments(kube, ns) == {"one", "two"}
    resume(server, ns, "whole")
    assert finished(kube, ns, "whole", timeout=40)["approval"]["phase"] == "succeeded"
    assert status(kube, ns, "whole")["status"] == "running"


def test_apply_remaining_leaves_the_exceptions_to_other_steps(kube, ns):
    run_app(kube, ns, "remaining", [
        step("first", "apply-component", properties={"component": "server1"}),
        step("rest", "apply-remaining", properties={"exceptions": ["server1"]}),
        step("parallel", "apply-application-in-parallel")],
        components=[webservice("server1"), webservice("server2"), webservice("server3")])
    steps = finished(kube, ns, "remaining", timeout=40)
    assert all(s["phase"] == "succeeded" for s in steps.values()), steps
    assert deployments(kube, ns) == {"server1", "server2", "server3"}


def test_deploy2runtime_and_deploy2env_on_the_local_cluster(kube, ns):
    target = f"{ns}-prod"
    kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": target}})
    envs = {"name": "envs", "type": "env-binding", "properties": {"envs": [
        {"name": "prod", "placement": {"clusterSelector": {"name": "local"}, "namespaceSelector": {"name": target}},
         "selector": {"components": ["api"]},
         "patch": {"components": [{"name": "api", "type": "webservice", "properties": {"image": "nginx:1.26"}}]}},
        {"name": "far", "placement": {"clusterSelector": {"name": "cluster-b"}}}]}}
    run_app(kube, ns, "runtime", [
        step("everywhere", "deploy2runtime"),
        step("prod", "deploy2env", properties={"env": "prod"})],
        components=[webservice("api"), webservice("worker")], policies=[envs])
    run_app(kube, ns, "far", [step("far", "deploy2env", properties={"env": "far", "policy": "envs"})],
            components=[webservice("api")], policies=[envs])
    steps = finished(kube, ns, "runtime", timeout=40)
    assert steps["everywhere"]["phase"] == steps["prod"]["phase"] == "succeeded", steps
    assert deployments(kube, ns) == {"api", "worker"}
    assert deployments(kube, target) == {"api"}  # the env's selector and namespace
    image = kube.get(DEPLOYMENTS, "api", target)["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "nginx:1.26"
    assert 'cluster "cluster-b"' in phase_of(kube, ns, "far", "far", "failed")["message"]
    conditions = {c["type"]: c for c in status(kube, ns, "runtime")["conditions"]}
    assert "PoliciesSupported" not in conditions  # env-binding acts in deploy2env


REPLICA_WEB = '''
output: {
	apiVersion: "apps/v1"
	kind:       "Deployment"
	metadata: name: [if context.replicaKey != "" {context.name + "-" + context.replicaKey}, context.name][0]
	metadata: labels: {if context.replicaKey != "" {"app.oam.dev/replicaKey": context.replicaKey}}
	spec: {
		selector: matchLabels: {"app.oam.dev/component": context.name, "rk": context.replicaKey}
		template: metadata: labels: {"app.oam.dev/component": context.name, "rk": context.replicaKey}
		template: spec: containers: [{name: "main", image: parameter.image}]
	}
}
parameter: image: string
'''


def test_replication_deploys_a_copy_per_key_and_collects_a_key_that_goes(kube, ns):
    kube.create(COMPONENT_DEFINITIONS, {
        "apiVersion": "core.oam.dev/v1beta1", "kind": "ComponentDefinition",
        "metadata": {"name": "replica-web", "namespace": ns},
        "spec": {"workload": {"definition": {"apiVersion": "apps/v1", "kind": "Deployment"}},
                 "schematic": {"cue": {"template": REPLICA_WEB}}}})
    policies = [
        {"name": "rep-only", "type": "override", "properties": {"selector": ["hello-rep"]}},
        {"name": "no-rep", "type": "override", "properties": {"selector": ["hello-no-rep"]}},
        {"name": "here", "type": "topology", "properties": {"clusters": ["local"]}},
        {"name": "keys", "type": "replication", "properties": {"keys": ["beijing", "hangzhou"],
                                                               "selector": ["hello-rep"]}}]
    components = [{"name": "hello-rep", "type": "replica-web", "properties": {"image": "nginx:1.25"}},
                  {"name": "hello-no-rep", "type": "replica-web", "properties": {"image": "nginx:1.25"}}]
    run_app(kube, ns, "replicated", [
        step("with-rep", "deploy", properties={"policies": ["rep-only", "here", "keys"]}),
        step("without-rep", "deploy", properties={"policies": ["no-rep", "here"]})],
        components=components, policies=policies)
    steps = finished(kube, ns, "replicated", timeout=40)
    assert all(s["phase"] == "succeeded" for s in steps.values()), steps
    assert deployments(kube, ns) == {"hello-rep-beijing", "hello-rep-hangzhou", "hello-no-rep"}
    assert kube.get(DEPLOYMENTS, "hello-rep-beijing", ns)["metadata"]["labels"]["app.oam.dev/replicaKey"] == \
        "beijing"
    eventually(lambda: status(kube, ns, "replicated")["status"] == "running", timeout=30)
    assert "PoliciesSupported" not in {c["type"] for c in status(kube, ns, "replicated")["conditions"]}

    app = kube.get(APPLICATIONS, "replicated", ns)
    app["spec"]["policies"][3]["properties"]["keys"] = ["beijing"]
    kube.update(APPLICATIONS, app)
    eventually(lambda: deployments(kube, ns) == {"hello-rep-beijing", "hello-no-rep"}, timeout=40)
    eventually(lambda: status(kube, ns, "replicated").get("status") == "running", timeout=30)


def _workflow_definitions(kube) -> None:
    """kubevela/workflow's read-app and apply-app, written here as their vela-workflow chart has them (vela/op)."""
    read_app = '''import (
	"vela/op"
	"strings"
)
read: op.#Read & {value: {apiVersion: "core.oam.dev/v1beta1", kind: "Application",
	metadata: {name: parameter.name, namespace: parameter.namespace}}}
message: op.#Steps & {
	if read.err != _|_ {
		if strings.Contains(read.err, "not found") {
			msg: op.#Message & {message: "Application not found"}
		}
	}
}
parameter: {
	name:      string
	namespace: *context.namespace | string
}
'''
    apply_app = '''import (
	"vela/op"
)
app: op.#Steps & {
	if parameter.data != _|_ {
		apply: op.#Apply & {value: parameter.data}
	}
}
wait: op.#ConditionalWait & {
	continue: app.apply.value.status.status == "running" && app.apply.value.status.observedGeneration == app.apply.value.metadata.generation
}
parameter: close({data?: {...}})
'''
    for name, text in (("read-app", read_app), ("apply-app", apply_app)):
        body = {"apiVersion": "core.oam.dev/v1beta1", "kind": "WorkflowStepDefinition",
                "metadata": {"name": name, "namespace": SYSTEM_NAMESPACE},
                "spec": {"schematic": {"cue": {"template": text}}}}
        try:
            kube.create(WORKFLOW_STEP_DEFINITIONS, body)
        except errors.AlreadyExists:
            pass


def test_apply_app_creates_an_application_that_runs_as_the_author(kube, ns):
    _workflow_definitions(kube)
    child = {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
             "metadata": {"name": "child", "namespace": ns},
             "spec": {"components": [webservice("express-server")]}}
    run_app(kube, ns, "parent", [
        step("check", "read-app", properties={"name": "child"}),
        step("create", "apply-app", if_='status.check.message == "Application not found"',
             properties={"data": child})])
    steps = finished(kube, ns, "parent", timeout=60)
    assert steps["check"]["message"] == "Application not found"
    assert steps["create"]["phase"] == "succeeded", steps
    created = kube.get(APPLICATIONS, "child", ns)
    assert created["status"]["status"] == "running"
    assert kube.get(DEPLOYMENTS, "express-server", ns)


def test_restart_workflow_after_a_while_writes_one_time(kube, ns):
    run_app(kube, ns, "later", [step("apply", "apply-component", properties={"component": "web"}),
                                step("again", "restart-workflow", properties={"after": "1h"})],
            components=[webservice("web")])
    steps = finished(kube, ns, "later", timeout=40)
    assert steps["again"]["phase"] == "succeeded", steps
    when = kube.get(APPLICATIONS, "later", ns)["metadata"]["annotations"]["app.oam.dev/restart-workflow"]
    started = steps["again"]["firstExecuteTime"]
    assert when > started and when[:4] in (started[:4], str(int(started[:4]) + 1))
    assert status(kube, ns, "later")["status"] == "running"
