"""Application policies: which types take effect here, and `override` policies merged into the spec."""

from __future__ import annotations

import copy
from typing import Any

from velashard.core.resourcepolicies import RESOURCE_POLICY_TYPES, validate

# replication and env-binding act in the steps that name them (deploy, deploy2env), on the local cluster
POLICY_TYPES_SUPPORTED = ("topology", "override", "replication", "env-binding") + RESOURCE_POLICY_TYPES


def unsupported_policies(spec: dict[str, Any]) -> list[str]:
    """Types of the policies that are kept but have no effect: unknown types, and topology beyond the local
    cluster (there is no multi-cluster)."""
    return sorted(map(str, (p.get("type") for p in spec.get("policies") or []
                            if p.get("type") not in POLICY_TYPES_SUPPORTED or p.get("type") == "topology"
                            and (p.get("properties") or {}).get("clusters", ["local"]) != ["local"])))


def policy_problem(spec: dict[str, Any]) -> str | None:
    """What is wrong with the first invalid resource policy, or None."""
    for policy in spec.get("policies") or []:
        if policy.get("type") in RESOURCE_POLICY_TYPES:
            problem = validate(policy)
            if problem:
                return problem
    return None


def with_overrides(app: dict[str, Any]) -> dict[str, Any]:
    """Apply `override` policies: per-component property and trait overrides, merged into the spec."""
    overrides = [p for p in (app.get("spec") or {}).get("policies") or [] if p.get("type") == "override"]
    if not overrides:
        return app
    app = copy.deepcopy(app)
    for policy in overrides:
        for item in (policy.get("properties") or {}).get("components") or []:
            for comp in app["spec"].get("components") or []:
                if item.get("name") not in (None, comp.get("name")) or item.get("type") not in (None, comp.get("type")):
                    continue
                comp["properties"] = {**(comp.get("properties") or {}), **(item.get("properties") or {})}
                for trait in item.get("traits") or []:
                    existing = next((t for t in comp.setdefault("traits", []) if t.get("type") == trait.get("type")),
                                    None)
                    if existing is None:
                        comp["traits"].append(copy.deepcopy(trait))
                    else:
                        existing["properties"] = {**(existing.get("properties") or {}),
                                                  **(trait.get("properties") or {})}
    return app
