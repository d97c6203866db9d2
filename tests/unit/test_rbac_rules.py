"""RBAC rule matching, bindings, aggregation and ServiceAccount tokens, as pure logic."""

from __future__ import annotations

import pytest

from velashard.apiserver import errors
from velashard.apiserver.auth.authn import Authenticator, validate_token_request
from velashard.apiserver.auth.rbac import Attributes, Authorizer, aggregated_rules, forbidden_message, rule_allows

SHARD = "system:serviceaccount:vela-system:shard"


def attrs(verb, resource="", sub="", name="", ns="apps", group="core.oam.dev", user=SHARD, groups=(), path=""):
    return Attributes(user, tuple(groups), verb, ns, group, resource, sub, name, path, resource_request=not path)


def test_rule_matching_follows_kubernetes():
    status_only = {"apiGroups": ["core.oam.dev"], "resources": ["applications/status"], "verbs": ["update", "patch"]}
    assert rule_allows(status_only, attrs("patch", "applications", "status"))
    assert not rule_allows(status_only, attrs("patch", "applications"))  # the main resource is another thing
    any_status = {"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["*"]}
    assert rule_allows(any_status, attrs("update", "deployments", "status", group="apps"))
    assert not rule_allows(any_status, attrs("update", "deployments", group="apps"))
    named = {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cfg"], "verbs": ["get", "update"]}
    assert rule_allows(named, attrs("get", "configmaps", name="cfg", group=""))
    assert not rule_allows(named, attrs("get", "configmaps", name="other", group=""))
    assert not rule_allows(named, attrs("list", "configmaps", group=""))  # no name: a named rule never matches
    urls = {"nonResourceURLs": ["/healthz", "/apis/*"], "verbs": ["get"]}
    assert rule_allows(urls, attrs("get", path="/apis/apps/v1"))
    assert rule_allows(urls, attrs("get", path="/healthz")) and not rule_allows(urls, attrs("get", path="/metrics"))
    assert not rule_allows(urls, attrs("get", "pods", group=""))  # URLs never grant resources


def objects(**kinds):
    return lambda resource: kinds.get(resource, [])


def test_bindings_roles_and_cluster_roles_in_a_namespace():
    role = {"metadata": {"name": "apps-writer", "namespace": "apps"},
            "rules": [{"apiGroups": ["core.oam.dev"], "resources": ["applications"], "verbs": ["get", "list"]}]}
    cluster_role = {"metadata": {"name": "reader"},
                    "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["watch"]}]}
    bindings = [
        {"metadata": {"name": "a", "namespace": "apps"}, "roleRef": {"kind": "Role", "name": "apps-writer"},
         "subjects": [{"kind": "ServiceAccount", "name": "shard", "namespace": "vela-system"}]},
        {"metadata": {"name": "b", "namespace": "apps"}, "roleRef": {"kind": "ClusterRole", "name": "reader"},
         "subjects": [{"kind": "Group", "name": "system:serviceaccounts:vela-system"}]},
    ]
    authz = Authorizer(objects(roles=[role], clusterroles=[cluster_role], rolebindings=bindings))
    sa_groups = ("system:serviceaccounts", "system:serviceaccounts:vela-system", "system:authenticated")
    assert authz.authorize(attrs("list", "applications", groups=sa_groups))[0]
    allowed, reason = authz.authorize(attrs("watch", "pods", group="", groups=sa_groups))
    assert allowed and reason == ('RBAC: allowed by RoleBinding "b" of ClusterRole "reader" to Group '
                                  '"system:serviceaccounts:vela-system" in namespace "apps"')
    assert not authz.authorize(attrs("list", "applications", ns="other", groups=sa_groups))[0]
    assert not authz.authorize(attrs("delete", "applications", name="x", groups=sa_groups))[0]
    assert authz.authorize(attrs("delete", "anything", user="root", groups=("system:masters",)))[0]


def test_cache_is_dropped_when_rbac_changes():
    roles: list = []
    bindings = [{"metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole", "name": "r"},
                 "subjects": [{"kind": "User", "name": "bob"}]}]
    authz = Authorizer(objects(clusterroles=roles, clusterrolebindings=bindings))
    request = attrs("get", "pods", name="p", group="", user="bob")
    assert not authz.authorize(request)[0]
    roles.append({"metadata": {"name": "r"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}]})
    assert not authz.authorize(request)[0]  # cached until told
    authz.invalidate()
    assert authz.authorize(request)[0]


def test_aggregation_collects_matching_roles_rules_once():
    aggregate = {"metadata": {"name": "view"}, "aggregationRule": {"clusterRoleSelectors": [
        {"matchLabels": {"agg": "view"}}]}, "rules": []}
    a = {"metadata": {"name": "a", "labels": {"agg": "view"}}, "rules": [{"verbs": ["get"], "resources": ["x"]}]}
    b = {"metadata": {"name": "b", "labels": {"agg": "view"}}, "rules": [{"verbs": ["get"], "resources": ["x"]},
                                                                         {"verbs": ["list"], "resources": ["y"]}]}
    c = {"metadata": {"name": "c"}, "rules": [{"verbs": ["*"], "resources": ["*"]}]}
    assert aggregated_rules(aggregate, [aggregate, b, c, a]) == [{"verbs": ["get"], "resources": ["x"]},
                                                                 {"verbs": ["list"], "resources": ["y"]}]
    assert aggregated_rules(a, [a]) is None


def test_forbidden_messages_are_kube_apiservers():
    assert forbidden_message(attrs("list", "applications", user="bob")) == (
        'User "bob" cannot list resource "applications" in API group "core.oam.dev" in the namespace "apps"')
    assert forbidden_message(attrs("update", "applications", "status", ns="", user="bob")) == (
        'User "bob" cannot update resource "applications/status" in API group "core.oam.dev" at the cluster scope')
    assert forbidden_message(attrs("get", path="/metrics", user="bob")) == 'User "bob" cannot get path "/metrics"'


def test_service_account_tokens_are_bound_signed_and_expire():
    accounts = {("vela-system", "shard"): {"metadata": {"name": "shard", "namespace": "vela-system", "uid": "u1"}}}
    authn = Authenticator(lambda group, resource, ns, name: accounts.get((ns, name)))
    token, expires = authn.issue(accounts[("vela-system", "shard")], {"expirationSeconds": 600}, now=1000.0)
    assert expires == 1600
    user = authn.authenticate(f"Bearer {token}", now=1500.0)
    assert user["username"] == SHARD
    assert user["groups"] == ["system:serviceaccounts", "system:serviceaccounts:vela-system", "system:authenticated"]
    for bad, now in ((token, 1600.0), (token[:-2] + "xx", 1500.0), ("nobody", 1500.0)):
        with pytest.raises(errors.APIError) as err:
            authn.authenticate(f"Bearer {bad}", now=now)
        assert err.value.code == 401 and err.value.reason == "Unauthorized"
    accounts[("vela-system", "shard")] = {"metadata": {"name": "shard", "namespace": "vela-system", "uid": "u2"}}
    with pytest.raises(errors.APIError):
        authn.authenticate(f"Bearer {token}", now=1500.0)  # a recreated account does not inherit old tokens
    assert authn.authenticate("", now=0)["username"] == "system:anonymous"
    assert validate_token_request({"expirationSeconds": 60})[0]["message"] == (
        "Invalid value: 60: may not specify a duration less than 10 minutes")
