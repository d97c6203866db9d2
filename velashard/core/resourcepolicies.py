"""KubeVela's resource policies as pure decisions over rendered resources: garbage-collect, apply-once,
shared-resource, read-only, take-over and resource-update, each with rules that pick resources by selector."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

RESOURCE_POLICY_TYPES = ("garbage-collect", "apply-once", "shared-resource", "read-only", "take-over",
                         "resource-update")
_SELECTOR_FIELDS = {"componentNames": "component", "componentTypes": "component_type", "oamTypes": "oam_type",
                    "traitTypes": "trait_type", "resourceTypes": "kind", "resourceNames": "name"}


@dataclass(frozen=True)
class ResourceInfo:
    """What a selector can look at: the resource and where in the app it came from."""

    component: str
    component_type: str
    oam_type: str  # COMPONENT (the workload) or TRAIT (any other output)
    trait_type: str  # the trait that produced it, "" for the workload
    kind: str
    name: str


def selects(selector: dict[str, Any] | None, info: ResourceInfo) -> bool:
    """Every field given must list the resource's value (an empty selector selects nothing, as KubeVela's)."""
    given = {k: v for k, v in (selector or {}).items() if k in _SELECTOR_FIELDS and v is not None}
    if not given:
        return False
    return all(getattr(info, _SELECTOR_FIELDS[k]) in (v or []) for k, v in given.items())


def validate(policy: dict[str, Any]) -> str | None:
    """A message naming what is wrong with a resource policy, or None."""
    ptype, props = policy.get("type"), policy.get("properties") or {}
    where = f'policy "{policy.get("name", ptype)}"'
    if not isinstance(props, dict):
        return f"{where}: properties must be an object"
    rules = props.get("rules") or []
    if not isinstance(rules, list):
        return f"{where}: properties.rules must be a list"
    for i, rule in enumerate(rules):
        if not isinstance(rule, dict):
            return f"{where}: rules[{i}] must be an object"
        unknown = sorted(set(rule.get("selector") or {}) - set(_SELECTOR_FIELDS))
        if unknown:
            return f'{where}: rules[{i}].selector: unknown field "{unknown[0]}" (known: {", ".join(_SELECTOR_FIELDS)})'
        if ptype == "garbage-collect" and rule.get("strategy", "onAppUpdate") not in ("onAppUpdate", "onAppDelete",
                                                                                     "never"):
            return f'{where}: rules[{i}].strategy must be onAppUpdate, onAppDelete or never'
        if ptype == "resource-update" and (rule.get("strategy") or {}).get("op", "patch") not in ("patch",
                                                                                                 "replace"):
            return f'{where}: rules[{i}].strategy.op must be patch or replace'
    if ptype == "garbage-collect" and props.get("order", "") not in ("", "dependency"):
        return f'{where}: properties.order must be "dependency" when set'
    return None


def _policies(spec: dict[str, Any], ptype: str) -> list[dict[str, Any]]:
    return [p.get("properties") or {} for p in spec.get("policies") or [] if p.get("type") == ptype]


def _first_rule(spec: dict[str, Any], ptype: str, info: ResourceInfo) -> dict[str, Any] | None:
    for props in _policies(spec, ptype):
        for rule in props.get("rules") or []:
            if selects(rule.get("selector"), info):
                return rule
    return None


def gc_strategy(spec: dict[str, Any], info: ResourceInfo) -> str:
    """When a resource that is no longer rendered may be deleted: onAppUpdate (default), onAppDelete or never."""
    rule = _first_rule(spec, "garbage-collect", info)
    return rule.get("strategy", "onAppUpdate") if rule else "onAppUpdate"


def keep_legacy_resources(spec: dict[str, Any]) -> bool:
    """keepLegacyResource: resources of earlier revisions are kept until the app is deleted."""
    return any(p.get("keepLegacyResource") for p in _policies(spec, "garbage-collect"))


def delete_in_dependency_order(spec: dict[str, Any]) -> bool:
    return any(p.get("order") == "dependency" for p in _policies(spec, "garbage-collect"))


def deletion_order(components: list[tuple[str, list[str]]]) -> list[str]:
    """Components ordered so that dependents go before what they depend on (order: dependency)."""
    deps = dict(components)
    done: list[str] = []

    def visit(name: str, seen: frozenset[str]) -> None:
        if name in done or name in seen:
            return
        for other, needs in components:
            if name in needs:
                visit(other, seen | {name})
        done.append(name)

    for name, _ in components:
        visit(name, frozenset())
    return [n for n in done if n in deps]


def is_read_only(spec: dict[str, Any], info: ResourceInfo) -> bool:
    """read-only: the resource is never written, only read (it must exist)."""
    return _first_rule(spec, "read-only", info) is not None


def is_shared(spec: dict[str, Any], info: ResourceInfo) -> bool:
    """shared-resource: other apps may also manage it; it is deleted only when the last sharer lets go."""
    return _first_rule(spec, "shared-resource", info) is not None


def may_take_over(spec: dict[str, Any], info: ResourceInfo) -> bool:
    """take-over: an existing resource that no app manages may be adopted."""
    return _first_rule(spec, "take-over", info) is not None


def update_op(spec: dict[str, Any], info: ResourceInfo) -> str:
    """resource-update: "patch" (default, three-way merge) or "replace" (the rendered object replaces the live)."""
    rule = _first_rule(spec, "resource-update", info)
    return (rule.get("strategy") or {}).get("op", "patch") if rule else "patch"


def apply_once(spec: dict[str, Any], info: ResourceInfo, state_keep: bool) -> list[str] | None:
    """apply-once: None when the resource is written as rendered; else the field paths to leave as they are live
    (["*"] = the whole object) on this write (`state_keep`: a periodic re-apply rather than an app update)."""
    for props in _policies(spec, "apply-once"):
        if not props.get("enable"):
            continue
        rules = props.get("rules")
        if not rules:
            return ["*"] if state_keep else None  # enabled without rules: only the first apply and updates
        for rule in rules:
            if not selects(rule.get("selector"), info):
                continue
            strategy = rule.get("strategy") or {}
            affect = strategy.get("affect") or "always"
            if affect == "always" or (affect == "onStateKeep") == state_keep:
                return list(strategy.get("path") or ["*"])
    return None


def keep_live_paths(desired: dict[str, Any], live: dict[str, Any], paths: list[str]) -> dict[str, Any]:
    """`desired` with the values at `paths` (dotted, e.g. spec.replicas) taken from `live`; ["*"] keeps all."""
    if "*" in paths:
        return copy.deepcopy(live)
    out = copy.deepcopy(desired)
    for path in paths:
        keys = path.split(".")
        src: Any = live
        for key in keys:
            src = src.get(key) if isinstance(src, dict) else None
        if src is None:
            continue
        node = out
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = copy.deepcopy(src)
    return out


def info_of(app: dict[str, Any], ref: dict[str, Any]) -> ResourceInfo:
    """How resource-policy selectors see a resource the app renders or tracks."""
    types = {c.get("name"): c.get("type", "") for c in (app.get("spec") or {}).get("components") or []}
    component = ref.get("component", "")
    return ResourceInfo(component, types.get(component, ""), "TRAIT" if ref.get("trait") else "COMPONENT",
                        ref.get("trait", ""), ref["kind"], ref["name"])
