"""What an admission request is about, and whether a rule (RuleWithOperations) matches it: shared by the
webhooks and ValidatingAdmissionPolicy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from velashard.apiserver.storage.resources import ResourceType


@dataclass
class Attributes:
    """What one admission request is about."""

    operation: str  # CREATE, UPDATE or DELETE
    rt: ResourceType
    subresource: str | None
    namespace: str
    name: str
    obj: dict[str, Any] | None
    old: dict[str, Any] | None
    user: dict[str, Any]
    dry_run: bool = False
    warnings: list[str] = field(default_factory=list)  # sent back as `Warning` headers
    annotations: dict[str, str] = field(default_factory=dict)  # recorded in the audit log


def rule_matches(rule: dict[str, Any], attrs: Attributes) -> bool:
    """One RuleWithOperations against a request (operations, groups, versions, resources, scope)."""
    ops = rule.get("operations") or []
    if "*" not in ops and attrs.operation not in ops:
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and attrs.rt.group not in groups:
        return False
    versions = rule.get("apiVersions") or []
    if "*" not in versions and attrs.rt.version not in versions:
        return False
    scope = rule.get("scope") or "*"
    if scope == "Cluster" and attrs.rt.namespaced or scope == "Namespaced" and not attrs.rt.namespaced:
        return False
    wanted = f"{attrs.rt.plural}/{attrs.subresource}" if attrs.subresource else attrs.rt.plural
    for res in rule.get("resources") or []:
        if res == wanted or res == "*/*":
            return True
        main, _, sub = res.partition("/")
        if not attrs.subresource:
            if res == "*" or (not sub and main == attrs.rt.plural):
                return True
        elif sub and (main in ("*", attrs.rt.plural)) and sub in ("*", attrs.subresource):
            return True
    return False
