"""Scale views and the OpenAPI schemas derived from the official client's models."""

from __future__ import annotations

from velashard.apiserver.http import openapi_builtin
from velashard.apiserver.registry.scale import selector_string, to_scale


def test_selector_string_forms():
    assert selector_string({"b": "2", "a": "1"}) == "a=1,b=2"  # a ReplicationController's map
    assert selector_string({"matchLabels": {"app": "web"}, "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["b", "a"]}, {"key": "gone", "operator": "DoesNotExist"}]}) \
        == "app=web,!gone,tier in (a,b)"  # requirements sorted by key, as labels.Selector prints them


def test_scale_view():
    scale = to_scale({"metadata": {"name": "w", "namespace": "d", "uid": "u", "resourceVersion": "5", "labels": {}},
                      "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "w"}}}, "status": {"replicas": 2}})
    assert scale == {"kind": "Scale", "apiVersion": "autoscaling/v1",
                     "metadata": {"name": "w", "namespace": "d", "uid": "u", "resourceVersion": "5"},
                     "spec": {"replicas": 3}, "status": {"replicas": 2, "selector": "app=w"}}


def test_component_names_and_roots():
    assert openapi_builtin.component_name("V1ObjectMeta") == "v1.ObjectMeta"
    assert openapi_builtin.component_name("RbacV1Subject") == "rbac.v1.Subject"
    components = openapi_builtin.schemas_for([("apps", "v1", "Deployment")])
    root = components[openapi_builtin.root_component("v1", "Deployment")]
    assert root["x-kubernetes-group-version-kind"] == [{"group": "apps", "version": "v1", "kind": "Deployment"}]
    containers = components["v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name" and containers["items"]["allOf"][0]["$ref"]
    assert components["v1.DeploymentSpec"]["properties"]["replicas"]["type"] == "integer"
    assert "selector" in components["v1.DeploymentSpec"]["required"]
