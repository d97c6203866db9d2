"""Metadata validation and CRD structural schemas."""

from __future__ import annotations

from velashard.apiserver.storage.openapi_schema import apply_schema
from velashard.apiserver.storage.validation import (is_dns1123_label, is_dns1123_subdomain, is_qualified_name,
                                                    is_valid_label_value, validate_object_meta)


def test_names_and_labels():
    assert is_dns1123_subdomain("a.b-c") == [] and is_dns1123_subdomain("A") != []
    assert is_dns1123_label("a.b") != [] and is_dns1123_label("x" * 64) != []
    assert is_qualified_name("example.com/App_1") == [] and is_qualified_name("/x") != []
    assert is_qualified_name("a/b/c") != [] and is_qualified_name("bad key!") != []
    assert is_valid_label_value("") == [] and is_valid_label_value("-x") != []


def test_object_meta_causes_name_the_field():
    causes = validate_object_meta({"name": "ok", "namespace": "n", "labels": {"k": "bad value!"},
                                   "finalizers": ["ok/fin", "bad fin"],
                                   "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "a", "uid": "1",
                                                        "controller": True},
                                                       {"apiVersion": "v1", "kind": "X", "name": "b",
                                                        "controller": True}]}, namespaced=True)
    fields = [c.field for c in causes]
    assert "metadata.labels" in fields and "metadata.finalizers[1]" in fields
    assert "metadata.ownerReferences[1].uid" in fields and "metadata.ownerReferences" in fields


SCHEMA = {"type": "object", "properties": {
    "spec": {"type": "object", "required": ["replicas"], "properties": {
        "replicas": {"type": "integer", "minimum": 0, "maximum": 10},
        "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
        "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
        "items": {"type": "array", "maxItems": 2, "items": {"type": "object", "properties": {
            "x": {"type": "integer"}}}},
        "port": {"x-kubernetes-int-or-string": True},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}}}


def test_schema_defaults_and_prunes():
    obj = {"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n"},
           "spec": {"replicas": 1, "unknown": 1, "items": [{"x": 1, "y": 2}], "free": {"any": {"thing": 1}},
                    "labels": {"a": "b"}, "port": "http"}, "extra": True}
    out, causes = apply_schema(obj, SCHEMA)
    assert causes == []
    assert out["spec"] == {"replicas": 1, "mode": "a", "items": [{"x": 1}], "free": {"any": {"thing": 1}},
                           "labels": {"a": "b"}, "port": "http"}
    assert "extra" not in out and out["metadata"] == {"name": "n"}
    assert obj["spec"]["unknown"] == 1  # the input is not mutated


def test_schema_validation_causes():
    _, causes = apply_schema({"spec": {"replicas": "3", "mode": "c", "name": "ABCDEFG", "items": [{}, {}, {}],
                                       "port": 1.5, "labels": {"a": 1}}}, SCHEMA)
    by_field = {c.field: c.message for c in causes}
    assert "must be of type integer" in by_field["spec.replicas"]
    assert by_field["spec.mode"].startswith('Unsupported value: "c"')
    assert "spec.name" in by_field and "spec.items" in by_field and "spec.port" in by_field
    assert "spec.labels.a" in by_field
    _, causes = apply_schema({"spec": {}}, SCHEMA)
    assert [(c.field, c.message) for c in causes] == [("spec.replicas", "Required value")]
    _, causes = apply_schema({"spec": {"replicas": 11}}, SCHEMA)
    assert "less than or equal to 10" in causes[0].message
