"""Who may do what on the embedded API server: authentication, impersonation, RBAC, the review APIs.

The HTTP layer asks `Access` for the request's user (`identify`), then whether it may act
(`check`); the review resources (SelfSubjectReview, TokenReview, (Self|Local)SubjectAccessReview,
SelfSubjectRulesReview) and TokenRequest are answered here. The bootstrap policy gives the
roles every cluster starts with (cluster-admin for system:masters, discovery and self-reviews for
everyone authenticated, the aggregated admin/edit/view roles).
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass
from typing import Any

from velashard.apiserver import errors
from velashard.apiserver.auth.authn import (ANONYMOUS, AUTHENTICATED, Authenticator, UserInfo, rfc3339,
                                            split_service_account, validate_token_request)
from velashard.apiserver.auth.rbac import (RBAC_GROUP, RBAC_RESOURCES, Attributes, Authorizer, aggregated_rules,
                                           forbidden_message, rules_review)
from velashard.apiserver.storage.resources import Registry, ResourceType

log = logging.getLogger("velashard.apiserver.auth.access")

AUTHN_GROUP = "authentication.k8s.io"
AUTHZ_GROUP = "authorization.k8s.io"
_RBAC_USER = {"username": "system:kube-controller-manager", "uid": "", "groups": ["system:masters"]}


@dataclass(frozen=True)
class _CreateOnly(ResourceType):
    """A virtual resource that is only ever created (the reviews): nothing of it is stored."""

    def discovery_entries(self) -> list[dict[str, Any]]:
        entry = super().discovery_entries()[0]
        entry["verbs"] = ["create"]
        return [entry]


@dataclass(frozen=True)
class _ServiceAccounts(ResourceType):
    """ServiceAccounts, with their `token` subresource (TokenRequest) in discovery."""

    def discovery_entries(self) -> list[dict[str, Any]]:
        return super().discovery_entries() + [{
            "name": "serviceaccounts/token", "singularName": "", "namespaced": True, "group": AUTHN_GROUP,
            "version": "v1", "kind": "TokenRequest", "verbs": ["create"]}]


REVIEW_TYPES = (
    _CreateOnly(AUTHN_GROUP, "v1", "selfsubjectreviews", "SelfSubjectReview", False, "selfsubjectreview"),
    _CreateOnly(AUTHN_GROUP, "v1", "tokenreviews", "TokenReview", False, "tokenreview"),
    _CreateOnly(AUTHZ_GROUP, "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False,
                "selfsubjectaccessreview"),
    _CreateOnly(AUTHZ_GROUP, "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", False,
                "selfsubjectrulesreview"),
    _CreateOnly(AUTHZ_GROUP, "v1", "subjectaccessreviews", "SubjectAccessReview", False, "subjectaccessreview"),
    _CreateOnly(AUTHZ_GROUP, "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview", True,
                "localsubjectaccessreview"),
)
_REVIEWS = {rt.group_resource for rt in REVIEW_TYPES}


def register_types(types: Registry) -> None:
    for rt in REVIEW_TYPES:
        types.add(rt)
    types.add(_ServiceAccounts("", "v1", "serviceaccounts", "ServiceAccount", True, "serviceaccount", ("sa",)))


def is_review(rt: ResourceType) -> bool:
    return rt.group_resource in _REVIEWS


def _cluster_role(name: str, rules: list[dict[str, Any]], labels: dict[str, str] | None = None,
                  aggregate: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(labels or {}), "annotations": {
        "rbac.authorization.kubernetes.io/autoupdate": "true"}}
    meta["labels"]["kubernetes.io/bootstrapping"] = "rbac-defaults"
    role: dict[str, Any] = {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole", "metadata": meta,
                            "rules": rules}
    if aggregate:
        role["aggregationRule"] = {"clusterRoleSelectors": [
            {"matchLabels": {f"rbac.authorization.k8s.io/{label}": "true"}} for label in aggregate]}
        role["rules"] = []
    return role


def _binding(name: str, role: str, groups: list[str]) -> dict[str, Any]:
    return {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                         "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": g} for g in groups]}


_READ = ["get", "list", "watch"]
_WRITE = ["create", "delete", "deletecollection", "patch", "update"]
_WORKLOADS = [("", ["configmaps", "endpoints", "persistentvolumeclaims", "pods", "replicationcontrollers",
                    "serviceaccounts", "services", "events"]),
              ("apps", ["daemonsets", "deployments", "replicasets", "statefulsets"]),
              ("batch", ["cronjobs", "jobs"]), ("coordination.k8s.io", ["leases"])]


def bootstrap_policy() -> list[dict[str, Any]]:
    """The ClusterRoles and ClusterRoleBindings a new cluster starts with (kube-apiserver's bootstrap)."""
    view_rules = [{"apiGroups": [g], "resources": list(r) + [f"{x}/status" for x in r if x != "events"],
                   "verbs": list(_READ)} for g, r in _WORKLOADS]
    view_rules.append({"apiGroups": [""], "resources": ["namespaces", "namespaces/status"], "verbs": list(_READ)})
    edit_rules = [{"apiGroups": [g], "resources": list(r), "verbs": list(_WRITE)} for g, r in _WORKLOADS]
    edit_rules += [{"apiGroups": [""], "resources": ["secrets"], "verbs": list(_READ) + list(_WRITE)},
                   {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"]},
                   {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}]
    admin_rules = [{"apiGroups": [RBAC_GROUP], "resources": ["rolebindings", "roles"],
                    "verbs": list(_READ) + list(_WRITE)},
                   {"apiGroups": [AUTHZ_GROUP], "resources": ["localsubjectaccessreviews"], "verbs": ["create"]}]
    info_urls = ["/healthz", "/livez", "/readyz", "/version", "/version/"]
    return [
        _cluster_role("cluster-admin", [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                                        {"nonResourceURLs": ["*"], "verbs": ["*"]}],
                      {"kubernetes.io/bootstrapping": "rbac-defaults"}),
        _cluster_role("system:discovery", [{"nonResourceURLs": [
            "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz",
            "/version", "/version/"], "verbs": ["get"]}]),
        _cluster_role("system:public-info-viewer", [{"nonResourceURLs": info_urls, "verbs": ["get"]}]),
        _cluster_role("system:basic-user", [
            {"apiGroups": [AUTHN_GROUP], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
            {"apiGroups": [AUTHZ_GROUP], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
             "verbs": ["create"]}]),
        _cluster_role("admin", [], {"rbac.authorization.k8s.io/aggregate-to-admin": "true"}, ["aggregate-to-admin"]),
        _cluster_role("edit", [], {"rbac.authorization.k8s.io/aggregate-to-admin": "true"}, ["aggregate-to-edit"]),
        _cluster_role("view", [], {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}, ["aggregate-to-view"]),
        _cluster_role("system:aggregate-to-admin", admin_rules, {"rbac.authorization.k8s.io/aggregate-to-admin":
                                                                 "true"}),
        _cluster_role("system:aggregate-to-edit", edit_rules, {"rbac.authorization.k8s.io/aggregate-to-edit":
                                                               "true"}),
        _cluster_role("system:aggregate-to-view", view_rules, {"rbac.authorization.k8s.io/aggregate-to-view":
                                                               "true"}),
        _binding("cluster-admin", "cluster-admin", ["system:masters"]),
        _binding("system:discovery", "system:discovery", [AUTHENTICATED]),
        _binding("system:basic-user", "system:basic-user", [AUTHENTICATED]),
        _binding("system:public-info-viewer", "system:public-info-viewer", [AUTHENTICATED, "system:unauthenticated"]),
    ]


class Access:
    """Authentication and authorization of one API server, over its RestAPI."""

    def __init__(self, api: Any, types: Registry):
        self._api = api
        self._types = types
        self.authn = Authenticator(self._lookup)
        self.authz = Authorizer(self._list)
        self._aggregating = False

    # --- store access ----------------------------------------------------------------------------

    def _lookup(self, group: str, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self._api.store.get((group, resource), (namespace, name))

    def _list(self, resource: str) -> list[dict[str, Any]]:
        return self._api.store.list((RBAC_GROUP, resource), None)[0]

    def on_commit(self, rt: ResourceType, event: Any) -> None:
        """RBAC objects changed: drop the authorizer's index and refresh aggregated ClusterRoles.

        A new namespace gets its `default` ServiceAccount, as kube-controller-manager's
        serviceaccount controller gives it.
        """
        if rt.group == "" and rt.plural == "namespaces" and event.type == "ADDED":
            self._default_service_account(event.obj["metadata"]["name"])
            return
        if rt.group != RBAC_GROUP or rt.plural not in RBAC_RESOURCES:
            return
        self.authz.invalidate()
        if rt.plural == "clusterroles" and not self._aggregating:
            self._aggregating = True
            try:
                self.aggregate()
            finally:
                self._aggregating = False

    def _default_service_account(self, namespace: str) -> None:
        from velashard.apiserver.registry.rest import Request
        rt = self._types.lookup("", "v1", "serviceaccounts")
        assert rt is not None
        try:
            self._api.create(rt, namespace, {"metadata": {"name": "default"}},
                             Request(user=dict(_RBAC_USER), manager="kube-controller-manager"))
        except errors.APIError as err:
            if err.code != 409:
                log.warning("creating the default service account failed namespace=%s err=%s", namespace,
                            err.message)

    def aggregate(self) -> None:
        """Fill aggregated ClusterRoles until none changes (aggregations may chain)."""
        from velashard.apiserver.registry.rest import Request
        rt = self._types.lookup(RBAC_GROUP, "v1", "clusterroles")
        assert rt is not None
        for _ in range(8):
            roles = self._list("clusterroles")
            changed = False
            for role in roles:
                rules = aggregated_rules(role, roles)
                if rules is None or rules == (role.get("rules") or []):
                    continue
                updated = dict(role, rules=rules)
                try:
                    self._api.update(rt, "", role["metadata"]["name"], copy.deepcopy(updated),
                                     Request(user=dict(_RBAC_USER), manager="clusterrole-aggregation-controller"))
                    changed = True
                except errors.APIError as err:
                    log.warning("aggregating cluster role failed name=%s err=%s", role["metadata"]["name"],
                                err.message)
            if not changed:
                return

    # --- authentication and impersonation --------------------------------------------------------

    def authenticate(self, headers: Any) -> UserInfo:
        """Who sent the request (its bearer token); 401 for a bad one."""
        return self.authn.authenticate(headers.get("Authorization") or "", time.time())

    def impersonate(self, user: UserInfo, headers: Any) -> UserInfo:
        """The user the request acts as: `user`, or whom its Impersonate-* headers name once `user` may
        impersonate them (403 otherwise)."""
        name = headers.get("Impersonate-User")
        groups = headers.get_all("Impersonate-Group") or []
        if not name:
            if groups:
                raise errors.bad_request(f"requested {groups} without impersonating a user")
            return user
        sa = split_service_account(name)
        if sa:
            self._may_impersonate(user, "serviceaccounts", sa[0], sa[1])
        else:
            self._may_impersonate(user, "users", "", name)
        for group in groups:
            self._may_impersonate(user, "groups", "", group)
        if sa and not groups:
            groups = ["system:serviceaccounts", f"system:serviceaccounts:{sa[0]}"]
        if name != ANONYMOUS["username"] and AUTHENTICATED not in groups:
            groups = list(groups) + [AUTHENTICATED]
        # The authenticated user rides along for the audit log (its `user`, with `impersonatedUser` beside it).
        return {"username": name, "uid": headers.get("Impersonate-Uid") or "", "groups": list(groups),
                "impersonator": user["username"]}

    def _may_impersonate(self, user: UserInfo, resource: str, namespace: str, name: str) -> None:
        attrs = Attributes(user["username"], tuple(user["groups"]), "impersonate", namespace, "", resource, "", name)
        if not self.authz.authorize(attrs)[0]:
            raise _forbidden(attrs)

    # --- authorization ---------------------------------------------------------------------------

    def check(self, user: UserInfo, attrs: Attributes) -> None:
        if not self.authz.authorize(attrs)[0]:
            raise _forbidden(attrs)

    def attributes(self, user: UserInfo, **fields: Any) -> Attributes:
        return Attributes(user["username"], tuple(user["groups"]), **fields)

    # --- review APIs and TokenRequest ------------------------------------------------------------

    def review(self, rt: ResourceType, namespace: str, body: Any, user: UserInfo) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.bad_request(f"the body of the request must be a JSON object describing a {rt.kind}")
        out = {"kind": rt.kind, "apiVersion": rt.api_version,
               "metadata": dict(body.get("metadata") or {}, creationTimestamp=None)}
        spec = body.get("spec") or {}
        if not isinstance(spec, dict):
            raise errors.bad_request("spec must be an object")
        if rt.kind == "SelfSubjectReview":
            out["status"] = {"userInfo": _user_info(user)}
            return out
        out["spec"] = spec
        if rt.kind == "TokenReview":
            out["status"] = self._token_review(spec)
            return out
        if rt.kind == "SelfSubjectRulesReview":
            resource_rules, non_resource = rules_review(self.authz.grants(
                user["username"], user["groups"], spec.get("namespace") or ""))
            if "system:masters" in user["groups"] and not resource_rules:
                resource_rules = [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]
            out["status"] = {"resourceRules": resource_rules, "nonResourceRules": non_resource, "incomplete": False}
            return out
        if rt.kind == "SelfSubjectAccessReview":
            subject = user
        else:
            subject = {"username": spec.get("user") or "", "uid": spec.get("uid") or "",
                       "groups": list(spec.get("groups") or [])}
            if not subject["username"] and not subject["groups"]:
                raise errors.invalid(AUTHZ_GROUP, rt.kind, "", [_Cause(
                    "spec.user", "Invalid value: \"\": at least one of user or group must be specified")])
        resource = spec.get("resourceAttributes")
        non_resource_attrs = spec.get("nonResourceAttributes")
        if rt.kind == "LocalSubjectAccessReview":
            resource = dict(resource or {}, namespace=namespace)
        if isinstance(resource, dict):
            attrs = self.attributes(subject, verb=resource.get("verb") or "", namespace=resource.get("namespace")
                                    or "", api_group=resource.get("group") or "", resource=resource.get("resource")
                                    or "", subresource=resource.get("subresource") or "",
                                    name=resource.get("name") or "")
        elif isinstance(non_resource_attrs, dict):
            attrs = self.attributes(subject, verb=non_resource_attrs.get("verb") or "",
                                    path=non_resource_attrs.get("path") or "", resource_request=False)
        else:
            raise errors.invalid(AUTHZ_GROUP, rt.kind, "", [_Cause(
                "spec.resourceAttributes", "Invalid value: \"null\": exactly one of nonResourceAttributes or "
                "resourceAttributes must be specified")])
        allowed, reason = self.authz.authorize(attrs)
        out["status"] = {"allowed": allowed} | ({"reason": reason} if reason else {})
        return out

    def _token_review(self, spec: dict[str, Any]) -> dict[str, Any]:
        try:
            user = self.authn.authenticate(f"Bearer {spec.get('token') or ''}", time.time())
        except errors.APIError:
            return {"user": {}, "error": "invalid bearer token"}
        if user["username"] == ANONYMOUS["username"]:
            return {"user": {}, "error": "invalid bearer token"}
        return {"authenticated": True, "user": _user_info(user), "audiences": list(spec.get("audiences") or [])}

    def token_request(self, namespace: str, name: str, body: Any) -> dict[str, Any]:
        """Answer a TokenRequest for ServiceAccount `name` with a signed, expiring token."""
        sa = self._lookup("", "serviceaccounts", namespace, name)
        if sa is None:
            raise errors.not_found("", "serviceaccounts", name)
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be a JSON object describing a TokenRequest")
        spec = dict(body.get("spec") or {})
        causes = validate_token_request(spec)
        if causes:
            raise errors.invalid(AUTHN_GROUP, "TokenRequest", name,
                                 [_Cause(c["field"], c["message"], c["reason"]) for c in causes])
        bound = spec.get("boundObjectRef")
        if isinstance(bound, dict) and bound.get("kind"):
            resource = {"Pod": "pods", "Secret": "secrets"}.get(bound["kind"])
            target = self._lookup("", resource, namespace, bound.get("name", "")) if resource else None
            if target is None or (bound.get("uid") and target["metadata"]["uid"] != bound["uid"]):
                raise errors.invalid(AUTHN_GROUP, "TokenRequest", name, [_Cause(
                    "spec.boundObjectRef", f"Invalid value: the bound {bound['kind']} "
                    f"{bound.get('name', '')!r} does not exist")])
            spec["boundObjectRef"] = dict(bound, uid=target["metadata"]["uid"])
        now = time.time()
        spec.setdefault("expirationSeconds", 3600)
        spec.setdefault("audiences", ["https://kubernetes.default.svc.cluster.local"])
        token, expires = self.authn.issue(sa, spec, now)
        return {"kind": "TokenRequest", "apiVersion": f"{AUTHN_GROUP}/v1",
                "metadata": {"name": name, "namespace": namespace, "creationTimestamp": rfc3339(now)},
                "spec": spec, "status": {"token": token, "expirationTimestamp": rfc3339(expires)}}


@dataclass
class _Cause:
    field: str
    message: str
    reason: str = "FieldValueInvalid"


def _user_info(user: UserInfo) -> dict[str, Any]:
    info: dict[str, Any] = {"username": user["username"], "groups": list(user["groups"])}
    if user.get("uid"):
        info["uid"] = user["uid"]
    return info


def _forbidden(attrs: Attributes) -> errors.APIError:
    message = forbidden_message(attrs)
    if not attrs.resource_request:
        return errors.APIError(403, "Forbidden", f"forbidden: {message}", {})
    qualified = f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource
    subject = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    details: dict[str, Any] = {"kind": attrs.resource}
    if attrs.name:
        details["name"] = attrs.name
    if attrs.api_group:
        details["group"] = attrs.api_group
    return errors.APIError(403, "Forbidden", f"{subject} is forbidden: {message}", details)
