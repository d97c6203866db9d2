"""The built-in workflow steps (velashard/definitions, type workflow-step) running in applications, one test per
family: objects, configs, exports, messages, suspend, other applications, jobs, restarts, deployments,
endpoints, groups, and the steps that are out of scope. Steps that talk to HTTP and SMTP servers are in
test_workflow_steps_http.py."""

from __future__ import annotations

import base64
import json

import yaml

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.kube import errors
from velashard.kube.resources import CONFIGMAPS, DEPLOYMENTS, JOBS, PODS, SECRETS, SERVICES, Resource
from tests.integration.helpers import eventually
from tests.integration.workflow_steps import (finished, kube, ns, phase_of, resume, run_app, server,  # noqa: F401
                                              status, step, webservice)


def configmap(name: str, ns: str, data: dict[str, str], **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "data": data}


def test_apply_and_read_objects_pass_values_on(kube, ns):
    run_app(kube, ns, "objects", [
        step("write", "apply-object", properties={"value": configmap("settings", ns, {"size": "large"})}),
        step("read", "read-object", properties={"apiVersion": "v1", "kind": "ConfigMap", "name": "settings",
                                                 "namespace": ns},
             outputs=[{"name": "size", "valueFrom": "output.$returns.value.data.size"},
                      {"name": "legacy", "valueFrom": "output.value.data.size"}]),
        step("show", "print-message-in-status", inputs=[{"from": "size", "parameterKey": "message"}]),
        step("copy", "export2config", inputs=[{"from": "legacy", "parameterKey": "data.copied"}],
             properties={"configName": "copy", "data": {}})])
    steps = finished(kube, ns, "objects")
    assert {n: s["phase"] for n, s in steps.items()} == {n: "succeeded" for n in ("write", "read", "show", "copy")}
    assert steps["show"]["message"] == "large"
    assert kube.get(CONFIGMAPS, "copy", ns)["data"] == {"copied": "large"}
    assert status(kube, ns, "objects")["status"] == "running"


def test_read_object_of_a_missing_object_and_its_default_namespace(kube, ns):
    kube.create(CONFIGMAPS, configmap("in-default", "default", {"k": "v"}))
    run_app(kube, ns, "reads", [
        step("default-ns", "read-object", properties={"apiVersion": "v1", "kind": "ConfigMap", "name": "in-default"},
             outputs=[{"name": "k", "valueFrom": "output.$returns.value.data.k"}]),
        step("missing", "read-object", properties={"apiVersion": "v1", "kind": "ConfigMap", "name": "nope",
                                                    "namespace": ns},
             outputs=[{"name": "err", "valueFrom": "output.$returns.err"}]),
        step("show", "print-message-in-status", inputs=[{"from": "err", "parameterKey": "message"}])])
    steps = finished(kube, ns, "reads")
    assert steps["default-ns"]["phase"] == "succeeded"  # KubeVela's default namespace is "default"
    assert "not found" in steps["show"]["message"]  # a failed read says why in $returns.err


def test_config_steps_create_read_list_and_delete(kube, ns):
    # a config template of the app's own namespace, named as "<namespace>/<name>"
    kube.create(CONFIGMAPS, configmap("config-template-db", ns, {"template": "parameter: {host: string}\n"}))
    run_app(kube, ns, "configs", [
        step("create", "create-config", properties={"name": "db", "template": f"{ns}/db",
                                                      "config": {"host": "db.example.com"}}),
        step("create-plain", "create-config", properties={"name": "plain", "config": {"level": 3}}),
        step("read", "read-config", properties={"name": "db"},
             outputs=[{"name": "host", "valueFrom": "output.$returns.config.host"}]),
        step("list", "list-config", properties={"template": f"{ns}/db"},
             outputs=[{"name": "listed",
                       "valueFrom": '"\\(len(output.$returns.configs)) \\(output.$returns.configs[0].name)"'}]),
        step("record", "export2config", inputs=[{"from": "host", "parameterKey": "data.host"},
                                                 {"from": "listed", "parameterKey": "data.listed"}],
             properties={"configName": "seen", "data": {}}),
        step("delete", "delete-config", properties={"name": "plain"})])
    steps = finished(kube, ns, "configs")
    assert all(s["phase"] == "succeeded" for s in steps.values()), steps
    assert kube.get(CONFIGMAPS, "seen", ns)["data"] == {"host": "db.example.com", "listed": "1 db"}
    secret = kube.get(SECRETS, "db", ns)
    assert secret["metadata"]["labels"]["config.oam.dev/type"] == "db"
    assert json.loads(base64.b64decode(secret["data"]["input-properties"])) == {"host": "db.example.com"}
    try:
        kube.get(SECRETS, "plain", ns)
        raise AssertionError("delete-config left the config")
    except errors.NotFound:
        pass


def test_export2config_and_export2secret(kube, ns):
    run_app(kube, ns, "exports", [
        step("cm", "export2config", properties={"configName": "out", "data": {"a": "1", "b": "two"}}),
        step("plain", "export2secret", properties={"secretName": "token", "data": {"token": "s3cret"}}),
        step("typed", "export2secret", properties={"secretName": "tls", "type": "kubernetes.io/tls",
                                                    "data": {"tls.crt": "c", "tls.key": "k"}}),
        step("registry", "export2secret", properties={
            "secretName": "pull", "kind": "docker-registry",
            "dockerRegistry": {"username": "me", "password": "pw", "server": "registry.example.com"}})])
    steps = finished(kube, ns, "exports")
    assert all(s["phase"] == "succeeded" for s in steps.values()), steps
    assert kube.get(CONFIGMAPS, "out", ns)["data"] == {"a": "1", "b": "two"}
    assert base64.b64decode(kube.get(SECRETS, "token", ns)["data"]["token"]) == b"s3cret"
    assert kube.get(SECRETS, "tls", ns)["type"] == "kubernetes.io/tls"
    pull = kube.get(SECRETS, "pull", ns)
    assert pull["type"] == "kubernetes.io/dockerconfigjson"
    auths = json.loads(base64.b64decode(pull["data"][".dockerconfigjson"]))["auths"]
    assert auths == {"registry.example.com": {"username": "me", "password": "pw",
                                              "auth": base64.b64encode(b"me:pw").decode()}}


def test_suspend_with_duration_resumes_by_itself_and_without_waits_for_resume(kube, ns, server):
    run_app(kube, ns, "pauses", [
        step("short", "suspend", properties={"duration": "2s", "message": "a short break"}),
        step("approval", "suspend"),
        step("after", "print-message-in-status", properties={"message": "done"})])
    assert phase_of(kube, ns, "pauses", "short", "suspending")["message"] == "a short break"
    phase_of(kube, ns, "pauses", "approval", "suspending", timeout=20)
    assert status(kube, ns, "pauses")["status"] == "workflowSuspending"
    resume(server, ns, "pauses")
    steps = finished(kube, ns, "pauses")
    assert [steps[n]["phase"] for n in ("short", "approval", "after")] == ["succeeded"] * 3


def test_depends_on_app_waits_for_an_app_and_creates_one_from_its_configmap(kube, ns):
    kube.create(CONFIGMAPS, configmap("from-cm", ns, {"application": yaml.safe_dump({
        "apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": {"name": "from-cm", "namespace": ns},
        "spec": {"components": [webservice("cm-web")]}})}))
    run_app(kube, ns, "dependent", [
        step("existing", "depends-on-app", properties={"name": "later", "namespace": ns}),
        step("created", "depends-on-app", properties={"name": "from-cm", "namespace": ns})])
    waiting = phase_of(kube, ns, "dependent", "existing", "running")
    assert f"{ns}/later" in waiting["message"]
    run_app(kube, ns, "later", [step("hello", "print-message-in-status", properties={"message": "hi"})])
    steps = finished(kube, ns, "dependent", timeout=40)
    assert steps["existing"]["phase"] == "succeeded" and steps["created"]["phase"] == "succeeded"
    assert status(kube, ns, "from-cm")["status"] == "running"


def test_depends_on_app_waits_for_an_app_or_configmap_that_never_comes_until_its_timeout(kube, ns):
    run_app(kube, ns, "orphan", [step("nothing", "depends-on-app", timeout="3s",
                                      properties={"name": "ghost", "namespace": ns})])
    waiting = phase_of(kube, ns, "orphan", "nothing", "running")
    assert f"for a ConfigMap {ns}/ghost" in waiting["message"]
    steps = finished(kube, ns, "orphan")
    assert steps["nothing"]["phase"] == "failed" and steps["nothing"]["reason"] == "Timeout"


def test_clean_jobs_deletes_matching_jobs_and_pods_only(kube, ns):
    def job(name: str, **labels: str) -> dict:
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns, "labels": labels},
                "spec": {"template": {"spec": {"restartPolicy": "Never",
                                               "containers": [{"name": "c", "image": "busybox"}]}}}}
    kube.create(JOBS, job("chosen", batch="old"))
    kube.create(JOBS, job("kept", batch="new"))
    kube.create(JOBS, job("by-app", **{"workflow.oam.dev/name": "cleaner"}))
    kube.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "chosen-pod", "namespace": ns,
                                                                      "labels": {"batch": "old"}},
                       "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    run_app(kube, ns, "cleaner", [step("selected", "clean-jobs", properties={"labelselector": {"batch": "old"}}),
                                  step("default", "clean-jobs")])
    steps = finished(kube, ns, "cleaner")
    assert all(s["phase"] == "succeeded" for s in steps.values()), steps
    eventually(lambda: {j["metadata"]["name"] for j in kube.list(JOBS, ns)["items"]
                        if not j["metadata"].get("deletionTimestamp")} == {"kept"})
    eventually(lambda: not [p for p in kube.list(PODS, ns)["items"] if p["metadata"]["name"] == "chosen-pod"
                            and not p["metadata"].get("deletionTimestamp")])


def test_restart_workflow_annotates_its_own_app_as_its_author(kube, ns):
    run_app(kube, ns, "nightly", [step("again", "restart-workflow", properties={"every": "2d"})])
    assert finished(kube, ns, "nightly", timeout=40)["again"]["phase"] == "succeeded"
    app = kube.get(APPLICATIONS, "nightly", ns)
    assert app["metadata"]["annotations"]["app.oam.dev/restart-workflow"] == "172800s"
    assert not (app["metadata"].get("labels") or {}).get(labels.APP_NAME), "the app is not one of its own objects"
    assert not kube.list(JOBS, "vela-system")["items"]

    run_app(kube, ns, "soon", [step("again", "restart-workflow", properties={"after": "2s"})])
    first = finished(kube, ns, "soon", timeout=40)["again"]
    assert first["phase"] == "succeeded"
    # the annotation names a time two seconds after the step; once it has come the finished run starts again
    eventually(lambda: finished(kube, ns, "soon")["again"]["firstExecuteTime"] != first["firstExecuteTime"],
               timeout=30)
    eventually(lambda: "app.oam.dev/restart-workflow" not in
               (kube.get(APPLICATIONS, "soon", ns)["metadata"].get("annotations") or {}), timeout=30)

    run_app(kube, ns, "confused", [step("both", "restart-workflow", properties={"every": "1h", "after": "5m"})])
    steps = finished(kube, ns, "confused")
    assert steps["both"]["phase"] == "failed" and "exactly one of at, after and every" in steps["both"]["message"]


def test_apply_deployment_waits_until_ready(kube, ns):
    run_app(kube, ns, "deployer", [step("api", "apply-deployment", properties={
        "image": "nginx:1.25", "replicas": 2, "cmd": ["nginx", "-g", "daemon off;"]})])
    assert finished(kube, ns, "deployer", timeout=40)["api"]["phase"] == "succeeded"
    deploy = kube.get(DEPLOYMENTS, "api", ns)
    assert deploy["spec"]["replicas"] == 2 and deploy["status"]["readyReplicas"] == 2
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["nginx", "-g", "daemon off;"]
    assert deploy["spec"]["selector"]["matchLabels"] == {"workflow.oam.dev/step-name": "deployer-api"}


def test_endpoints_collected_and_exported_as_a_service_and_data(kube, ns):
    web = webservice(ports=[{"port": 8080, "expose": True}])
    run_app(kube, ns, "endpoints", [
        step("deploy", "deploy"),
        step("collect", "collect-service-endpoints", outputs=[
            {"name": "host", "valueFrom": "value.endpoint.host"}, {"name": "url", "valueFrom": "value.url"}]),
        step("data", "export-data", inputs=[{"from": "url", "parameterKey": "data.url"}],
             properties={"name": "web-address", "data": {}}),
        step("service", "export-service", properties={"name": "elsewhere", "ip": "10.1.2.3", "port": 80,
                                                       "targetPort": 8080})], components=[web])
    steps = finished(kube, ns, "endpoints", timeout=40)
    assert all(s["phase"] == "succeeded" for s in steps.values()), steps
    assert kube.get(CONFIGMAPS, "web-address", ns)["data"] == {"url": f"http://web.{ns}:8080"}
    service = kube.get(SERVICES, "elsewhere", ns)
    assert service["spec"]["ports"][0]["targetPort"] == 8080


def test_export_data_to_a_remote_cluster_says_it_is_out_of_scope(kube, ns):
    run_app(kube, ns, "faraway", [step("data", "export-data", properties={"topology": "far", "data": {"a": "b"}})],
            policies=[{"name": "far", "type": "topology", "properties": {"clusters": ["cluster-b"]}}])
    # an error in an action is retried (KubeVela's backoff) before the workflow gives up: the step says it at once
    assert "cluster-b" in phase_of(kube, ns, "faraway", "data", "failed")["message"]


def test_step_group_runs_its_sub_steps_and_deploy_waits_for_approval(kube, ns, server):
    run_app(kube, ns, "grouped", [
        step("both", "step-group", subSteps=[
            step("one", "apply-component", properties={"component": "one"}),
            step("two", "apply-component", properties={"component": "two"})]),
        step("rest", "deploy", properties={"auto": False})],
        components=[webservice("one"), webservice("two")])
    phase_of(kube, ns, "grouped", "rest", "suspending", timeout=40)
    assert kube.get(DEPLOYMENTS, "one", ns) and kube.get(DEPLOYMENTS, "two", ns)
    resume(server, ns, "grouped")
    steps = finished(kube, ns, "grouped", timeout=40)
    assert [steps[n]["phase"] for n in ("both", "one", "two", "rest")] == ["succeeded"] * 4
    assert status(kube, ns, "grouped")["status"] == "running"


def test_generate_jdbc_connection_from_a_database_secret(kube, ns):
    fields = {"DB_HOST": "db.local", "DB_PORT": "3306", "DB_NAME": "shop", "DB_USER": "app", "DB_PASSWORD": "pw"}
    kube.create(SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db-conn", "namespace": ns},
                          "stringData": fields})
    run_app(kube, ns, "jdbc", [
        step("jdbc", "generate-jdbc-connection", properties={"name": "db-conn"},
             outputs=[{"name": "env", "valueFrom": "env"}]),
        step("keep", "export2config", inputs=[{"from": "env", "parameterKey": "data.env"}],
             properties={"configName": "jdbc-env", "data": {}})])
    steps = finished(kube, ns, "jdbc")
    assert steps["jdbc"]["phase"] == "succeeded", steps


def test_vela_cli_runs_a_job_as_the_named_service_account(kube, ns):
    run_app(kube, ns, "cli", [step("list", "vela-cli", properties={"command": ["vela", "ls"],
                                                                   "serviceAccountName": "default"})])
    assert finished(kube, ns, "cli", timeout=40)["list"]["phase"] == "succeeded"
    (job,) = [j for j in kube.list(JOBS, ns)["items"] if j["metadata"]["name"].startswith("cli-list-")]
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccount"] == "default" and pod["containers"][0]["command"] == ["vela", "ls"]


def test_steps_out_of_scope_fail_saying_so(kube, ns):
    run_app(kube, ns, "clouds", [
        step("tf", "apply-terraform-config", properties={"source": {"hcl": "x"}, "variable": {}}),
        step("after", "print-message-in-status", properties={"message": "never"})])
    steps = finished(kube, ns, "clouds")
    assert steps["tf"]["phase"] == "failed" and "out of scope" in steps["tf"]["message"]
    assert steps["after"]["phase"] == "skipped"


def test_steps_act_as_the_apps_author_and_no_further(kube, ns):
    """A tenant allowed ConfigMaps in its own namespace only: read-object's default namespace ("default", as
    KubeVela's) is not the tenant's, so the read is refused, failing its step, and nothing of the object leaks;
    a write elsewhere fails its step; the same write at home succeeds."""
    author = "tenant@example.com"
    kube.create(Resource("rbac.authorization.k8s.io", "v1", "roles", "Role"), {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "configmaps"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create", "update",
                                                                           "patch", "delete"]}]}, ns)
    kube.create(Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"), {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "tenant"},
        "subjects": [{"kind": "User", "name": author}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "configmaps"}}, ns)
    kube.create(CONFIGMAPS, configmap("platform-settings", "default", {"token": "not-for-tenants"}))
    kube.create(APPLICATIONS, {
        "apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
        "metadata": {"name": "tenant", "namespace": ns, "annotations": {labels.APP_USERNAME: author}},
        "spec": {"components": [], "workflow": {"mode": {"steps": "DAG"}, "steps": [
            step("peek", "read-object", properties={"apiVersion": "v1", "kind": "ConfigMap",
                                                    "name": "platform-settings"},
                 outputs=[{"name": "token", "valueFrom": "output.$returns.value.data.token"}]),
            step("home", "export2config", properties={"configName": "seen", "data": {"k": "v"}}),
            step("away", "export2config", properties={"configName": "planted", "namespace": "default",
                                                      "data": {"a": "b"}})]}}})
    assert "forbidden" in phase_of(kube, ns, "tenant", "away", "failed")["message"].lower()
    assert "forbidden" in phase_of(kube, ns, "tenant", "peek", "failed")["message"].lower()
    phase_of(kube, ns, "tenant", "home", "succeeded")
    assert kube.get(CONFIGMAPS, "seen", ns)["data"] == {"k": "v"}
    assert "not-for-tenants" not in json.dumps(status(kube, ns, "tenant"))
    try:
        kube.get(CONFIGMAPS, "planted", "default")
        raise AssertionError("a tenant's step wrote outside its namespace")
    except errors.NotFound:
        pass
