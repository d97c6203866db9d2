"""The built-in component and trait definitions installed into vela-system by `velashard install`."""

from __future__ import annotations

import copy
from typing import Any

from velashard.apis.oam import API_VERSION, SYSTEM_NAMESPACE
from velashard.core.catalog.components import COMPONENTS
from velashard.core.catalog.traits import TRAITS


def _definition(kind: str, entry: dict[str, Any]) -> dict[str, Any]:
    jinja: dict[str, Any] = {"template": entry["template"], "parameters": copy.deepcopy(entry["parameters"])}
    for key in ("patchType", "refObjects"):
        if key in entry:
            jinja[key] = entry[key]
    spec: dict[str, Any] = {"schematic": {"jinja": jinja}}
    if entry.get("workload"):
        group_version, _, wkind = entry["workload"].rpartition("/")
        spec["workload"] = {"definition": {"apiVersion": group_version, "kind": wkind}}
    if entry.get("health"):
        spec["status"] = {"healthPolicy": entry["health"]}
    return {"apiVersion": API_VERSION, "kind": kind,
            "metadata": {"name": entry["name"], "namespace": SYSTEM_NAMESPACE,
                         "annotations": {"definition.oam.dev/description": entry["description"]}},
            "spec": spec}


def builtin_definitions() -> list[dict[str, Any]]:
    return ([_definition("ComponentDefinition", c) for c in COMPONENTS]
            + [_definition("TraitDefinition", t) for t in TRAITS])
