"""OpenAPI v3 schemas of the built-in kinds, derived at run time from the installed official
`kubernetes` Python client, whose models are generated from Kubernetes' own OpenAPI document:
each model's `openapi_types` and `attribute_map` give the fields and their types, its pydantic
fields the descriptions and required fields, its docstring the type's description.

`schemas_for` builds the components reachable from a set of kinds; `validate` checks an object
against them (the CI schema check of what the embedded server and its simulators produce).
"""

from __future__ import annotations

import functools
import inspect
import re
from typing import Any

from kubernetes.client import models

from velashard.patch.strategic_merge import list_strategy

_PRIMITIVES: dict[str, dict[str, Any]] = {
    "str": {"type": "string"}, "int": {"type": "integer"}, "float": {"type": "number"},
    "bool": {"type": "boolean"}, "datetime": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"}, "bytes": {"type": "string", "format": "byte"},
    "object": {"x-kubernetes-preserve-unknown-fields": True},
}
_MODEL_NAME = re.compile(r"^([A-Z][a-z]+)?(V\d+(?:alpha\d+|beta\d+)?)([A-Z]\w*)$")
_REF_PREFIX = "#/components/schemas/"


def model_class(name: str) -> type | None:
    cls = getattr(models, name, None)
    return cls if isinstance(getattr(cls, "openapi_types", None), dict) else None


def component_name(model: str) -> str:
    """`V1ObjectMeta` -> `v1.ObjectMeta`, `RbacV1Subject` -> `rbac.v1.Subject` (what kubectl explain shows
    is the part after the last dot)."""
    match = _MODEL_NAME.match(model)
    if not match:
        return model
    group, version, rest = match.groups()
    return ".".join(p for p in ((group or "").lower(), version.lower(), rest) if p)


def model_for_kind(version: str, kind: str) -> str:
    return f"{version[0].upper()}{version[1:]}{kind}"


def _description(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    first = doc.split("\n\n")[0].strip()
    return "" if first.startswith("NOTE: This class is auto generated") else " ".join(first.split())


class _Builder:
    def __init__(self) -> None:
        self.components: dict[str, dict[str, Any]] = {}

    def type_schema(self, text: str, path: tuple[str, ...], kind: str | None) -> dict[str, Any]:
        text = text.strip()
        if text in _PRIMITIVES:
            return dict(_PRIMITIVES[text])
        if text.startswith("List[") and text.endswith("]"):
            schema: dict[str, Any] = {"type": "array", "items": self.type_schema(text[5:-1], path, kind)}
            strategy = list_strategy(path, kind)
            if strategy == "set":
                schema["x-kubernetes-patch-strategy"] = "merge"
            elif strategy:
                schema["x-kubernetes-patch-strategy"] = "merge"
                schema["x-kubernetes-patch-merge-key"] = strategy
            return schema
        if text.startswith("Dict[str,") and text.endswith("]"):
            return {"type": "object", "additionalProperties": self.type_schema(text[9:-1], path, kind)}
        if model_class(text) is not None:
            return {"allOf": [{"$ref": _REF_PREFIX + self.model(text, path, kind)}]}
        return {}

    def model(self, name: str, path: tuple[str, ...] = (), kind: str | None = None) -> str:
        component = component_name(name)
        if component in self.components:
            return component
        cls = model_class(name)
        assert cls is not None
        schema: dict[str, Any] = {"type": "object", "properties": {}}
        self.components[component] = schema  # before the fields: types refer to themselves (JSONSchemaProps)
        description = _description(cls)
        if description:
            schema["description"] = description
        fields = getattr(cls, "model_fields", {})
        required = []
        for attr, type_text in cls.openapi_types.items():  # type: ignore[attr-defined]
            json_name = cls.attribute_map[attr]  # type: ignore[attr-defined]
            prop = self.type_schema(type_text, path + (json_name,), kind)
            info = fields.get(attr)
            if info is not None and info.description:
                prop["description"] = info.description
            if info is not None and info.is_required():
                required.append(json_name)
            schema["properties"][json_name] = prop
        if required:
            schema["required"] = required
        return component


@functools.lru_cache(maxsize=64)
def _build(kinds: tuple[tuple[str, str, str], ...]) -> dict[str, dict[str, Any]]:
    builder = _Builder()
    for group, version, kind in kinds:
        name = model_for_kind(version, kind)
        if model_class(name) is None:
            continue
        for model, kind_name in ((name, kind), (name + "List", kind + "List")):
            if model_class(model) is None:
                continue
            component = builder.model(model, (), kind_name)
            builder.components[component]["x-kubernetes-group-version-kind"] = [
                {"group": group, "version": version, "kind": kind_name}]
    return builder.components


def schemas_for(kinds: list[tuple[str, str, str]]) -> dict[str, dict[str, Any]]:
    """Components for the (group, version, kind) roots that the client knows, and what they reference."""
    return _build(tuple(sorted(set(kinds))))


def root_component(version: str, kind: str) -> str | None:
    name = model_for_kind(version, kind)
    return component_name(name) if model_class(name) is not None else None


def validate(obj: Any, schema: dict[str, Any], components: dict[str, dict[str, Any]], where: str = "") -> list[str]:
    """Where `obj` breaks `schema`: wrong types, missing required fields, unknown fields."""
    for ref in schema.get("allOf", []):
        schema = components[ref["$ref"][len(_REF_PREFIX):]]
    if "$ref" in schema:
        schema = components[schema["$ref"][len(_REF_PREFIX):]]
    if obj is None or schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    kind = schema.get("type")
    problems: list[str] = []
    checks = {"string": str, "boolean": bool, "number": (int, float), "array": list, "object": dict}
    if kind == "integer":
        if not isinstance(obj, int) or isinstance(obj, bool):
            return [f"{where or '.'}: expected integer, got {type(obj).__name__}"]
        return []
    if kind in checks and (not isinstance(obj, checks[kind]) or kind == "number" and isinstance(obj, bool)):
        return [f"{where or '.'}: expected {kind}, got {type(obj).__name__}"]
    if kind == "array":
        for i, item in enumerate(obj):
            problems += validate(item, schema.get("items", {}), components, f"{where}[{i}]")
    elif kind == "object" and "properties" in schema:
        for name in schema.get("required", []):
            if name not in obj:
                problems.append(f"{where}.{name}: required field missing")
        for name, value in obj.items():
            prop = schema["properties"].get(name)
            if prop is None:
                problems.append(f"{where}.{name}: unknown field")
            else:
                problems += validate(value, prop, components, f"{where}.{name}")
    elif kind == "object" and "additionalProperties" in schema:
        for name, value in obj.items():
            problems += validate(value, schema["additionalProperties"], components, f"{where}.{name}")
    return problems
