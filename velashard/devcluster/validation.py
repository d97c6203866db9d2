"""Kubernetes' apimachinery validation rules for names, labels, annotations and object metadata."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


@dataclass(frozen=True)
class Cause:
    """One field error, as in a 422 Status's details.causes."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"


def is_dns1123_label(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _DNS1123_LABEL.match(value):
        errs.append("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
                    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
                    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if len(value) > 253:
        errs.append("must be no more than 253 characters")
    if not _DNS1123_SUBDOMAIN.match(value):
        errs.append("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
    return errs


def is_qualified_name(value: str) -> list[str]:
    """Label and annotation keys: an optional DNS-subdomain prefix and '/', then a name of at most 63 chars."""
    if not isinstance(value, str):
        return ["must be a string"]
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
        errs: list[str] = []
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs = ["prefix part must be non-empty"]
        else:
            errs = ["prefix part " + e for e in is_dns1123_subdomain(prefix)]
    else:
        return ["a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix "
                "and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    else:
        if len(name) > 63:
            errs.append("name part must be no more than 63 characters")
        if not _QUALIFIED_NAME.match(name):
            errs.append("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                        "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used "
                        "for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
    return errs


def is_valid_label_value(value: str) -> list[str]:
    if not isinstance(value, str):
        return ["must be a string"]
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _LABEL_VALUE.match(value):
        errs.append("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
                    "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
    return errs


def _invalid(field: str, value: Any, message: str) -> Cause:
    return Cause(field, f"Invalid value: {json.dumps(value)}: {message}")


def validate_object_meta(meta: dict[str, Any], *, namespaced: bool, name_validator: str = "subdomain") -> list[Cause]:
    """Validate metadata; `name_validator` is "subdomain", "label" or "skip" (the caller checks the name)."""
    causes: list[Cause] = []
    name = meta.get("name")
    if not name:
        causes.append(Cause("metadata.name", "Required value: name or generateName is required",
                            "FieldValueRequired"))
    elif name_validator != "skip":
        check = is_dns1123_label if name_validator == "label" else is_dns1123_subdomain
        causes += [_invalid("metadata.name", name, e) for e in check(name)]
    if namespaced and not meta.get("namespace"):
        causes.append(Cause("metadata.namespace", "Required value", "FieldValueRequired"))
    for key, value in (meta.get("labels") or {}).items():
        causes += [_invalid("metadata.labels", key, e) for e in is_qualified_name(key)]
        causes += [_invalid("metadata.labels", value, e) for e in is_valid_label_value(value)]
    annotations = meta.get("annotations") or {}
    total = 0
    for key, value in annotations.items():
        causes += [_invalid("metadata.annotations", key, e) for e in is_qualified_name(key)]
        total += len(key) + len(value if isinstance(value, str) else "")
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        causes.append(Cause("metadata.annotations", f"Too long: must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} "
                            "bytes", "FieldValueTooLong"))
    for i, finalizer in enumerate(meta.get("finalizers") or []):
        if not isinstance(finalizer, str):
            causes.append(_invalid(f"metadata.finalizers[{i}]", finalizer, "must be a string"))
            continue
        causes += [_invalid(f"metadata.finalizers[{i}]", finalizer, e) for e in is_qualified_name(finalizer)]
    controllers = 0
    for i, ref in enumerate(meta.get("ownerReferences") or []):
        path = f"metadata.ownerReferences[{i}]"
        if not isinstance(ref, dict):
            causes.append(_invalid(path, ref, "must be an object"))
            continue
        for field in ("apiVersion", "kind", "name", "uid"):
            if not ref.get(field):
                causes.append(Cause(f"{path}.{field}", "Required value", "FieldValueRequired"))
        if ref.get("controller"):
            controllers += 1
    if controllers > 1:
        causes.append(_invalid("metadata.ownerReferences", controllers,
                               "Only one reference can have Controller set to true"))
    return causes
