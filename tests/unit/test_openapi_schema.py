"""CRD structural schemas: defaulting, pruning and validation of custom resources."""

from __future__ import annotations

import pytest

from velashard.apiserver.storage.openapi_schema import apply_schema
from velashard.apiserver.storage.validation import Cause


def obj_schema(**props):
    return {"type": "object", "properties": props}


SPEC = {"type": "object", "required": ["replicas"], "properties": {
    "replicas": {"type": "integer", "minimum": 0, "maximum": 10},
    "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
    "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
    "components": {"type": "array", "maxItems": 2, "items": obj_schema(
        name={"type": "string"}, weight={"type": "integer", "default": 1})},
    "port": {"x-kubernetes-int-or-string": True},
    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                 "x-kubernetes-preserve-unknown-fields": True},
    "strict": {"type": "object", "x-kubernetes-embedded-resource": True, "properties": {"spec": obj_schema(
        size={"type": "integer"})}},
}}
SCHEMA = obj_schema(spec=SPEC)


def resource(**spec):
    return {"apiVersion": "x.io/v1", "kind": "K", "metadata": {"name": "n", "anything": 1}, "spec": {"replicas": 1,
                                                                                                   **spec}}


def test_defaults_and_pruning():
    obj = resource(unknown=1, components=[{"name": "c", "extra": True}], free={"any": {"thing": 1}},
                   labels={"a": "b"}, port="http",
                   template={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": 1}},
                   strict={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"size": 1, "y": 2},
                           "status": {}})
    obj["extra"] = True
    out, causes = apply_schema(obj, SCHEMA)
    assert causes == []
    assert out == {
        "apiVersion": "x.io/v1", "kind": "K", "metadata": {"name": "n", "anything": 1},  # root metadata untouched
        "spec": {"replicas": 1, "mode": "a", "components": [{"name": "c", "weight": 1}],
                 "free": {"any": {"thing": 1}}, "labels": {"a": "b"}, "port": "http",
                 "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": 1}},
                 "strict": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"size": 1}}}}
    assert obj["spec"]["unknown"] == 1 and "weight" not in obj["spec"]["components"][0]  # input not mutated


def test_preserve_unknown_fields_still_prunes_inside_known_properties():
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
              "properties": {"known": obj_schema(a={"type": "string"})}}
    out, causes = apply_schema({"other": {"deep": 1}, "known": {"a": "x", "b": "y"}}, schema)
    assert out == {"other": {"deep": 1}, "known": {"a": "x"}} and causes == []


@pytest.mark.parametrize("value,schema,expected", [
    ({}, obj_schema(x={"type": "string", "default": "d"}), {"x": "d"}),
    ({"x": None}, obj_schema(x={"type": "string", "default": "d"}), {"x": "d"}),           # null of non-nullable
    ({"x": None}, obj_schema(x={"type": "string"}), {}),                                  # dropped, no default
    ({"x": None}, obj_schema(x={"type": "string", "nullable": True, "default": "d"}), {"x": None}),
    ({}, obj_schema(o={"type": "object", "default": {}, "properties": {"in": {"type": "integer", "default": 3}}}),
     {"o": {"in": 3}}),                                                                   # defaults nest
    ({"m": {"k": None}}, obj_schema(m={"type": "object", "additionalProperties": {"type": "string", "default": "v"}}),
     {"m": {"k": "v"}}),
    ({"l": [None, "x"]}, obj_schema(l={"type": "array", "items": {"type": "string", "default": "d"}}),
     {"l": ["d", "x"]}),
    ({}, obj_schema(o={"type": "object", "default": {"keep": 1, "drop": 2},
                       "properties": {"keep": {"type": "integer"}}}),
     {"o": {"keep": 1}}),                                                                 # defaults are pruned too
])
def test_defaulting_and_nulls(value, schema, expected):
    out, causes = apply_schema(value, schema)
    assert out == expected and causes == []


def spec_causes(**spec):
    return apply_schema({"spec": {"replicas": 1, **spec}}, SCHEMA)[1]


@pytest.mark.parametrize("spec,expected", [
    ({"replicas": "3"}, [Cause("spec.replicas", 'Invalid value: "string": spec.replicas in body must be of type '
                               'integer: "string"', "FieldValueTypeInvalid")]),
    ({"replicas": 1.5}, [Cause("spec.replicas", 'Invalid value: "number": spec.replicas in body must be of type '
                               'integer: "number"', "FieldValueTypeInvalid")]),
    ({"replicas": True}, [Cause("spec.replicas", 'Invalid value: "boolean": spec.replicas in body must be of type '
                                'integer: "boolean"', "FieldValueTypeInvalid")]),
    ({"replicas": 11}, [Cause("spec.replicas", "Invalid value: 11: spec.replicas in body should be less than or "
                              "equal to 10")]),
    ({"replicas": -1}, [Cause("spec.replicas", "Invalid value: -1: spec.replicas in body should be greater than or "
                              "equal to 0")]),
    ({"mode": "c"}, [Cause("spec.mode", 'Unsupported value: "c": supported values: "a", "b"',
                           "FieldValueNotSupported")]),
    ({"name": "abcdef"}, [Cause("spec.name", "Too long: may not be more than 5 bytes", "FieldValueTooLong")]),
    ({"name": "AB"}, [Cause("spec.name", "Invalid value: \"AB\": spec.name in body should match '^[a-z]+$'")]),
    ({"components": [{}, {}, {}]}, [Cause("spec.components", "Too many: 3: must have at most 2 items",
                                          "FieldValueTooMany")]),
    ({"components": [{"name": 1}]}, [Cause("spec.components[0].name", 'Invalid value: "integer": '
                                           'spec.components[0].name in body must be of type string: "integer"',
                                           "FieldValueTypeInvalid")]),
    ({"port": 1.5}, [Cause("spec.port", 'Invalid value: "number": spec.port in body must be of type integer or '
                           'string: "number"', "FieldValueTypeInvalid")]),
    ({"labels": {"a": 1}}, [Cause("spec.labels.a", 'Invalid value: "integer": spec.labels.a in body must be of type '
                                  'string: "integer"', "FieldValueTypeInvalid")]),
    ({"strict": {"metadata": {}}}, [Cause("spec.strict.apiVersion", "Required value: must not be empty",
                                          "FieldValueRequired"),
                                    Cause("spec.strict.kind", "Required value: must not be empty",
                                          "FieldValueRequired")]),
])
def test_validation_causes(spec, expected):
    assert spec_causes(**spec) == expected


def test_required_and_wrong_container_types():
    assert apply_schema({"spec": {}}, SCHEMA)[1] == [Cause("spec.replicas", "Required value", "FieldValueRequired")]
    assert apply_schema({"spec": []}, SCHEMA)[1] == [Cause(
        "spec", 'Invalid value: "array": spec in body must be of type object: "array"', "FieldValueTypeInvalid")]


def check(v_schema, value):
    return apply_schema({"v": value}, {"type": "object", "properties": {"v": v_schema}})[1]


@pytest.mark.parametrize("v_schema,value,message", [
    ({"type": "number", "maximum": 5, "exclusiveMaximum": True}, 5,
     "Invalid value: 5: v in body should be less than 5"),
    ({"type": "number", "minimum": 1.5, "exclusiveMinimum": True}, 1.5,
     "Invalid value: 1.5: v in body should be greater than 1.5"),
    ({"type": "integer", "multipleOf": 3}, 7, "Invalid value: 7: v in body should be a multiple of 3"),
    ({"type": "integer", "format": "int32"}, 2**31, 'Invalid value: 2147483648: v in body must be of type int32: '
                                                    '"2147483648"'),
    ({"type": "integer", "format": "int64"}, 2**63, 'Invalid value: 9223372036854775808: v in body must be of type '
                                                    'int64: "9223372036854775808"'),
    ({"type": "string", "minLength": 3}, "ab", 'Invalid value: "ab": v in body should be at least 3 chars long'),
    ({"type": "string", "format": "date-time"}, "yesterday",
     'Invalid value: "yesterday": v in body must be of type date-time: "yesterday"'),
    ({"type": "string", "format": "date-time"}, "2024-02-30T00:00:00Z",
     'Invalid value: "2024-02-30T00:00:00Z": v in body must be of type date-time: "2024-02-30T00:00:00Z"'),
    ({"type": "string", "format": "date"}, "2024-13-01",
     'Invalid value: "2024-13-01": v in body must be of type date: "2024-13-01"'),
    ({"type": "array", "minItems": 2, "items": {"type": "string"}}, ["a"],
     "Invalid value: 1: v in body should have at least 2 items"),
    ({"type": "array", "uniqueItems": True, "items": {"type": "integer"}}, [1, 2, 1],
     'Invalid value: "": v in body shouldn\'t contain duplicates'),
    ({"type": "object", "maxProperties": 1, "additionalProperties": {"type": "integer"}}, {"a": 1, "b": 2},
     "Too many: 2: must have at most 1 items"),
    ({"type": "object", "minProperties": 2, "additionalProperties": {"type": "integer"}}, {"a": 1},
     "Invalid value: 1: v in body should have at least 2 properties"),
    ({"type": "integer", "enum": [1, 2]}, 3, 'Unsupported value: 3: supported values: "1", "2"'),
    ({"type": "string", "anyOf": [{"pattern": "^a"}, {"pattern": "^b"}]}, "c",
     'Invalid value: "c": v in body must validate at least one schema (anyOf)'),
    ({"type": "string", "oneOf": [{"pattern": "^a"}, {"pattern": "b$"}]}, "ab",
     'Invalid value: "ab": v in body must validate one and only one schema (oneOf)'),
    ({"type": "string", "not": {"enum": ["x"]}}, "x", 'Invalid value: "x": v in body must not validate the schema '
                                                     "(not)"),
    ({"type": "string", "allOf": [{"minLength": 2}]}, "a",
     'Invalid value: "a": v in body should be at least 2 chars long'),
    ({"type": "array", "items": {"type": "string"}}, [None], 'Invalid value: "null": v[0] in body must be of type '
                                                             'string: "null"'),
])
def test_each_keyword_reports_its_cause(v_schema, value, message):
    causes = check(v_schema, value)
    assert [c.message for c in causes] == [message]
    assert causes[0].field.startswith("v")


@pytest.mark.parametrize("v_schema,value", [
    ({"type": "number"}, 3),                                  # an integer is a number
    ({"type": "number", "maximum": 5, "exclusiveMaximum": True}, 4.5),
    ({"type": "integer", "format": "int32"}, 2**31 - 1),
    ({"type": "string", "format": "date-time"}, "2024-02-29T10:00:00.5+02:00"),
    ({"type": "string", "format": "date-time"}, "2024-02-29T10:00:00Z"),
    ({"type": "string", "format": "date"}, "2024-02-29"),
    ({"type": "string", "format": "uuid"}, "123e4567-e89b-12d3-a456-426614174000"),
    ({"type": "string", "format": "made-up"}, "anything"),
    ({"type": "string", "nullable": True}, None),
    ({"type": "integer", "enum": [1, 2]}, 2),
    ({"type": "array", "uniqueItems": True, "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
     [{"a": 1}, {"a": 2}]),
    ({"type": "string", "oneOf": [{"pattern": "^a"}, {"pattern": "^b"}]}, "a"),
    ({"type": "string", "pattern": "(?<=unsupported"}, "x"),   # a pattern Python cannot compile is not held against it
    ({"x-kubernetes-int-or-string": True}, 8080),
])
def test_valid_values_have_no_causes(v_schema, value):
    assert check(v_schema, value) == []
