"""What `velashard def show` prints: a definition's parameters as rows, nested objects as their own tables.

Pure functions over a definition object (ours or any with a jinja or kube schematic).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Row:
    name: str
    description: str
    type: str
    required: bool
    default: str


@dataclass(frozen=True)
class Table:
    path: str  # "" for the top level, else the dotted parameter path, e.g. "volumeMounts.pvc"
    rows: tuple[Row, ...]


def _type_name(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(kind)
    if kind == "array":
        items = schema.get("items") or {}
        return f"[]{_type_name(items)}" if items.get("type") != "object" or not items.get("properties") else "[]object"
    if kind == "object" and not schema.get("properties"):
        extra = schema.get("additionalProperties")
        return f"map[string]{_type_name(extra)}" if isinstance(extra, dict) else "object"
    return kind or "any"


def _nested(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The object schema to describe in its own table, if the parameter is an object or a list of objects."""
    if schema.get("type") == "object" and schema.get("properties"):
        return schema
    items = schema.get("items") if schema.get("type") == "array" else None
    if isinstance(items, dict) and items.get("type") == "object" and items.get("properties"):
        return items
    return None


def parameter_tables(schema: dict[str, Any], path: str = "") -> list[Table]:
    """The top-level parameters, then one table per nested object, depth first, like `vela show`."""
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    rows = []
    nested: list[Table] = []
    for name in sorted(properties, key=lambda n: (n not in required, n)):
        sub = properties[name]
        default = json.dumps(sub["default"]) if "default" in sub else ""
        rows.append(Row(name, sub.get("description", ""), _type_name(sub), name in required, default))
        inner = _nested(sub)
        if inner is not None:
            nested.extend(parameter_tables(inner, f"{path}.{name}" if path else name))
    return [Table(path, tuple(rows))] + nested


def definition_schema(definition: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema of a definition's parameters (jinja schematic, or KubeVela's kube schematic)."""
    schematic = (definition.get("spec") or {}).get("schematic") or {}
    if "jinja" in schematic:
        return schematic["jinja"].get("parameters") or {}
    if "kube" in schematic:
        params = schematic["kube"].get("parameters") or []
        return {"type": "object", "required": [p["name"] for p in params if p.get("required")],
                "properties": {p["name"]: {k: v for k, v in (("type", p.get("type")), ("default", p.get("default")),
                                                             ("description", p.get("description"))) if v is not None}
                               for p in params}}
    return {}


def render_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """A bordered text table, the way `vela show` prints parameters."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [line, "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |", line]
    out += ["| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths)) + " |" for row in rows]
    out.append(line)
    return "\n".join(out)
