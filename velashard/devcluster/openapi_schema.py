"""Structural schemas of CustomResourceDefinitions: defaulting, pruning and validation of custom resources."""

from __future__ import annotations

import copy
import json
import re
from datetime import datetime
from typing import Any

from velashard.devcluster.validation import Cause

_ROOT_KEPT = {"apiVersion", "kind", "metadata"}


def apply_schema(obj: dict[str, Any], schema: dict[str, Any]) -> tuple[dict[str, Any], list[Cause]]:
    """Return a defaulted, pruned copy of `obj` and the validation causes against `schema`."""
    result = copy.deepcopy(obj)
    result = _default_and_prune(result, schema, root=True)
    causes: list[Cause] = []
    _validate(result, schema, "", causes, root=True)
    return result, causes


def _type_of(value: Any) -> str:
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


def _default_and_prune(value: Any, schema: dict[str, Any], root: bool = False) -> Any:
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        props = schema.get("properties")
        additional = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
        embedded = schema.get("x-kubernetes-embedded-resource") is True
        if isinstance(props, dict):
            for key, sub in props.items():
                if key not in value and isinstance(sub, dict) and "default" in sub:
                    value[key] = copy.deepcopy(sub["default"])
        for key in list(value):
            if isinstance(props, dict) and key in props:
                value[key] = _default_and_prune(value[key], props[key])
            elif isinstance(additional, dict):
                value[key] = _default_and_prune(value[key], additional)
            elif (root or embedded) and key in _ROOT_KEPT:
                continue
            elif not (preserve or additional is True):
                del value[key]  # unknown fields are pruned, as for structural schemas
        return value
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_default_and_prune(v, schema["items"]) for v in value]
    return value


def _field(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _show(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else f'"{value}"'


def _validate(value: Any, schema: dict[str, Any], path: str, causes: list[Cause], root: bool = False) -> None:
    if not isinstance(schema, dict):
        return
    where = path or "<root>"
    if value is None:
        if not schema.get("nullable") and schema.get("type"):
            causes.append(Cause(where, f'Invalid value: "null": {where} in body must be of type '
                                f'{schema["type"]}: "null"', "FieldValueTypeInvalid"))
        return
    expected = schema.get("type")
    actual = _type_of(value)
    if schema.get("x-kubernetes-int-or-string"):
        if actual not in ("integer", "string"):
            causes.append(Cause(where, f"Invalid value: {_show(value)}: {where} in body must be of type "
                                f"integer or string: \"{actual}\"", "FieldValueTypeInvalid"))
            return
    elif expected and not (expected == actual or expected == "number" and actual == "integer"):
        causes.append(Cause(where, f'Invalid value: "{actual}": {where} in body must be of type {expected}: '
                            f'"{actual}"', "FieldValueTypeInvalid"))
        return
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(_show(v) for v in schema["enum"])
        causes.append(Cause(where, f"Unsupported value: {_show(value)}: supported values: {supported}",
                            "FieldValueNotSupported"))
    if actual in ("integer", "number"):
        _check_number(value, schema, where, causes)
    elif actual == "string":
        _check_string(value, schema, where, causes)
    elif actual == "array":
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            causes.append(Cause(where, f"Too many: {len(value)}: must have at most {schema['maxItems']} items",
                                "FieldValueTooMany"))
        if "minItems" in schema and len(value) < schema["minItems"]:
            causes.append(Cause(where, f"Invalid value: {len(value)}: {where} in body should have at least "
                                f"{schema['minItems']} items"))
        if schema.get("uniqueItems"):
            seen = []
            for item in value:
                if item in seen:
                    causes.append(Cause(where, f"Duplicate value: {_show(item)}", "FieldValueDuplicate"))
                seen.append(item)
        if isinstance(schema.get("items"), dict):
            for i, item in enumerate(value):
                _validate(item, schema["items"], _field(path, i), causes)
    elif actual == "object":
        for key in schema.get("required") or []:
            if key not in value:
                causes.append(Cause(_field(path, key), "Required value", "FieldValueRequired"))
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            causes.append(Cause(where, f"Too many: {len(value)}: must have at most {schema['maxProperties']} items",
                                "FieldValueTooMany"))
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            causes.append(Cause(where, f"Invalid value: {len(value)}: {where} in body should have at least "
                                f"{schema['minProperties']} properties"))
        props = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            if root and key in _ROOT_KEPT and key not in props:
                continue
            if key in props:
                _validate(item, props[key], _field(path, key), causes)
            elif isinstance(additional, dict):
                _validate(item, additional, _field(path, key), causes)
    for sub in schema.get("allOf") or []:
        _validate(value, sub, path, causes)
    if schema.get("anyOf"):
        if not any(_passes(value, s) for s in schema["anyOf"]):
            causes.append(Cause(where, f"Invalid value: {_show(value)}: {where} in body must match at least one "
                                "schema in anyOf"))
    if schema.get("oneOf"):
        if sum(1 for s in schema["oneOf"] if _passes(value, s)) != 1:
            causes.append(Cause(where, f"Invalid value: {_show(value)}: {where} in body must match exactly one "
                                "schema in oneOf"))
    if isinstance(schema.get("not"), dict) and _passes(value, schema["not"]):
        causes.append(Cause(where, f"Invalid value: {_show(value)}: {where} in body must not match the schema in "
                            "not"))


def _passes(value: Any, schema: dict[str, Any]) -> bool:
    causes: list[Cause] = []
    _validate(value, schema, "", causes)
    return not causes


def _check_number(value: float, schema: dict[str, Any], where: str, causes: list[Cause]) -> None:
    if "minimum" in schema:
        low = schema["minimum"]
        if value < low or (schema.get("exclusiveMinimum") is True and value == low):
            causes.append(Cause(where, f"Invalid value: {value}: {where} in body should be greater than or equal to "
                                f"{low}"))
    if "maximum" in schema:
        high = schema["maximum"]
        if value > high or (schema.get("exclusiveMaximum") is True and value == high):
            causes.append(Cause(where, f"Invalid value: {value}: {where} in body should be less than or equal to "
                                f"{high}"))
    fmt = schema.get("format")
    if fmt == "int32" and not -2**31 <= value < 2**31 or fmt == "int64" and not -2**63 <= value < 2**63:
        causes.append(Cause(where, f"Invalid value: {value}: {where} in body must be of format {fmt}"))


def _check_string(value: str, schema: dict[str, Any], where: str, causes: list[Cause]) -> None:
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        causes.append(Cause(where, f"Too long: may not be more than {schema['maxLength']} bytes",
                            "FieldValueTooLong"))
    if "minLength" in schema and len(value) < schema["minLength"]:
        causes.append(Cause(where, f'Invalid value: "{value}": {where} in body should be at least '
                            f'{schema["minLength"]} chars long'))
    if "pattern" in schema:
        try:
            if not re.search(schema["pattern"], value):
                causes.append(Cause(where, f'Invalid value: "{value}": {where} in body should match '
                                    f"'{schema['pattern']}'"))
        except re.error:
            pass
    if schema.get("format") == "date-time":
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            causes.append(Cause(where, f'Invalid value: "{value}": {where} in body must be of type date-time'))
