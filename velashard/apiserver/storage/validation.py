"""Kubernetes' apimachinery validation rules for names, labels, annotations and object metadata.

Messages follow apimachinery's `util/validation` and `util/validation/field` so that a client sees
the same 422 causes it would see from kube-apiserver.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from velashard.apis import validation as names
from velashard.apis.validation import _byte_len, is_dns1123_label, is_dns1123_subdomain, is_valid_path_segment_name

# Every write checks its labels, annotation keys and finalizers, and they are mostly the same few strings: their
# checks (a handful of regular expressions each) are remembered, for strings no longer than a valid key can be.
_CACHED_LENGTH = 253 + 1 + 63


@functools.lru_cache(maxsize=16384)
def _qualified_name_errors(value: str) -> tuple[str, ...]:
    return tuple(names.is_qualified_name(value))


@functools.lru_cache(maxsize=16384)
def _label_value_errors(value: str) -> tuple[str, ...]:
    return tuple(names.is_valid_label_value(value))


def is_qualified_name(value: Any) -> list[str]:
    if isinstance(value, str) and len(value) <= _CACHED_LENGTH:
        return list(_qualified_name_errors(value))
    return names.is_qualified_name(value)


def is_valid_label_value(value: Any) -> list[str]:
    if isinstance(value, str) and len(value) <= _CACHED_LENGTH:
        return list(_label_value_errors(value))
    return names.is_valid_label_value(value)


TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024
_ORPHAN_FINALIZER = "orphan"
_FOREGROUND_FINALIZER = "foregroundDeletion"
# apimachinery refuses these kinds as owners (BannedOwners).
_BANNED_OWNERS = {("", "v1", "Event")}


@dataclass(frozen=True)
class Cause:
    """One field error, as in a 422 Status's details.causes."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"


# --- field errors, formatted like apimachinery's field.Error ---------------------------------------------

def format_value(value: Any) -> str:
    """A bad value as Kubernetes prints it: Go %q for strings, plain for numbers and booleans."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, sort_keys=True, default=str)


def invalid(field: str, value: Any, detail: str) -> Cause:
    return Cause(field, f"Invalid value: {format_value(value)}: {detail}" if detail else
                 f"Invalid value: {format_value(value)}")


def type_invalid(field: str, value: Any, detail: str) -> Cause:
    return Cause(field, f"Invalid value: {format_value(value)}: {detail}", "FieldValueTypeInvalid")


def required(field: str, detail: str = "") -> Cause:
    return Cause(field, f"Required value: {detail}" if detail else "Required value", "FieldValueRequired")


def forbidden(field: str, detail: str) -> Cause:
    return Cause(field, f"Forbidden: {detail}", "FieldValueForbidden")


def not_supported(field: str, value: Any, supported: list[str]) -> Cause:
    choices = ", ".join(json.dumps(s, ensure_ascii=False) for s in supported)
    return Cause(field, f"Unsupported value: {format_value(value)}: supported values: {choices}",
                 "FieldValueNotSupported")


def too_long(field: str, limit: int) -> Cause:
    return Cause(field, f"Too long: may not be more than {limit} bytes", "FieldValueTooLong")


def too_many(field: str, actual: int, limit: int) -> Cause:
    return Cause(field, f"Too many: {actual}: must have at most {limit} items", "FieldValueTooMany")


# --- object metadata -----------------------------------------------------------------------------------

def _name_errors(name: str, validator: str, prefix: bool) -> list[str]:
    if validator == "skip":
        return []
    if validator == "path_segment":
        return is_valid_path_segment_name(name)
    if prefix and name.endswith("-"):
        # A generateName may end in '-': the random suffix makes the full name valid.
        name = name[:-1] + "a"
    return is_dns1123_label(name) if validator == "label" else is_dns1123_subdomain(name)


def _string_map(meta: dict[str, Any], field: str, causes: list[Cause]) -> dict[str, Any]:
    value = meta.get(field)
    if value is None:
        return {}
    if not isinstance(value, dict):
        causes.append(invalid(f"metadata.{field}", value, "must be a map of strings"))
        return {}
    return value


def _parse_api_version(api_version: str) -> tuple[str, str]:
    """(group, version) as schema.ParseGroupVersion reads it; ("", "") when unparseable."""
    if not api_version:
        return "", ""
    parts = api_version.split("/")
    if len(parts) == 1:
        return "", parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    return "", ""


def _validate_owner_references(refs: Any, causes: list[Cause]) -> None:
    path = "metadata.ownerReferences"
    if refs is None:
        return
    if not isinstance(refs, list):
        causes.append(invalid(path, refs, "must be a list"))
        return
    first_controller = ""
    for i, ref in enumerate(refs):
        # Kubernetes leaves the index out of these paths; we keep it, so the cause says which reference.
        item = f"{path}[{i}]"
        if not isinstance(ref, dict):
            causes.append(invalid(item, ref, "must be an object"))
            continue
        api_version, kind = str(ref.get("apiVersion") or ""), str(ref.get("kind") or "")
        group, version = _parse_api_version(api_version)
        if not version:
            causes.append(invalid(f"{item}.apiVersion", api_version, "version must not be empty"))
        if not kind:
            causes.append(invalid(f"{item}.kind", kind, "must not be empty"))
        if not ref.get("name"):
            causes.append(invalid(f"{item}.name", str(ref.get("name") or ""), "must not be empty"))
        if not ref.get("uid"):
            causes.append(invalid(f"{item}.uid", str(ref.get("uid") or ""), "must not be empty"))
        if (group, version, kind) in _BANNED_OWNERS:
            causes.append(invalid(item, ref, f"{group}/{version}, Kind={kind} is disallowed from being an owner"))
        if ref.get("controller") is True:
            current = f"{kind}/{ref.get('name') or ''}"
            if first_controller:
                causes.append(invalid(path, refs, "Only one reference can have Controller set to true. Found "
                                      f"\"true\" in references for {first_controller} and {current}"))
            else:
                first_controller = current


def _validate_finalizers(finalizers: Any, causes: list[Cause]) -> None:
    path = "metadata.finalizers"
    if finalizers is None:
        return
    if not isinstance(finalizers, list):
        causes.append(invalid(path, finalizers, "must be a list of strings"))
        return
    for i, finalizer in enumerate(finalizers):
        # Indexed, unlike Kubernetes' "metadata.finalizers", so the cause says which finalizer.
        causes += [invalid(f"{path}[{i}]", finalizer, e) for e in is_qualified_name(finalizer)]
    if _ORPHAN_FINALIZER in finalizers and _FOREGROUND_FINALIZER in finalizers:
        causes.append(invalid(path, finalizers, f"finalizer {_ORPHAN_FINALIZER} and {_FOREGROUND_FINALIZER} "
                              "cannot be both set"))


def validate_object_meta(meta: dict[str, Any], *, namespaced: bool, name_validator: str = "subdomain") -> list[Cause]:
    """Validate metadata as ValidateObjectMetaAccessor does.

    `name_validator` is "subdomain" (most kinds), "label" (e.g. namespaces, services), "path_segment"
    (e.g. RBAC) or "skip" (the caller checks the name itself).
    """
    if not isinstance(meta, dict):
        return [invalid("metadata", meta, "must be an object")]
    causes: list[Cause] = []
    generate_name = meta.get("generateName")
    if generate_name:
        causes += [invalid("metadata.generateName", generate_name, e)
                   for e in _name_errors(str(generate_name), name_validator, True)]
    name = meta.get("name")
    if not name:
        causes.append(required("metadata.name", "name or generateName is required"))
    else:
        causes += [invalid("metadata.name", name, e) for e in _name_errors(str(name), name_validator, False)]
    namespace = meta.get("namespace")
    if namespaced:
        if not namespace:
            causes.append(required("metadata.namespace"))
        else:
            causes += [invalid("metadata.namespace", namespace, e) for e in is_dns1123_label(str(namespace))]
    elif namespace:
        causes.append(forbidden("metadata.namespace", "not allowed on this type"))
    generation = meta.get("generation")
    if isinstance(generation, (int, float)) and not isinstance(generation, bool) and generation < 0:
        causes.append(invalid("metadata.generation", generation, "must be greater than or equal to 0"))
    for key, value in _string_map(meta, "labels", causes).items():
        causes += [invalid("metadata.labels", key, e) for e in is_qualified_name(key)]
        causes += [invalid("metadata.labels", value, e) for e in is_valid_label_value(value)]
    total = 0
    for key, value in _string_map(meta, "annotations", causes).items():
        # Annotation keys are qualified names, but case-insensitively.
        causes += [invalid("metadata.annotations", key, e)
                   for e in is_qualified_name(key.lower() if isinstance(key, str) else key)]
        if not isinstance(value, str):
            causes.append(invalid("metadata.annotations", value, "must be a string"))
            continue
        total += _byte_len(key) + _byte_len(value)
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        causes.append(Cause("metadata.annotations", f"Too long: must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} "
                            "bytes", "FieldValueTooLong"))
    _validate_owner_references(meta.get("ownerReferences"), causes)
    _validate_finalizers(meta.get("finalizers"), causes)
    return causes
