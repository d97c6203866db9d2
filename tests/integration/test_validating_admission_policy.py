"""ValidatingAdmissionPolicy through the official Python client (AdmissionregistrationV1Api) and kubectl.

Each test gets a private API server: policies are cluster-wide.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap

import pytest
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from tests.integration.helpers import eventually, raw_request, status_of

CM_RULE = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}


@pytest.fixture
def cluster(make_apiserver):
    server = make_apiserver()
    api = config.new_client_from_config(config_file=server.kubeconfig)
    yield server, api
    api.close()


def as_tenant(server, api, user: str = "alice"):
    """A client for `user`, who may edit config maps and applications (RBAC, once the server enforces it)."""
    rbac = client.RbacAuthorizationV1Api(api)
    rbac.create_cluster_role({"metadata": {"name": f"{user}-tenant"}, "rules": [
        {"apiGroups": ["", "core.oam.dev"], "resources": ["configmaps", "applications"],
         "verbs": ["get", "list", "create", "update", "patch", "delete"]}]})
    rbac.create_cluster_role_binding({"metadata": {"name": f"{user}-tenant"},
                                      "subjects": [{"kind": "User", "name": user,
                                                    "apiGroup": "rbac.authorization.k8s.io"}],
                                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                  "name": f"{user}-tenant"}})
    return config.new_client_from_config(config_file=server.write_kubeconfig(server.kubeconfig + f"-{user}",
                                                                             user=user))


def policy(name: str, validations: list[dict], rules: list[dict] | None = None, **spec) -> dict:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {"matchConstraints": {"resourceRules": rules or [CM_RULE]}, "validations": validations, **spec}}


def binding(name: str, policy_name: str, actions: list[str] | None = None, **spec) -> dict:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": policy_name, "validationActions": ["Deny"] if actions is None else actions,
                     **spec}}


def install(api, pol: dict, bind: dict | None = None) -> None:
    reg = client.AdmissionregistrationV1Api(api)
    reg.create_validating_admission_policy(pol)
    reg.create_validating_admission_policy_binding(bind or binding(pol["metadata"]["name"], pol["metadata"]["name"]))


def cm(name: str, data: dict | None = None, labels: dict | None = None, namespace: str = "default") -> dict:
    return {"metadata": {"name": name, "namespace": namespace, **({"labels": labels} if labels else {})},
            "data": data or {"a": "1"}}


def create_cm(api, body: dict, namespace: str = "default"):
    return client.CoreV1Api(api).create_namespaced_config_map(namespace, body)


def denied(api, body: dict, namespace: str = "default") -> dict:
    with pytest.raises(ApiException) as err:
        create_cm(api, body, namespace)
    return status_of(err.value)


def observed_generation(reg, name: str) -> int | None:
    """What the type checker has seen; None until it wrote a status."""
    status = reg.read_validating_admission_policy_status(name).status
    return status.observed_generation if status is not None else None


def test_crud_watch_and_status(cluster):
    _, api = cluster
    reg = client.AdmissionregistrationV1Api(api)
    made = reg.create_validating_admission_policy(policy("p", [{"expression": "true"}]))
    assert made.metadata.generation == 1 and made.spec.validations[0].expression == "true"
    assert made.spec.failure_policy == "Fail" and made.spec.match_constraints.match_policy == "Equivalent"
    assert made.spec.match_constraints.resource_rules[0].scope == "*"  # kube-apiserver's defaults
    eventually(lambda: observed_generation(reg, "p") == 1)
    since = reg.read_validating_admission_policy("p").metadata.resource_version
    stream = watch.Watch().stream(reg.list_validating_admission_policy, resource_version=since, timeout_seconds=5)
    reg.patch_validating_admission_policy("p", {"spec": {"validations": [{"expression": "1 < 2"}]}})
    event = next(stream)
    assert event["type"] == "MODIFIED" and event["object"].metadata.generation == 2
    # The status kube-apiserver's policy controller writes: the generation it has seen.
    eventually(lambda: observed_generation(reg, "p") == 2)
    reg.create_validating_admission_policy_binding(binding("b", "p", ["Warn", "Audit"]))
    assert [b.metadata.name for b in reg.list_validating_admission_policy_binding().items] == ["b"]
    reg.delete_validating_admission_policy_binding("b")
    reg.delete_validating_admission_policy("p")
    assert reg.list_validating_admission_policy().items == []


@pytest.mark.parametrize("body,field,fragment", [
    (policy("x", [{"expression": "notAFunction(object)"}]), "spec.validations[0].expression",
     "undeclared reference to 'notAFunction'"),
    (policy("x", [{"expression": "object.metadata.name.noSuchMethod()"}]), "spec.validations[0].expression",
     "undeclared reference to 'noSuchMethod'"),
    (policy("x", [{"expression": "'a'"}]), "spec.validations[0].expression", "must evaluate to bool"),
    (policy("x", [{"expression": "authorizer.group('').resource('pods').check('get').allowed()"}]),
     "spec.validations[0].expression", "authorizer library is not supported"),
    (policy("x", [{"expression": "true", "messageExpression": "1"}]), "spec.validations[0].messageExpression",
     "must evaluate to string"),
    (policy("x", [{"expression": "variables.later"}], variables=[{"name": "first", "expression": "1"}]),
     "spec.validations[0].expression", "undefined field 'later'"),
    (policy("x", [{"expression": "true"}], paramKind={"apiVersion": "v1", "kind": "ConfigMap"}), "spec.paramKind",
     "not supported"),
    (policy("x", [{"expression": "true", "reason": "Teapot"}]), "spec.validations[0].reason", "Unsupported value"),
    (policy("x", []), "spec.validations", "at least one item"),
    (binding("x", "p", ["Deny", "Warn"]), "spec.validationActions", "must not contain both Deny and Warn"),
    (binding("x", "p", []), "spec.validationActions", "Required value"),
    (binding("x", "p", paramRef={"name": "cfg"}), "spec.paramRef", "not supported"),
])
def test_invalid_policies_and_bindings_are_refused(cluster, body, field, fragment):
    _, api = cluster
    reg = client.AdmissionregistrationV1Api(api)
    with pytest.raises(ApiException) as err:
        if body["kind"] == "ValidatingAdmissionPolicy":
            reg.create_validating_admission_policy(body)
        else:
            reg.create_validating_admission_policy_binding(body)
    status = status_of(err.value)
    assert err.value.status == 422 and status["reason"] == "Invalid"
    cause = next(c for c in status["details"]["causes"] if c["field"] == field)
    assert fragment in cause["message"], cause


def test_deny_message_reason_and_message_expression(cluster):
    _, api = cluster
    install(api, policy("small", [
        {"expression": "size(object.data) < 3", "messageExpression": "'too many keys: ' + string(size(object.data))"},
        {"expression": "!('secret' in object.data)", "message": "no secrets in config maps", "reason": "Forbidden"},
        {"expression": "!has(object.metadata.labels) || !('bad' in object.metadata.labels)"}]))
    create_cm(api, cm("fine"))
    status = denied(api, cm("big", {"a": "1", "b": "2", "c": "3"}))
    text = "ValidatingAdmissionPolicy 'small' with binding 'small' denied request: too many keys: 3"
    assert status["code"] == 422 and status["reason"] == "Invalid"
    assert status["message"] == f'configmaps "big" is forbidden: {text}'
    assert status["details"] == {"name": "big", "kind": "configmaps", "causes": [{"message": text}]}
    status = denied(api, cm("leak", {"secret": "x"}))
    assert status["code"] == 403 and status["reason"] == "Forbidden" and status["message"].endswith(
        "denied request: no secrets in config maps")
    status = denied(api, cm("labelled", labels={"bad": "yes"}))
    assert status["message"].endswith(
        "denied request: failed expression: !has(object.metadata.labels) || !('bad' in object.metadata.labels)")


def test_match_constraints_and_binding_match_resources(cluster):
    _, api = cluster
    core = client.CoreV1Api(api)
    for name, labels in (("team-a", {"team": "a"}), ("team-b", {"team": "b"})):
        core.create_namespace({"metadata": {"name": name, "labels": labels}})
    install(api, policy("no-x", [{"expression": "!('x' in object.data)"}],
                        matchConstraints={
                            "resourceRules": [{**CM_RULE, "operations": ["UPDATE"]},
                                              {**CM_RULE, "operations": ["CREATE"], "resourceNames": ["named"]}],
                            "namespaceSelector": {"matchLabels": {"team": "a"}},
                            "objectSelector": {"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]},
                            "excludeResourceRules": [{**CM_RULE, "resourceNames": ["excluded"]}]}))
    x = {"x": "1"}
    create_cm(api, cm("other", x, namespace="team-a"), "team-a")  # CREATE matches only resourceNames [named]
    assert denied(api, cm("named", x, namespace="team-a"), "team-a")["code"] == 422
    create_cm(api, cm("named", x, namespace="team-b"), "team-b")  # namespaceSelector
    create_cm(api, cm("skipped", x, labels={"skip": "1"}, namespace="team-a"), "team-a")  # objectSelector
    with pytest.raises(ApiException) as err:  # UPDATE matches any name
        core.patch_namespaced_config_map("other", "team-a", {"data": {"y": "2"}})
    assert err.value.status == 422
    create_cm(api, cm("excluded", {"a": "1"}, namespace="team-a"), "team-a")
    core.patch_namespaced_config_map("excluded", "team-a", {"data": {"x": "2"}})  # excludeResourceRules
    reg = client.AdmissionregistrationV1Api(api)
    reg.patch_validating_admission_policy_binding("no-x", {"spec": {"matchResources": {
        "objectSelector": {"matchLabels": {"strict": "yes"}}}}})
    core.patch_namespaced_config_map("other", "team-a", {"data": {"y": "2"}})  # binding narrows the match
    create_cm(api, cm("strict", {"a": "1"}, labels={"strict": "yes"}, namespace="team-a"), "team-a")
    with pytest.raises(ApiException):
        core.patch_namespaced_config_map("strict", "team-a", {"data": {"x": "2"}})


def test_variables_request_old_object_and_namespace_object(cluster):
    server, api = cluster
    client.CoreV1Api(api).create_namespace({"metadata": {"name": "frozen", "labels": {"freeze": "true"}}})
    install(api, policy("rules", [
        {"expression": "!variables.frozen || request.userInfo.username == 'admin'",
         "messageExpression": "'namespace ' + namespaceObject.metadata.name + ' is frozen for ' + "
                              "request.userInfo.username + ' in groups ' + request.userInfo.groups.join(',')"},
        {"expression": "oldObject == null || oldObject.data.a == object.data.a",
         "messageExpression": "'data.a is immutable (' + request.operation + ')'"}],
        variables=[{"name": "labels", "expression": "has(namespaceObject.metadata.labels) ? "
                                                    "namespaceObject.metadata.labels : {}"},
                   {"name": "frozen", "expression": "'freeze' in variables.labels && "
                                                    "variables.labels['freeze'] == 'true'"}]))
    alice = as_tenant(server, api)
    status = denied(alice, cm("c", namespace="frozen"), "frozen")
    assert status["message"].endswith("namespace frozen is frozen for alice in groups system:authenticated")
    create_cm(api, cm("c", namespace="frozen"), "frozen")  # admin
    with pytest.raises(ApiException) as err:
        client.CoreV1Api(api).patch_namespaced_config_map("c", "frozen", {"data": {"a": "2"}})
    assert status_of(err.value)["message"].endswith("data.a is immutable (UPDATE)")
    alice.close()


def test_match_conditions_and_failure_policy(cluster):
    _, api = cluster
    install(api, policy("strict", [{"expression": "object.data.required == 'yes'"}],
                        matchConditions=[{"name": "only-checked", "expression": "has(object.metadata.labels) && "
                                                                                "'checked' in object.metadata.labels"}]))
    create_cm(api, cm("unchecked"))  # matchConditions false: the policy does not apply
    status = denied(api, cm("checked", labels={"checked": "1"}))  # evaluation error under Fail
    assert status["message"].endswith("denied request: expression 'object.data.required == 'yes'' resulted in "
                                      "error: no such key: required")
    create_cm(api, cm("good", {"required": "yes"}, labels={"checked": "1"}))
    client.AdmissionregistrationV1Api(api).patch_validating_admission_policy("strict",
                                                                             {"spec": {"failurePolicy": "Ignore"}})
    create_cm(api, cm("checked", labels={"checked": "1"}))  # the same error is ignored
    assert denied(api, cm("wrong", {"required": "no"}, labels={"checked": "1"}))["code"] == 422


def test_warn_sends_a_warning_header_and_audit_annotates(cluster):
    server, api = cluster
    install(api, policy("hint", [{"expression": "size(object.data) < 2", "message": "prefer small config maps"}]),
            binding("hint", "hint", ["Warn", "Audit"]))
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", **cm("big", {"a": "1", "b": "2"})})
    import urllib.request
    token = api.configuration.api_key.get("authorization") or api.configuration.api_key.get("BearerToken")
    req = urllib.request.Request(f"{api.configuration.host}/api/v1/namespaces/default/configmaps", data=body.encode(),
                                 method="POST", headers={"Content-Type": "application/json", "Authorization": token})
    import ssl
    context = ssl.create_default_context(cafile=api.configuration.ssl_ca_cert) if api.configuration.ssl_ca_cert else None
    with urllib.request.urlopen(req, timeout=10, context=context) as resp:
        assert resp.status == 201
        assert resp.headers.get_all("Warning") == [
            "299 - \"Validation failed for ValidatingAdmissionPolicy 'hint' with binding 'hint': "
            "prefer small config maps\""]
    annotated = [r for r in server.audit.since(0)["items"] if r.get("annotations")]
    assert len(annotated) == 1 and annotated[0]["resource"] == "configmaps" and annotated[0]["verb"] == "create"
    record = annotated[0]
    failure = json.loads(record["annotations"]["validation.policy.admission.k8s.io/validation_failure"])
    assert failure == [{"message": "prefer small config maps", "policy": "hint", "binding": "hint",
                        "expressionIndex": 0, "validationActions": ["Warn", "Audit"]}]
    code, _ = raw_request(api, "POST", "/api/v1/namespaces/default/configmaps",
                          json.dumps({"apiVersion": "v1", "kind": "ConfigMap", **cm("small")}))
    assert code == 201


def test_compiled_once_per_generation(cluster):
    server, api = cluster
    install(api, policy("p", [{"expression": "object.data.a != 'x'"}]))
    policies = server.admission.policies
    for i in range(5):
        create_cm(api, cm(f"c{i}"))
    assert len(policies._compiled) == 1
    first = next(iter(policies._compiled.values()))
    create_cm(api, cm("c-again"))
    assert next(iter(policies._compiled.values())) is first
    client.AdmissionregistrationV1Api(api).patch_validating_admission_policy(
        "p", {"spec": {"validations": [{"expression": "object.data.a != 'y'"}]}})
    create_cm(api, cm("x", {"a": "x"}))  # the new generation is compiled and used
    assert denied(api, cm("y", {"a": "y"}))["code"] == 422


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_apply_and_denial(cluster, tmp_path):
    server, _ = cluster

    def kubectl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(["kubectl", "--kubeconfig", server.kubeconfig, "--cache-dir", str(tmp_path / "cache"),
                               *args], input=stdin, capture_output=True, text=True, timeout=60)

    manifest = textwrap.dedent("""\
        apiVersion: admissionregistration.k8s.io/v1
        kind: ValidatingAdmissionPolicy
        metadata: {name: owner-label}
        spec:
          failurePolicy: Fail
          matchConstraints:
            resourceRules:
            - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
          validations:
          - expression: "has(object.metadata.labels) && 'owner' in object.metadata.labels"
            message: every config map needs an owner label
        ---
        apiVersion: admissionregistration.k8s.io/v1
        kind: ValidatingAdmissionPolicyBinding
        metadata: {name: owner-label}
        spec: {policyName: owner-label, validationActions: [Deny]}
        """)
    applied = kubectl("apply", "-f", "-", stdin=manifest)
    assert applied.returncode == 0, applied.stderr
    listed = kubectl("get", "validatingadmissionpolicies", "-o", "name")
    assert listed.stdout.strip() == "validatingadmissionpolicy.admissionregistration.k8s.io/owner-label"
    refused = kubectl("apply", "-f", "-", stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: nolabel, "
                                                "namespace: default}\ndata: {a: b}\n")
    assert refused.returncode != 0
    # kubectl prints a 422 with causes as kube-apiserver's VAP denials read in Kubernetes' own documentation.
    assert refused.stderr.strip() == ("The configmaps \"nolabel\" is invalid: : ValidatingAdmissionPolicy 'owner-label' "
                                      "with binding 'owner-label' denied request: every config map needs an owner "
                                      "label")


def test_velashard_install_ships_the_shard_label_guard(cluster, capsys):
    from velashard.cli.main import main

    server, api = cluster
    argv = ["install", "--kubeconfig", server.kubeconfig, "--enable-sharding", "--controller-identity", "admin",
            "--shard-admin-users", "ops", "--shard-admin-groups", "sre"]
    assert main(argv) == 0
    assert "validatingadmissionpolicy/velashard-shard-label-guard created" in capsys.readouterr().out
    assert main(argv) == 0  # idempotent
    again = capsys.readouterr().out
    assert "validatingadmissionpolicy/velashard-shard-label-guard unchanged" in again
    assert "validatingadmissionpolicybinding/velashard-shard-label-guard unchanged" in again
    reg = client.AdmissionregistrationV1Api(api)
    privileged = next(v for v in reg.read_validating_admission_policy("velashard-shard-label-guard").spec.variables
                      if v.name == "privileged")
    assert '["admin","ops"]' in privileged.expression and '["sre"]' in privileged.expression
    app = {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": {
        "name": "chosen", "namespace": "default", "labels": {"controller.core.oam.dev/scheduled-shard-id": "s1"}},
        "spec": {"components": []}}
    alice = as_tenant(server, api)
    with pytest.raises(ApiException) as err:
        client.CustomObjectsApi(alice).create_namespaced_custom_object("core.oam.dev", "v1beta1", "default",
                                                                       "applications", app)
    assert err.value.status == 422 and 'may not choose shard \\"s1\\"' in err.value.body
    client.CustomObjectsApi(api).create_namespaced_custom_object("core.oam.dev", "v1beta1", "default",
                                                                 "applications", app)  # the controller may
    alice.close()


def test_delete_sees_the_old_object_and_a_null_object(cluster):
    _, api = cluster
    install(api, policy("keep", [{"expression": "object == null && !('protected' in oldObject.data)",
                                  "messageExpression": "oldObject.metadata.name + ' is protected'"}],
                        rules=[{**CM_RULE, "operations": ["DELETE"]}]))
    core = client.CoreV1Api(api)
    create_cm(api, cm("plain"))
    create_cm(api, cm("guarded", {"protected": "yes"}))
    core.delete_namespaced_config_map("plain", "default")
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_config_map("guarded", "default")
    assert status_of(err.value)["message"].endswith("denied request: guarded is protected")
