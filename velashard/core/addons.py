"""Addons: a directory with metadata.yaml, parameter.json (a JSON schema) and template.yaml.j2, rendered
in the same sandbox as definitions into the objects that enable the addon (one Application here)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import yaml

import velashard
from velashard.core.rendering import RenderError, _ENV, _validate_parameters


class AddonError(Exception):
    """An unknown addon or bad parameters: the message says which and why."""


def addons_dir() -> str:
    """$VELASHARD_ADDONS_DIR, else the addons/ folder beside the package (a source checkout or the image)."""
    env = os.environ.get("VELASHARD_ADDONS_DIR")
    if env:
        return env
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(velashard.__file__))), "addons")


@dataclass
class Addon:
    name: str
    path: str
    metadata: dict[str, Any]
    schema: dict[str, Any]

    def render(self, parameters: dict[str, Any]) -> list[dict[str, Any]]:
        try:
            params = _validate_parameters(self.schema, parameters, f"addon {self.name}", None)
            with open(os.path.join(self.path, "template.yaml.j2")) as fh:
                text = _ENV.from_string(fh.read()).render(parameter=params)
        except RenderError as err:
            raise AddonError(str(err).replace('component "addon ', 'addon "', 1))
        return [doc for doc in yaml.safe_load_all(text) if doc]


def list_addons(directory: str | None = None) -> list[Addon]:
    root = directory or addons_dir()
    if not os.path.isdir(root):
        return []
    return [load_addon(name, root) for name in sorted(os.listdir(root))
            if os.path.isfile(os.path.join(root, name, "metadata.yaml"))]


def load_addon(name: str, directory: str | None = None) -> Addon:
    path = os.path.join(directory or addons_dir(), name)
    if not os.path.isfile(os.path.join(path, "metadata.yaml")):
        known = ", ".join(a.name for a in list_addons(directory)) or "none"
        raise AddonError(f'unknown addon "{name}" (available: {known})')
    with open(os.path.join(path, "metadata.yaml")) as fh:
        metadata = yaml.safe_load(fh) or {}
    schema_path = os.path.join(path, "parameter.json")
    schema = json.load(open(schema_path)) if os.path.isfile(schema_path) else {"type": "object"}
    return Addon(name, path, metadata, schema)


def parse_parameters(pairs: list[str], schema: dict[str, Any]) -> dict[str, Any]:
    """`key=value` arguments, typed by the schema (integers, booleans, comma-separated arrays)."""
    out: dict[str, Any] = {}
    props = schema.get("properties") or {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise AddonError(f"parameter {pair!r}: expected key=value")
        kind = (props.get(key) or {}).get("type")
        try:
            if kind == "array":
                out[key] = [v for v in raw.split(",") if v]
            elif kind in ("integer", "number", "boolean"):
                out[key] = yaml.safe_load(raw)
            else:
                out[key] = raw
        except yaml.YAMLError:
            raise AddonError(f"parameter {key}: cannot read {raw!r} as {kind}")
    return out
