"""CustomResourceDefinitions, discovery and the DynamicClient."""

from __future__ import annotations

import pytest
from kubernetes import client, dynamic
from kubernetes.client.exceptions import ApiException

from tests.integration.conftest import WIDGET_CRD
from tests.integration.helpers import eventually, raw_request, status_of


def widget(name: str, **spec) -> dict:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


def test_crd_is_established_and_discoverable(api_client, widget_crd):
    code, resources = raw_request(api_client, "GET", "/apis/example.com/v1")
    assert code == 200
    entry = next(r for r in resources["resources"] if r["name"] == "widgets")
    assert entry["kind"] == "Widget" and entry["namespaced"] is True and entry["shortNames"] == ["wd"]
    assert "watch" in entry["verbs"]
    assert any(r["name"] == "widgets/status" for r in resources["resources"])
    code, groups = raw_request(api_client, "GET", "/apis")
    assert any(g["name"] == "example.com" for g in groups["groups"])


def test_schema_defaulting_pruning_and_validation(api_client, widget_crd, namespace):
    objects = client.CustomObjectsApi(api_client)
    made = objects.create_namespaced_custom_object("example.com", "v1", namespace, "widgets",
                                                   widget("d", size=2, unknown="x", extra={"free": {"a": 1}}))
    assert made["spec"] == {"size": 2, "color": "red", "extra": {"free": {"a": 1}}}
    with pytest.raises(ApiException) as err:
        objects.create_namespaced_custom_object("example.com", "v1", namespace, "widgets",
                                                widget("bad", size="big", color="green"))
    assert err.value.status == 422
    fields = {c["field"] for c in status_of(err.value)["details"]["causes"]}
    assert fields == {"spec.size", "spec.color"}
    with pytest.raises(ApiException) as err:
        objects.create_namespaced_custom_object("example.com", "v1", namespace, "widgets", widget("req"))
    assert status_of(err.value)["details"]["causes"][0]["field"] == "spec.size"


def test_printer_columns_in_table(api_client, widget_crd, namespace):
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        "example.com", "v1", namespace, "widgets", widget("t", size=5))
    code, table = raw_request(api_client, "GET", f"/apis/example.com/v1/namespaces/{namespace}/widgets",
                              headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    assert code == 200 and table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Size", "Phase", "Age"]
    assert table["rows"][0]["cells"][:2] == ["t", 5]


def test_dynamic_client_over_custom_and_builtin_resources(api_client, widget_crd, namespace):
    dyn = dynamic.DynamicClient(api_client)
    widgets = dyn.resources.get(api_version="example.com/v1", kind="Widget")
    widgets.create(body=widget("dyn", size=1), namespace=namespace)
    got = widgets.get(name="dyn", namespace=namespace)
    assert got.spec.size == 1
    widgets.patch(name="dyn", namespace=namespace, body={"spec": {"size": 4}},
                  content_type="application/merge-patch+json")
    assert widgets.get(name="dyn", namespace=namespace).spec.size == 4
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    assert deployments.namespaced and deployments.name == "deployments"
    assert [i.metadata.name for i in widgets.get(namespace=namespace).items] == ["dyn"]


def test_cluster_scoped_crd_and_deletion_stops_serving(api_client):
    ext = client.ApiextensionsV1Api(api_client)
    crd = {**WIDGET_CRD, "metadata": {"name": "gadgets.example.org"}, "spec": {
        **WIDGET_CRD["spec"], "group": "example.org", "scope": "Cluster",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"}}}
    ext.create_custom_resource_definition(crd)
    objects = client.CustomObjectsApi(api_client)
    objects.create_cluster_custom_object("example.org", "v1", "gadgets", {
        "apiVersion": "example.org/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"size": 1}})
    assert objects.get_cluster_custom_object("example.org", "v1", "gadgets", "g")["spec"]["size"] == 1
    ext.delete_custom_resource_definition("gadgets.example.org")

    def stopped() -> bool:
        code, _ = raw_request(api_client, "GET", "/apis/example.org/v1/gadgets")
        return code == 404

    eventually(stopped)


def test_invalid_crd_is_rejected(api_client):
    bad = {**WIDGET_CRD, "metadata": {"name": "wrong.example.com"}}
    with pytest.raises(ApiException) as err:
        client.ApiextensionsV1Api(api_client).create_custom_resource_definition(bad)
    assert err.value.status == 422


def test_version_healthz_and_unknown_paths(api_client):
    code, version = raw_request(api_client, "GET", "/version")
    assert code == 200 and version["major"] == "1"
    assert raw_request(api_client, "GET", "/healthz") == (200, "ok")
    code, body = raw_request(api_client, "GET", "/apis/nope.example.com/v1/things")
    assert code == 404 and body["reason"] == "NotFound"
