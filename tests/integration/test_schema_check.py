"""CI schema check: what the embedded server and its simulators produce validates against the OpenAPI
schema of its kind (derived from the official client's generated models), the one /openapi/v3 serves."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from kubernetes import client

from velashard.apiserver.http import openapi_builtin
from tests.integration.helpers import eventually

_LABELS = {"app": "s"}
_TEMPLATE = {"metadata": {"labels": _LABELS}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
_SELECTOR = {"matchLabels": _LABELS}
OBJECTS = [
    ("apps", "deployments", {"kind": "Deployment", "metadata": {"name": "s"},
                             "spec": {"replicas": 2, "selector": _SELECTOR, "template": _TEMPLATE}}),
    ("apps", "statefulsets", {"kind": "StatefulSet", "metadata": {"name": "s"},
                              "spec": {"serviceName": "s", "selector": _SELECTOR, "template": _TEMPLATE}}),
    ("apps", "daemonsets", {"kind": "DaemonSet", "metadata": {"name": "s"},
                            "spec": {"selector": _SELECTOR, "template": _TEMPLATE}}),
    ("apps", "replicasets", {"kind": "ReplicaSet", "metadata": {"name": "r"},
                             "spec": {"selector": {"matchLabels": {"rs": "r"}}, "template": {
                                 "metadata": {"labels": {"rs": "r"}}, "spec": _TEMPLATE["spec"]}}}),
    ("batch", "jobs", {"kind": "Job", "metadata": {"name": "s"}, "spec": {"template": {
        "spec": dict(_TEMPLATE["spec"], restartPolicy="Never")}}}),
    ("", "pods", {"kind": "Pod", "metadata": {"name": "s"}, "spec": _TEMPLATE["spec"]}),
    ("", "replicationcontrollers", {"kind": "ReplicationController", "metadata": {"name": "s"},
                                    "spec": {"template": _TEMPLATE}}),
    ("", "services", {"kind": "Service", "metadata": {"name": "s"},
                      "spec": {"selector": _LABELS, "ports": [{"port": 80}]}}),
    ("", "configmaps", {"kind": "ConfigMap", "metadata": {"name": "s"}, "data": {"a": "b"}}),
    ("", "secrets", {"kind": "Secret", "metadata": {"name": "s"}, "stringData": {"a": "b"}}),
    ("", "serviceaccounts", {"kind": "ServiceAccount", "metadata": {"name": "s"}}),
    ("autoscaling", "horizontalpodautoscalers", {"kind": "HorizontalPodAutoscaler", "metadata": {"name": "s"},
                                                 "spec": {"maxReplicas": 3, "scaleTargetRef": {
                                                     "apiVersion": "apps/v1", "kind": "Deployment", "name": "s"}}}),
    ("rbac.authorization.k8s.io", "roles", {"kind": "Role", "metadata": {"name": "s"},
                                            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
]


def _call(apiserver, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(apiserver.url + path, data=data, method=method, headers={
        "Authorization": f"Bearer {apiserver.admin_token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _version(group: str) -> str:
    return "v2" if group == "autoscaling" else "v1"


def _prefix(group: str) -> str:
    return f"/apis/{group}/{_version(group)}" if group else "/api/v1"


def _problems(obj: dict) -> list[str]:
    kind = obj["kind"]
    group, _, version = obj.get("apiVersion", "v1").rpartition("/")
    components = openapi_builtin.schemas_for([(group, version, kind)])
    root = openapi_builtin.root_component(version, kind)
    assert root is not None, f"no schema for {kind}"
    return [f"{kind}: {p}" for p in openapi_builtin.validate(obj, components[root], components)]


def test_everything_the_server_produces_matches_its_schema(apiserver, api_client, namespace):
    problems: list[str] = []
    for group, plural, body in OBJECTS:
        base = f"{_prefix(group)}/namespaces/{namespace}/{plural}"
        code, made = _call(apiserver, "POST", base, dict(body, apiVersion=f"{group}/{_version(group)}" if group
                                                         else "v1"))
        assert code == 201, made
        problems += _problems(made)
    # once the simulators have written statuses (Deployments' ReplicaSets, scheduled Pods included)
    eventually(lambda: client.AppsV1Api(api_client).read_namespaced_deployment_status("s", namespace)
               .status.ready_replicas == 2)
    eventually(lambda: client.CoreV1Api(api_client).read_namespaced_pod("s", namespace).status.phase == "Running")
    eventually(lambda: client.BatchV1Api(api_client).read_namespaced_job("s", namespace).status.succeeded)
    eventually(lambda: client.AutoscalingV2Api(api_client).read_namespaced_horizontal_pod_autoscaler(
        "s", namespace).status.observed_generation)
    for group, plural in {(g, p) for g, p, _ in OBJECTS} | {("apps", "replicasets")}:
        code, listed = _call(apiserver, "GET", f"{_prefix(group)}/namespaces/{namespace}/{plural}")
        assert code == 200 and listed["items"], (plural, listed)
        problems += _problems(listed)
    for path in ("/api/v1/nodes", "/api/v1/namespaces", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"):
        problems += _problems(_call(apiserver, "GET", path)[1])
    code, scale = _call(apiserver, "GET", f"/apis/apps/v1/namespaces/{namespace}/deployments/s/scale")
    problems += _problems(scale)
    # errors and deletions answer Status objects
    answers = [_call(apiserver, "GET", f"/api/v1/namespaces/{namespace}/configmaps/absent"),
               _call(apiserver, "POST", f"/api/v1/namespaces/{namespace}/configmaps",
                     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"}}),
               _call(apiserver, "POST", f"/api/v1/namespaces/{namespace}/configmaps",
                     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Bad_Name"}}),
               _call(apiserver, "DELETE", f"/api/v1/namespaces/{namespace}/configmaps/s"),
               _call(apiserver, "GET", "/apis/nosuchgroup/v1")]
    assert [code for code, _ in answers] == [404, 409, 422, 200, 404]
    for _, status in answers:
        problems += _problems(status)
    assert problems == []


def test_openapi_v3_serves_the_builtin_schemas(apiserver):
    code, doc = _call(apiserver, "GET", "/openapi/v3/apis/apps/v1")
    schemas = doc["components"]["schemas"]
    deployment = next(s for s in schemas.values()
                      if {"group": "apps", "version": "v1", "kind": "Deployment"} in s.get(
                          "x-kubernetes-group-version-kind", []))
    assert "spec" in deployment["properties"] and deployment["description"]
    assert schemas["v1.DaemonSetStatus"]["required"] == ["currentNumberScheduled", "desiredNumberScheduled",
                                                         "numberMisscheduled", "numberReady"]


def test_validator_catches_missing_required_and_wrong_types():
    bad = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x", "labels": {"a": 1}},
           "status": {"numberReady": "1", "extra": True}}
    problems = _problems(bad)
    assert any("currentNumberScheduled: required" in p for p in problems)
    assert any(".status.numberReady: expected integer" in p for p in problems)
    assert any(".status.extra: unknown field" in p for p in problems)
    assert any(".metadata.labels.a: expected string" in p for p in problems)
