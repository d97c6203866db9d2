"""Structural schemas of CustomResourceDefinitions: defaulting, pruning and validation of custom resources.

kube-apiserver, for a custom resource: drops nulls of non-nullable fields that have no default,
applies `default`s (recursively, also inside defaulted values), prunes fields the schema does not
know (unless `x-kubernetes-preserve-unknown-fields`), then validates the result. Causes are worded
as apiextensions-apiserver words them (kube-openapi messages inside field errors).
"""

from __future__ import annotations

import json
import math
import re
from datetime import date, datetime
from typing import Any

from velashard.apiserver.storage.validation import (Cause, invalid, not_supported, required, too_long, too_many,
                                                    type_invalid)
from velashard.patch.copying import copy_json
from velashard.patch.json_patch import json_equal

Schema = dict[str, Any]

# Kept on a resource root (and on x-kubernetes-embedded-resource objects) whatever the schema says.
_RESOURCE_FIELDS = ("apiVersion", "kind", "metadata")
_INT_RANGES = {"int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1)}
_DATE_TIME = re.compile(r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_UUID = re.compile(r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}")


def apply_schema(obj: dict[str, Any], schema: Schema) -> tuple[dict[str, Any], list[Cause]]:
    """Return a defaulted, pruned copy of `obj` and the validation causes against `schema`."""
    result = copy_json(obj)  # JSON-shaped: no cycles or shared parts for copy.deepcopy's memo to keep
    if not isinstance(schema, dict):
        return result, []
    _prune_nulls(result, schema)
    _default(result, schema)
    _prune(result, schema, resource_root=True)
    causes: list[Cause] = []
    _validate(result, schema, "", causes)
    return result, causes


# --- schema lookups ----------------------------------------------------------------------------------------

def _props(schema: Schema | None) -> dict[str, Schema]:
    props = schema.get("properties") if isinstance(schema, dict) else None
    return props if isinstance(props, dict) else {}


def _additional(schema: Schema | None) -> Schema | None:
    extra = schema.get("additionalProperties") if isinstance(schema, dict) else None
    return extra if isinstance(extra, dict) else None


def _items(schema: Schema | None) -> Schema | None:
    items = schema.get("items") if isinstance(schema, dict) else None
    return items if isinstance(items, dict) else None


def _field_schema(schema: Schema | None, key: str) -> Schema | None:
    props = _props(schema)
    return props[key] if key in props else _additional(schema)


# --- nulls, defaults, pruning --------------------------------------------------------------------------------

def _prune_nulls(value: Any, schema: Schema | None) -> None:
    """Drop nulls of non-nullable fields without a default (a default replaces them later)."""
    if isinstance(value, dict):
        for key in list(value):
            sub = _field_schema(schema, key)
            if value[key] is None and sub is not None and not sub.get("nullable") and "default" not in sub:
                del value[key]
            else:
                _prune_nulls(value[key], sub)
    elif isinstance(value, list):
        for item in value:
            _prune_nulls(item, _items(schema))


def _needs_default(value: Any, schema: Schema) -> bool:
    return value is None and not schema.get("nullable") and "default" in schema


def _default(value: Any, schema: Schema | None) -> None:
    if isinstance(value, dict):
        for key, sub in _props(schema).items():
            if isinstance(sub, dict) and "default" in sub and (key not in value or _needs_default(value[key], sub)):
                value[key] = copy_json(sub["default"])
        extra = _additional(schema)
        for key, item in value.items():
            sub = _field_schema(schema, key)
            if sub is extra and extra is not None and _needs_default(item, extra):
                value[key] = item = copy_json(extra["default"])
            _default(item, sub)
    elif isinstance(value, list):
        items = _items(schema)
        for i, item in enumerate(value):
            if items is not None and _needs_default(item, items):
                value[i] = item = copy_json(items["default"])
            _default(item, items)


def _prune(value: Any, schema: Schema | None, resource_root: bool = False) -> None:
    if isinstance(value, dict):
        preserve = isinstance(schema, dict) and (schema.get("x-kubernetes-preserve-unknown-fields") is True
                                                 or schema.get("additionalProperties") is True)
        props, extra = _props(schema), _additional(schema)
        for key in list(value):
            if resource_root and key in _RESOURCE_FIELDS:
                continue  # metadata is the server's to check; apiVersion and kind are never pruned
            if key in props:
                _prune(value[key], props[key], props[key].get("x-kubernetes-embedded-resource") is True)
            elif extra is not None:
                _prune(value[key], extra, extra.get("x-kubernetes-embedded-resource") is True)
            elif not preserve:
                del value[key]
    elif isinstance(value, list):
        items = _items(schema)
        if items is not None:
            for item in value:
                _prune(item, items, items.get("x-kubernetes-embedded-resource") is True)


# --- validation ----------------------------------------------------------------------------------------------

def _type_of(value: Any) -> str:
    # Kubernetes decodes JSON numbers without a fraction or exponent as integers, others as floats.
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _num(value: float) -> str:
    # Go's %v prints 10.0 as 10.
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _subject(path: str) -> str:
    return f"{path} in body" if path else "body"


def _validate(value: Any, schema: Schema, path: str, causes: list[Cause]) -> None:
    if not isinstance(schema, dict):
        return
    actual = _type_of(value)
    expected = schema.get("type")
    if value is None:
        if expected and not schema.get("nullable"):
            causes.append(type_invalid(path, "null", f'{_subject(path)} must be of type {expected}: "null"'))
        return
    if schema.get("x-kubernetes-int-or-string") is True:
        if actual not in ("integer", "string"):
            causes.append(type_invalid(path, actual, f'{_subject(path)} must be of type integer or string: '
                                       f'"{actual}"'))
            return
    elif expected and expected != actual and not (expected == "number" and actual == "integer"):
        causes.append(type_invalid(path, actual, f'{_subject(path)} must be of type {expected}: "{actual}"'))
        return
    if "enum" in schema and isinstance(schema["enum"], list) and not any(json_equal(value, e)
                                                                          for e in schema["enum"]):
        causes.append(not_supported(path, value, [e if isinstance(e, str) else _json_text(e)
                                                  for e in schema["enum"]]))
    if actual in ("integer", "number"):
        _validate_number(value, schema, path, causes)
    elif actual == "string":
        _validate_string(value, schema, path, causes)
    elif actual == "array":
        _validate_array(value, schema, path, causes)
    elif actual == "object":
        _validate_object(value, schema, path, causes)
    _validate_composition(value, schema, path, causes)


def _json_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _validate_number(value: float, schema: Schema, path: str, causes: list[Cause]) -> None:
    subject = _subject(path)
    if isinstance(schema.get("multipleOf"), (int, float)) and schema["multipleOf"] > 0:
        quotient = value / schema["multipleOf"]
        if not math.isclose(quotient, round(quotient), rel_tol=0, abs_tol=1e-9):
            causes.append(invalid(path, value, f"{subject} should be a multiple of {_num(schema['multipleOf'])}"))
    if isinstance(schema.get("maximum"), (int, float)):
        high, exclusive = schema["maximum"], schema.get("exclusiveMaximum") is True
        if value > high or (exclusive and value == high):
            words = "less than" if exclusive else "less than or equal to"
            causes.append(invalid(path, value, f"{subject} should be {words} {_num(high)}"))
    if isinstance(schema.get("minimum"), (int, float)):
        low, exclusive = schema["minimum"], schema.get("exclusiveMinimum") is True
        if value < low or (exclusive and value == low):
            words = "greater than" if exclusive else "greater than or equal to"
            causes.append(invalid(path, value, f"{subject} should be {words} {_num(low)}"))
    bounds = _INT_RANGES.get(schema.get("format", ""))
    if bounds and (isinstance(value, float) and not value.is_integer() or not bounds[0] <= value <= bounds[1]):
        causes.append(type_invalid(path, value, f'{subject} must be of type {schema["format"]}: "{_num(value)}"'))


def _valid_format(value: str, fmt: str) -> bool:
    if fmt == "date-time":
        m = _DATE_TIME.fullmatch(value)
        if not m:
            return False
        try:
            date.fromisoformat(m.group(1))
            offset = "+00:00" if m.group(6) in "Zz" else m.group(6)
            datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}:{m.group(3)}:{m.group(4)}{offset}")
        except ValueError:
            return False
        return True
    if fmt == "date":
        try:
            return bool(_DATE.fullmatch(value)) and bool(date.fromisoformat(value))
        except ValueError:
            return False
    if fmt == "uuid":
        return bool(_UUID.fullmatch(value))
    return True  # formats we do not know are not checked, as in Kubernetes


def _validate_string(value: str, schema: Schema, path: str, causes: list[Cause]) -> None:
    subject = _subject(path)
    if isinstance(schema.get("maxLength"), int) and len(value) > schema["maxLength"]:
        causes.append(too_long(path, schema["maxLength"]))
    if isinstance(schema.get("minLength"), int) and len(value) < schema["minLength"]:
        causes.append(invalid(path, value, f"{subject} should be at least {schema['minLength']} chars long"))
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            matched = re.search(pattern, value) is not None
        except re.error:
            matched = True  # a pattern Python cannot compile is not held against the object
        if not matched:
            causes.append(invalid(path, value, f"{subject} should match '{pattern}'"))
    fmt = schema.get("format")
    if isinstance(fmt, str) and not _valid_format(value, fmt):
        causes.append(type_invalid(path, value, f'{subject} must be of type {fmt}: "{value}"'))


def _validate_array(value: list[Any], schema: Schema, path: str, causes: list[Cause]) -> None:
    subject = _subject(path)
    items = _items(schema)
    if items is not None:
        for i, item in enumerate(value):
            _validate(item, items, f"{path}[{i}]", causes)
    if isinstance(schema.get("minItems"), int) and len(value) < schema["minItems"]:
        causes.append(invalid(path, len(value), f"{subject} should have at least {schema['minItems']} items"))
    if isinstance(schema.get("maxItems"), int) and len(value) > schema["maxItems"]:
        causes.append(too_many(path, len(value), schema["maxItems"]))
    if schema.get("uniqueItems") is True and any(json_equal(value[i], value[j]) for i in range(len(value))
                                                 for j in range(i)):
        causes.append(invalid(path, "", f"{subject} shouldn't contain duplicates"))


def _validate_object(value: dict[str, Any], schema: Schema, path: str, causes: list[Cause]) -> None:
    subject = _subject(path)
    props, extra = _props(schema), _additional(schema)
    for key in schema.get("required") or []:
        if key not in value:
            causes.append(required(_child(path, key)))
    if isinstance(schema.get("maxProperties"), int) and len(value) > schema["maxProperties"]:
        causes.append(too_many(path, len(value), schema["maxProperties"]))
    if isinstance(schema.get("minProperties"), int) and len(value) < schema["minProperties"]:
        causes.append(invalid(path, len(value), f"{subject} should have at least {schema['minProperties']} "
                              "properties"))
    if schema.get("x-kubernetes-embedded-resource") is True:
        for key in ("apiVersion", "kind"):
            if not value.get(key):
                causes.append(required(_child(path, key), "must not be empty"))
    for key, item in value.items():
        if key in props:
            _validate(item, props[key], _child(path, key), causes)
        elif extra is not None:
            _validate(item, extra, _child(path, key), causes)


def _passes(value: Any, schema: Any, path: str) -> bool:
    causes: list[Cause] = []
    _validate(value, schema, path, causes)
    return not causes


def _validate_composition(value: Any, schema: Schema, path: str, causes: list[Cause]) -> None:
    """allOf/anyOf/oneOf/not: validation only (structural schemas forbid types and defaults in them)."""
    subject = _subject(path)
    for sub in schema.get("allOf") or []:
        _validate(value, sub, path, causes)
    any_of = schema.get("anyOf")
    if isinstance(any_of, list) and any_of and not any(_passes(value, s, path) for s in any_of):
        causes.append(invalid(path, value, f"{subject} must validate at least one schema (anyOf)"))
    one_of = schema.get("oneOf")
    if isinstance(one_of, list) and one_of and sum(_passes(value, s, path) for s in one_of) != 1:
        causes.append(invalid(path, value, f"{subject} must validate one and only one schema (oneOf)"))
    if isinstance(schema.get("not"), dict) and _passes(value, schema["not"], path):
        causes.append(invalid(path, value, f"{subject} must not validate the schema (not)"))
