"""Patch types, status subresources and their interplay, through the official client."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.helpers import deployment, raw_request, status_of


def test_strategic_merge_patch_merges_containers_env_and_ports(api_client, namespace):
    apps = client.AppsV1Api(api_client)
    dep = deployment("smp")
    dep.spec.template.spec.containers[0].env = [client.V1EnvVar(name="A", value="1")]
    dep.spec.template.spec.containers[0].ports = [client.V1ContainerPort(container_port=80)]
    apps.create_namespaced_deployment(namespace, dep)
    patched = apps.patch_namespaced_deployment("smp", namespace, {"spec": {"template": {"spec": {"containers": [
        {"name": "main", "env": [{"name": "B", "value": "2"}], "ports": [{"containerPort": 8080}]},
        {"name": "sidecar", "image": "busybox"}]}}}})
    containers = {c.name: c for c in patched.spec.template.spec.containers}
    assert set(containers) == {"main", "sidecar"}
    assert containers["main"].image == "nginx:1.25"
    assert [e.name for e in containers["main"].env] == ["A", "B"]
    assert sorted(p.container_port for p in containers["main"].ports) == [80, 8080]
    removed = apps.patch_namespaced_deployment("smp", namespace, {"spec": {"template": {"spec": {"containers": [
        {"name": "sidecar", "$patch": "delete"}]}}}})
    assert [c.name for c in removed.spec.template.spec.containers] == ["main"]


def test_merge_patch_replaces_lists_and_null_deletes(api_client, namespace):
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="mp", labels={"a": "1", "b": "2"}), data={"x": "1", "y": "2"}))
    code, body = raw_request(api_client, "PATCH", f"/api/v1/namespaces/{namespace}/configmaps/mp",
                             '{"metadata":{"labels":{"a":null}},"data":{"y":null,"z":"3"}}',
                             {"Content-Type": "application/merge-patch+json"})
    assert code == 200
    assert body["metadata"]["labels"] == {"b": "2"} and body["data"] == {"x": "1", "z": "3"}


def test_json_patch_and_failed_test_operation(api_client, namespace):
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="jp"),
                                                                   data={"x": "1"}))
    patched = core.patch_namespaced_config_map("jp", namespace, [
        {"op": "test", "path": "/data/x", "value": "1"},
        {"op": "add", "path": "/data/y", "value": "2"},
        {"op": "remove", "path": "/data/x"}])
    assert patched.data == {"y": "2"}
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map("jp", namespace, [{"op": "test", "path": "/data/y", "value": "nope"}])
    assert err.value.status == 422
    assert core.read_namespaced_config_map("jp", namespace).data == {"y": "2"}


def test_patch_carrying_stale_resource_version_conflicts(api_client, namespace):
    core = client.CoreV1Api(api_client)
    made = core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="rv")))
    core.patch_namespaced_config_map("rv", namespace, {"data": {"a": "1"}})
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map("rv", namespace, {"metadata": {"resourceVersion":
                                                                        made.metadata.resource_version},
                                                           "data": {"a": "2"}})
    assert err.value.status == 409 and status_of(err.value)["reason"] == "Conflict"


def test_strategic_merge_on_custom_resource_is_415(api_client, widget_crd, namespace):
    objects = client.CustomObjectsApi(api_client)
    objects.create_namespaced_custom_object("example.com", "v1", namespace, "widgets",
                                            {"apiVersion": "example.com/v1", "kind": "Widget",
                                             "metadata": {"name": "w"}, "spec": {"size": 1}})
    code, body = raw_request(api_client, "PATCH", f"/apis/example.com/v1/namespaces/{namespace}/widgets/w",
                             '{"spec":{"size":2}}', {"Content-Type": "application/strategic-merge-patch+json"})
    assert code == 415 and body["reason"] == "UnsupportedMediaType"


def test_status_subresource_separates_spec_and_status(api_client, namespace):
    apps = client.AppsV1Api(api_client)
    apps.create_namespaced_deployment(namespace, deployment("st"))
    for _ in range(20):  # the session's server simulates workloads: its status writes may come between ours
        body = apps.read_namespaced_deployment("st", namespace)
        body.spec.replicas = 5
        body.status = client.V1DeploymentStatus(replicas=42)
        try:
            written = apps.replace_namespaced_deployment_status("st", namespace, body)
            break
        except ApiException as err:
            if err.status != 409:
                raise
    else:
        pytest.fail("every status replace met a conflict")
    assert written.spec.replicas == 1  # /status ignores spec
    assert written.status.replicas == 42
    main = apps.patch_namespaced_deployment("st", namespace, {"spec": {"replicas": 2}, "status": {"replicas": 7}})
    assert main.spec.replicas == 2
    assert main.status.replicas != 7  # the main resource ignores status


def test_custom_resource_status_subresource(api_client, widget_crd, namespace):
    objects = client.CustomObjectsApi(api_client)
    created = objects.create_namespaced_custom_object(
        "example.com", "v1", namespace, "widgets",
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "s"}, "spec": {"size": 1},
         "status": {"phase": "ignored-on-create"}})
    assert "status" not in created
    objects.patch_namespaced_custom_object_status("example.com", "v1", namespace, "widgets", "s",
                                                  {"status": {"phase": "Ready"}})
    after = objects.patch_namespaced_custom_object("example.com", "v1", namespace, "widgets", "s",
                                                   {"spec": {"size": 3}, "status": {"phase": "nope"}})
    assert after["status"] == {"phase": "Ready"} and after["spec"]["size"] == 3
    assert after["metadata"]["generation"] == 2
