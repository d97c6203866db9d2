"""Addons, as KubeVela lays them out: a directory with metadata.yaml, parameter.cue (the `parameter` schema) and
template.cue (`output`, and optionally `outputs`: the objects that enable the addon, here one Application),
evaluated by velashard's CUE evaluator."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import yaml

import velashard
from velashard.cue import CueError, Program, compile_sources, is_regular, label_text, plain
from velashard.cue.evaluator import Vertex
from velashard.cue.values import BasicType, Disj
from velashard.cue.vertex import LIST, STRUCT


class AddonError(Exception):
    """An unknown addon or bad parameters: the message says which and why."""


def addons_dir() -> str:
    """$VELASHARD_ADDONS_DIR, else the addons/ folder beside the package (a source checkout or the image)."""
    env = os.environ.get("VELASHARD_ADDONS_DIR")
    if env:
        return env
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(velashard.__file__))), "addons")


def _kind(arc: Vertex) -> str:
    """What a `key=value` argument for this parameter is read as: array, integer, boolean or string."""
    arc.expand()
    if arc.kind == LIST:
        return "array"
    if arc.kind == STRUCT:
        return "object"
    scalar = arc.scalar
    alts = [a for a, _ in scalar.alts] if type(scalar) is Disj else [scalar]
    for alt in alts:
        text = str(alt) if type(alt) is BasicType else type(alt).__name__
        if "int" in text or "number" in text:
            return "integer"
        if "bool" in text:
            return "boolean"
    return "string"


@dataclass
class Addon:
    name: str
    path: str
    metadata: dict[str, Any]
    program: Program

    def parameters(self) -> dict[str, str]:
        """Declared parameters and how their command-line values are read."""
        value = self.program.evaluate({}).lookup("parameter")
        if type(value) is not Vertex:
            return {}
        value.expand()
        return {label_text(k): _kind(a) for k, a in value.arcs.items() if type(k) is not int and is_regular(k)}

    def render(self, parameters: dict[str, Any]) -> list[dict[str, Any]]:
        known = self.parameters()
        unknown = sorted(set(parameters) - set(known))
        if unknown:
            raise AddonError(f'addon "{self.name}": unknown parameter "{unknown[0]}" (known: {", ".join(known)})')
        try:
            instance = self.program.evaluate({"parameter": parameters})
            instance.export("parameter", check=False)
            objects = [plain(instance.export("output", check=False))]
            if instance.exists("outputs"):
                objects.extend(plain(o) for o in (instance.export("outputs", check=False) or {}).values())
        except CueError as err:
            path = err.path[len("parameter."):] if err.path.startswith("parameter.") else err.path
            raise AddonError(f'addon "{self.name}": {"parameter " + json.dumps(path) + ": " if path else ""}'
                             f"{err.message}")
        return objects


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
    sources = {}
    for file in ("parameter.cue", "template.cue"):
        if os.path.isfile(os.path.join(path, file)):
            with open(os.path.join(path, file), encoding="utf-8") as fh:
                sources[file] = fh.read()
    try:
        program = compile_sources(sources)
    except CueError as err:
        raise AddonError(f'addon "{name}" does not compile: {err}')
    return Addon(name, path, metadata, program)


def parse_parameters(pairs: list[str], addon: Addon) -> dict[str, Any]:
    """`key=value` arguments, typed by the addon's parameters (integers, booleans, comma-separated arrays)."""
    kinds = addon.parameters()
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise AddonError(f"parameter {pair!r}: expected key=value")
        kind = kinds.get(key, "string")
        try:
            if kind == "array":
                out[key] = [v for v in raw.split(",") if v]
            elif kind in ("integer", "boolean", "object"):
                out[key] = yaml.safe_load(raw)
            else:
                out[key] = raw
        except yaml.YAMLError:
            raise AddonError(f"parameter {key}: cannot read {raw!r} as {kind}")
    return out
