"""apimachinery validation rules and object-metadata causes, with Kubernetes' messages."""

from __future__ import annotations

import pytest

from velashard.apiserver.storage.validation import (Cause, is_dns1123_label, is_dns1123_subdomain, is_qualified_name,
                                                    is_valid_label_value, is_valid_path_segment_name, validate_object_meta)

NAME_PART_REGEX = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                   "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                   "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
SUBDOMAIN_REGEX = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                   "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                   "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_REGEX = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
               "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
               "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
VALUE_REGEX = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
               "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
               "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


@pytest.mark.parametrize("value,errors", [
    ("a", []), ("a.b-c", []), ("0.1", []), ("x" * 253, []),
    ("A", [SUBDOMAIN_REGEX]), ("-a", [SUBDOMAIN_REGEX]), ("a.", [SUBDOMAIN_REGEX]), ("a..b", [SUBDOMAIN_REGEX]),
    ("", [SUBDOMAIN_REGEX]), ("a\n", [SUBDOMAIN_REGEX]),      # no match before a trailing newline, as in Go
    ("x" * 254, ["must be no more than 253 characters"]),
])
def test_is_dns1123_subdomain(value, errors):
    assert is_dns1123_subdomain(value) == errors


@pytest.mark.parametrize("value,errors", [
    ("a", []), ("my-name", []), ("123-abc", []), ("x" * 63, []),
    ("a.b", [LABEL_REGEX]), ("a-", [LABEL_REGEX]), ("Ab", [LABEL_REGEX]), ("a\n", [LABEL_REGEX]),
    ("x" * 64, ["must be no more than 63 characters"]),
    ("-" * 64, ["must be no more than 63 characters", LABEL_REGEX]),
])
def test_is_dns1123_label(value, errors):
    assert is_dns1123_label(value) == errors


@pytest.mark.parametrize("value,errors", [
    ("app", []), ("MyName", []), ("my.name", []), ("123-abc", []), ("a_b", []),
    ("example.com/App_1", []), ("controller.core.oam.dev/scheduled-shard-id", []),
    ("bad key!", [NAME_PART_REGEX]),
    ("-a", [NAME_PART_REGEX]),
    ("a\n", [NAME_PART_REGEX]),
    ("", ["name part must be non-empty", NAME_PART_REGEX]),
    ("/x", ["prefix part must be non-empty"]),
    ("x/", ["name part must be non-empty", NAME_PART_REGEX]),
    ("Example.com/x", ["prefix part " + SUBDOMAIN_REGEX]),
    ("x" * 64, ["name part must be no more than 63 characters"]),
    ("a/b/c", ["a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and "
               "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
               "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix "
               "and '/' (e.g. 'example.com/MyName')"]),
    (5, ["must be a string"]),
])
def test_is_qualified_name(value, errors):
    assert is_qualified_name(value) == errors


@pytest.mark.parametrize("value,errors", [
    ("", []), ("v1", []), ("my_value", []), ("x" * 63, []),
    ("-x", [VALUE_REGEX]), ("a b", [VALUE_REGEX]), ("a/b", [VALUE_REGEX]), ("é", [VALUE_REGEX]),
    ("x" * 64, ["must be no more than 63 characters"]),
    ("é" * 32, ["must be no more than 63 characters", VALUE_REGEX]),   # Go counts bytes
    (None, ["must be a string"]),
])
def test_is_valid_label_value(value, errors):
    assert is_valid_label_value(value) == errors


@pytest.mark.parametrize("value,errors", [
    ("system:controller:x", []), (".", ["may not be '.'"]), ("..", ["may not be '..'"]),
    ("a/b%c", ["may not contain '/'", "may not contain '%'"]),
])
def test_is_valid_path_segment_name(value, errors):
    assert is_valid_path_segment_name(value) == errors


def meta(**fields):
    return {"name": "ok", "namespace": "default", **fields}


@pytest.mark.parametrize("metadata,namespaced,name_validator,expected", [
    (meta(), True, "subdomain", []),
    ({"name": "cluster-thing"}, False, "subdomain", []),
    ({}, False, "subdomain",
     [Cause("metadata.name", "Required value: name or generateName is required", "FieldValueRequired")]),
    ({"name": "ok"}, True, "subdomain", [Cause("metadata.namespace", "Required value", "FieldValueRequired")]),
    ({"name": "ok", "namespace": "n"}, False, "subdomain",
     [Cause("metadata.namespace", "Forbidden: not allowed on this type", "FieldValueForbidden")]),
    (meta(namespace="Bad_NS"), True, "subdomain",
     [Cause("metadata.namespace", f'Invalid value: "Bad_NS": {LABEL_REGEX}')]),
    (meta(name="Bad"), True, "subdomain", [Cause("metadata.name", f'Invalid value: "Bad": {SUBDOMAIN_REGEX}')]),
    (meta(name="a.b"), True, "label", [Cause("metadata.name", f'Invalid value: "a.b": {LABEL_REGEX}')]),
    (meta(name="a.b"), True, "subdomain", []),
    (meta(name="Bad"), True, "skip", []),
    (meta(name="system:auth"), False, "path_segment",
     [Cause("metadata.namespace", "Forbidden: not allowed on this type", "FieldValueForbidden")]),
    (meta(name="a/b"), True, "path_segment", [Cause("metadata.name", "Invalid value: \"a/b\": may not contain '/'")]),
    (meta(generateName="web-"), True, "subdomain", []),           # the trailing '-' is fine in a prefix
    (meta(generateName="Web-"), True, "subdomain",
     [Cause("metadata.generateName", f'Invalid value: "Web-": {SUBDOMAIN_REGEX}')]),
    (meta(generation=-1), True, "subdomain",
     [Cause("metadata.generation", "Invalid value: -1: must be greater than or equal to 0")]),
    (meta(labels={"bad key!": "v"}), True, "subdomain",
     [Cause("metadata.labels", f'Invalid value: "bad key!": {NAME_PART_REGEX}')]),
    (meta(labels={"k": "bad value!"}), True, "subdomain",
     [Cause("metadata.labels", f'Invalid value: "bad value!": {VALUE_REGEX}')]),
    (meta(labels="x"), True, "subdomain", [Cause("metadata.labels", 'Invalid value: "x": must be a map of strings')]),
    (meta(annotations={"Example.com/Key": "any value, even with spaces"}), True, "subdomain", []),
    (meta(annotations={"bad key": "v"}), True, "subdomain",
     [Cause("metadata.annotations", f'Invalid value: "bad key": {NAME_PART_REGEX}')]),
    (meta(annotations={"a": "x" * (256 * 1024)}), True, "subdomain",
     [Cause("metadata.annotations", "Too long: must have at most 262144 bytes", "FieldValueTooLong")]),
    (meta(annotations={"a": "x" * (256 * 1024 - 1)}), True, "subdomain", []),
    (meta(finalizers=["example.com/fin", "bad fin"]), True, "subdomain",
     [Cause("metadata.finalizers[1]", f'Invalid value: "bad fin": {NAME_PART_REGEX}')]),
    (meta(finalizers=["orphan", "foregroundDeletion"]), True, "subdomain",
     [Cause("metadata.finalizers", 'Invalid value: ["orphan", "foregroundDeletion"]: finalizer orphan and '
            'foregroundDeletion cannot be both set')]),
    (meta(ownerReferences=[{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "1"}]), True,
     "subdomain", []),
    (meta(ownerReferences=[{"apiVersion": "apps/", "kind": "", "name": "", "uid": ""}]), True, "subdomain", [
        Cause("metadata.ownerReferences[0].apiVersion", 'Invalid value: "apps/": version must not be empty'),
        Cause("metadata.ownerReferences[0].kind", 'Invalid value: "": must not be empty'),
        Cause("metadata.ownerReferences[0].name", 'Invalid value: "": must not be empty'),
        Cause("metadata.ownerReferences[0].uid", 'Invalid value: "": must not be empty')]),
])
def test_validate_object_meta(metadata, namespaced, name_validator, expected):
    assert validate_object_meta(metadata, namespaced=namespaced, name_validator=name_validator) == expected


def test_owner_references_one_controller_and_no_events():
    refs = [{"apiVersion": "v1", "kind": "X", "name": "a", "uid": "1", "controller": True},
            {"apiVersion": "v1", "kind": "X", "name": "b", "uid": "2", "controller": True},
            {"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "3"}]
    causes = validate_object_meta(meta(ownerReferences=refs), namespaced=True)
    assert [c.field for c in causes] == ["metadata.ownerReferences", "metadata.ownerReferences[2]"]
    assert 'Only one reference can have Controller set to true. Found "true" in references for X/a and X/b' \
        in causes[0].message
    assert causes[1].message.endswith(": /v1, Kind=Event is disallowed from being an owner")
