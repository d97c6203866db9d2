"""Kubernetes' RBAC authorizer over the embedded server's Roles, ClusterRoles and their bindings.

A request is allowed when the user is in `system:masters` or a rule of a role bound to the user,
one of its groups or its ServiceAccount allows it: ClusterRoleBindings everywhere, RoleBindings in
their namespace (to a Role or a ClusterRole). Rules match verbs, API groups, resources (with
`res/sub` and `*/sub` subresources), resource names and non-resource URLs as kube-apiserver's do.
Bindings are indexed by subject and the rules of each (user, groups, namespace) cached; any change
to an RBAC object drops the index. ClusterRoles with an aggregationRule get the rules of the
ClusterRoles their selectors match.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from velashard.apiserver.auth.authn import split_service_account
from velashard.apiserver.storage.selectors import SelectorError, label_selector_from_dict

RBAC_GROUP = "rbac.authorization.k8s.io"
MASTERS = "system:masters"
RBAC_RESOURCES = frozenset({"roles", "rolebindings", "clusterroles", "clusterrolebindings"})

# (resource, namespace) -> objects of that RBAC resource (namespace None: all namespaces)
Lister = Callable[[str], list[dict[str, Any]]]


@dataclass(frozen=True)
class Attributes:
    """What a request does, in the authorizer's terms."""

    user: str
    groups: tuple[str, ...]
    verb: str
    namespace: str = ""
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""
    resource_request: bool = True


@dataclass(frozen=True)
class Grant:
    """A rule and where it comes from (for review reasons)."""

    rule: dict[str, Any]
    binding_kind: str
    binding: str
    binding_namespace: str
    role_kind: str
    role: str
    subject: str


def _has(values: Iterable[str] | None, wanted: str) -> bool:
    values = values or ()
    return "*" in values or wanted in values


def rule_allows(rule: dict[str, Any], attrs: Attributes) -> bool:
    if not _has(rule.get("verbs"), attrs.verb):
        return False
    if not attrs.resource_request:
        return any(url == "*" or url == attrs.path or (url.endswith("*") and attrs.path.startswith(url[:-1]))
                   for url in rule.get("nonResourceURLs") or ())
    if not _has(rule.get("apiGroups"), attrs.api_group):
        return False
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    if not any(r == "*" or r == combined or (attrs.subresource and r == f"*/{attrs.subresource}")
               for r in rule.get("resources") or ()):
        return False
    names = rule.get("resourceNames") or ()
    return not names or attrs.name in names


def _subject_keys(subject: dict[str, Any], binding_namespace: str) -> str | None:
    kind, name = subject.get("kind"), subject.get("name") or ""
    if kind == "User":
        return f"u:{name}"
    if kind == "Group":
        return f"g:{name}"
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return f"u:system:serviceaccount:{namespace}:{name}"
    return None


class Authorizer:
    """RBAC decisions; `invalidate()` after any change to an RBAC object."""

    def __init__(self, lister: Lister):
        self._list = lister
        self._lock = threading.Lock()
        self._generation = 0
        self._index: _Index | None = None
        self._cache: dict[tuple[str, tuple[str, ...], str], list[Grant]] = {}

    def invalidate(self) -> None:
        with self._lock:
            self._generation += 1
            self._index = None
            self._cache = {}

    def authorize(self, attrs: Attributes) -> tuple[bool, str]:
        """(allowed, reason) as the RBAC authorizer (behind the system:masters shortcut) decides."""
        if MASTERS in attrs.groups:
            return True, ""
        for grant in self.grants(attrs.user, attrs.groups, attrs.namespace):
            if rule_allows(grant.rule, attrs):
                where = f' in namespace "{grant.binding_namespace}"' if grant.binding_namespace else ""
                return True, (f'RBAC: allowed by {grant.binding_kind} "{grant.binding}" of {grant.role_kind} '
                              f'"{grant.role}" to {grant.subject}{where}')
        return False, ""

    def grants(self, user: str, groups: Iterable[str], namespace: str) -> list[Grant]:
        """Every rule that applies to the user in `namespace` (cluster-wide ones included)."""
        key = (user, tuple(groups), namespace)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        with self._lock:
            generation = self._generation
            index = self._index
        if index is None:
            index = _Index(self._list)
            with self._lock:
                if self._generation == generation:
                    self._index = index
        subjects = [f"u:{user}"] + [f"g:{g}" for g in key[1]]
        found = index.grants(subjects, namespace)
        with self._lock:
            if self._generation == generation:
                self._cache[key] = found
        return found


class _Index:
    """Bindings by subject, roles by name: a snapshot of the RBAC objects."""

    def __init__(self, lister: Lister):
        self.cluster_roles = {o["metadata"]["name"]: o for o in lister("clusterroles")}
        self.roles = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in lister("roles")}
        self.cluster_bindings: dict[str, list[dict[str, Any]]] = {}
        self.bindings: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for binding in lister("clusterrolebindings"):
            for subject in binding.get("subjects") or ():
                key = _subject_keys(subject, "")
                if key:
                    self.cluster_bindings.setdefault(key, []).append(binding)
        for binding in lister("rolebindings"):
            namespace = binding["metadata"].get("namespace", "")
            for subject in binding.get("subjects") or ():
                key = _subject_keys(subject, namespace)
                if key:
                    self.bindings.setdefault((namespace, key), []).append(binding)

    def _rules(self, ref: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
        if ref.get("kind") == "ClusterRole":
            role = self.cluster_roles.get(ref.get("name", ""))
        elif ref.get("kind") == "Role":
            role = self.roles.get((namespace, ref.get("name", "")))
        else:
            role = None
        return [r for r in (role or {}).get("rules") or () if isinstance(r, dict)]

    def grants(self, subjects: list[str], namespace: str) -> list[Grant]:
        out: list[Grant] = []
        seen: set[int] = set()
        for subject in subjects:
            for binding in self.cluster_bindings.get(subject, ()):
                if id(binding) in seen:
                    continue
                seen.add(id(binding))
                ref = binding.get("roleRef") or {}
                for rule in self._rules(ref, ""):
                    out.append(Grant(rule, "ClusterRoleBinding", binding["metadata"]["name"], "",
                                     ref.get("kind", ""), ref.get("name", ""), _describe(subject)))
        if namespace:
            for subject in subjects:
                for binding in self.bindings.get((namespace, subject), ()):
                    if id(binding) in seen:
                        continue
                    seen.add(id(binding))
                    ref = binding.get("roleRef") or {}
                    for rule in self._rules(ref, namespace):
                        out.append(Grant(rule, "RoleBinding", binding["metadata"]["name"], namespace,
                                         ref.get("kind", ""), ref.get("name", ""), _describe(subject)))
        return out


def _describe(subject_key: str) -> str:
    kind, _, name = subject_key.partition(":")
    if kind == "g":
        return f'Group "{name}"'
    sa = split_service_account(name)
    if sa:
        return f'ServiceAccount "{sa[1]}/{sa[0]}"'
    return f'User "{name}"'


def aggregated_rules(role: dict[str, Any], cluster_roles: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The rules an aggregated ClusterRole should hold (None when it aggregates nothing)."""
    rule = role.get("aggregationRule")
    if not isinstance(rule, dict):
        return None
    selectors = []
    for raw in rule.get("clusterRoleSelectors") or ():
        try:
            selectors.append(label_selector_from_dict(raw))
        except SelectorError:
            continue
    rules: list[dict[str, Any]] = []
    name = role["metadata"]["name"]
    for other in sorted(cluster_roles, key=lambda o: o["metadata"]["name"]):
        if other["metadata"]["name"] == name:
            continue
        labels = other["metadata"].get("labels") or {}
        if not any(not s.empty and s.matches(labels) for s in selectors):
            continue
        for r in other.get("rules") or ():
            if r not in rules:
                rules.append(r)
    return rules


def forbidden_message(attrs: Attributes) -> str:
    """kube-apiserver's words for a denied request."""
    if not attrs.resource_request:
        return f'User "{attrs.user}" cannot {attrs.verb} path "{attrs.path}"'
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    if attrs.namespace:
        return (f'User "{attrs.user}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.api_group}" '
                f'in the namespace "{attrs.namespace}"')
    return (f'User "{attrs.user}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.api_group}" '
            f"at the cluster scope")


def rules_review(grants: list[Grant]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(resourceRules, nonResourceRules) of a SelfSubjectRulesReview, one per distinct rule."""
    resource_rules: list[dict[str, Any]] = []
    non_resource: list[dict[str, Any]] = []
    for grant in grants:
        rule = grant.rule
        if rule.get("nonResourceURLs"):
            entry = {"verbs": list(rule.get("verbs") or ()), "nonResourceURLs": list(rule["nonResourceURLs"])}
            if entry not in non_resource:
                non_resource.append(entry)
        if rule.get("resources"):
            entry = {"verbs": list(rule.get("verbs") or ()), "apiGroups": list(rule.get("apiGroups") or ()),
                     "resources": list(rule["resources"])}
            if rule.get("resourceNames"):
                entry["resourceNames"] = list(rule["resourceNames"])
            if entry not in resource_rules:
                resource_rules.append(entry)
    return resource_rules, non_resource
