"""Fixtures for the integration tests: a sample CRD."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.integration.helpers import eventually

WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "subresources": {"status": {}},
            "additionalPrinterColumns": [
                {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}],
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "required": ["size"], "properties": {
                        "size": {"type": "integer", "minimum": 0},
                        "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}},
                    "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
                }}},
        }],
    },
}


@pytest.fixture(scope="session")
def widget_crd(api_client):
    ext = client.ApiextensionsV1Api(api_client)
    try:
        ext.create_custom_resource_definition(WIDGET_CRD)
    except client.exceptions.ApiException as err:
        if err.status != 409:
            raise
    eventually(lambda: any(c.type == "Established" and c.status == "True" for c in
                           (ext.read_custom_resource_definition("widgets.example.com").status.conditions or [])))
    return WIDGET_CRD
