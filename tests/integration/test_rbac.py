"""Authentication and RBAC enforced by the embedded API server, and the review APIs kubectl uses."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from tests.integration.helpers import raw_request, status_of
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.identity import whoami
from velashard.kube.kubeconfig import write_kubeconfig

RBAC = "rbac.authorization.k8s.io"
SHARD = "system:serviceaccount:apps:shard"


@pytest.fixture
def cluster(make_apiserver, tmp_path: Path):
    server = make_apiserver()
    admin = config.new_client_from_config(config_file=server.kubeconfig)
    core = client.CoreV1Api(admin)
    core.create_namespace({"metadata": {"name": "apps"}})
    core.create_namespaced_service_account("apps", {"metadata": {"name": "shard"}})
    token = core.create_namespaced_service_account_token(
        "shard", "apps", {"spec": {"expirationSeconds": 3600}}).status.token
    yield server, admin, token
    admin.close()


def kubeconfig_for(server, token: str, tmp_path: Path) -> str:
    """A kubeconfig that authenticates with `token` (over TLS, as kubectl would)."""
    path = tmp_path / f"kubeconfig-{abs(hash(token))}"
    doc = server.kubeconfig_document()
    doc["users"][0]["user"]["token"] = token
    return write_kubeconfig(str(path), doc)


def client_for(server, token: str, tmp_path: Path) -> client.ApiClient:
    return config.new_client_from_config(config_file=kubeconfig_for(server, token, tmp_path))


def bind(admin: client.ApiClient, rules: list[dict], namespace: str = "apps", cluster_role: bool = False) -> None:
    rbac = client.RbacAuthorizationV1Api(admin)
    subject = [{"kind": "ServiceAccount", "name": "shard", "namespace": "apps"}]
    if cluster_role:
        rbac.create_cluster_role({"metadata": {"name": "shard-role"}, "rules": rules})
    else:
        rbac.create_namespaced_role(namespace, {"metadata": {"name": "shard-role"}, "rules": rules})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": "shard"}, "subjects": subject,
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole" if cluster_role else "Role", "name": "shard-role"}})


def test_service_account_token_identity_and_unknown_tokens(cluster, tmp_path: Path) -> None:
    server, admin, token = cluster
    # Every namespace gets a `default` ServiceAccount, as in a cluster.
    assert client.CoreV1Api(admin).read_namespaced_service_account("default", "apps").metadata.name == "default"
    shard = client_for(server, token, tmp_path)
    review = client.AuthenticationV1Api(shard).create_self_subject_review({"metadata": {}})
    assert review.status.user_info.username == SHARD
    assert review.status.user_info.groups == ["system:serviceaccounts", "system:serviceaccounts:apps",
                                              "system:authenticated"]
    assert whoami(KubeClient.from_kubeconfig(kubeconfig_for(server, token, tmp_path))) == SHARD
    assert whoami(KubeClient.from_kubeconfig(server.kubeconfig)) == "admin"
    for bad in ("not-a-known-token", token[:-3] + "abc"):
        with pytest.raises(ApiException) as err:
            client.CoreV1Api(client_for(server, bad, tmp_path)).list_namespaced_pod("apps")
        assert err.value.status == 401 and status_of(err.value)["reason"] == "Unauthorized"
    # Deleting the ServiceAccount revokes its tokens.
    client.CoreV1Api(admin).delete_namespaced_service_account("shard", "apps")
    with pytest.raises(ApiException) as err:
        client.AuthenticationV1Api(shard).create_self_subject_review({"metadata": {}})
    assert err.value.status == 401


def test_rbac_allows_what_is_granted_and_denies_with_kubernetes_message(cluster, tmp_path: Path) -> None:
    server, admin, token = cluster
    shard = client_for(server, token, tmp_path)
    core = client.CoreV1Api(shard)
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map("apps")
    assert err.value.status == 403
    status = status_of(err.value)
    assert status["reason"] == "Forbidden" and status["message"] == (
        f'configmaps is forbidden: User "{SHARD}" cannot list resource "configmaps" in API group "" in the '
        f'namespace "apps"')
    bind(admin, [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]},
                 {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["mine"], "verbs": ["update"]},
                 {"apiGroups": ["apps"], "resources": ["deployments/status"], "verbs": ["patch"]}],
         cluster_role=True)
    client.CoreV1Api(admin).create_namespaced_config_map("apps", {"metadata": {"name": "mine"}})
    client.CoreV1Api(admin).create_namespaced_config_map("apps", {"metadata": {"name": "theirs"}})
    assert {c.metadata.name for c in core.list_namespaced_config_map("apps").items} == {"mine", "theirs"}
    events = list(watch.Watch().stream(core.list_namespaced_config_map, "apps", timeout_seconds=1))
    assert len(events) == 2  # watches are authorized (verb watch) and served
    core.replace_namespaced_config_map("mine", "apps", {"metadata": {"name": "mine"}, "data": {"a": "b"}})
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map("theirs", "apps", {"metadata": {"name": "theirs"}, "data": {"a": "b"}})
    assert status_of(err.value)["message"].startswith('configmaps "theirs" is forbidden: User')
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map("default")  # the RoleBinding grants only in its namespace
    assert err.value.status == 403
    from tests.integration.test_conformance_crud import deployment
    client.AppsV1Api(admin).create_namespaced_deployment("apps", deployment("d"))
    apps = client.AppsV1Api(shard)
    apps.patch_namespaced_deployment_status("d", "apps", {"status": {"observedGeneration": 1}})
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment("d", "apps", {"spec": {"replicas": 5}})
    assert status_of(err.value)["message"] == (f'deployments.apps "d" is forbidden: User "{SHARD}" cannot patch '
                                               f'resource "deployments" in API group "apps" in the namespace "apps"')


def test_aggregated_cluster_roles_and_impersonation(cluster, tmp_path: Path) -> None:
    server, admin, token = cluster
    rbac = client.RbacAuthorizationV1Api(admin)
    rbac.create_cluster_role({"metadata": {"name": "apps-reader", "labels": {"example.com/agg": "true"}},
                              "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list"]}]})
    rbac.create_cluster_role({"metadata": {"name": "aggregate"}, "aggregationRule": {"clusterRoleSelectors": [
        {"matchLabels": {"example.com/agg": "true"}}]}})
    assert rbac.read_cluster_role("aggregate").rules[0].resources == ["deployments"]
    rbac.create_cluster_role_binding({"metadata": {"name": "shard-aggregate"}, "roleRef": {
        "apiGroup": RBAC, "kind": "ClusterRole", "name": "aggregate"}, "subjects": [
        {"kind": "ServiceAccount", "name": "shard", "namespace": "apps"}]})
    shard = client_for(server, token, tmp_path)
    client.AppsV1Api(shard).list_deployment_for_all_namespaces()
    # The shard may not act as someone else; admin (system:masters) may.
    shard.set_default_header("Impersonate-User", "admin")
    with pytest.raises(ApiException) as err:
        client.AppsV1Api(shard).list_deployment_for_all_namespaces()
    assert status_of(err.value)["message"] == (f'users "admin" is forbidden: User "{SHARD}" cannot impersonate '
                                               f'resource "users" in API group "" at the cluster scope')
    admin.set_default_header("Impersonate-User", SHARD)
    try:
        client.AppsV1Api(admin).list_deployment_for_all_namespaces()
        with pytest.raises(ApiException) as err:
            client.CoreV1Api(admin).list_namespaced_secret("apps")
        assert err.value.status == 403
    finally:
        admin.default_headers.pop("Impersonate-User")


def test_access_reviews(cluster, tmp_path: Path) -> None:
    server, admin, token = cluster
    bind(admin, [{"apiGroups": ["core.oam.dev"], "resources": ["applications", "applications/status"],
                  "verbs": ["get", "update"]}])
    authz = client.AuthorizationV1Api(admin)
    review = authz.create_subject_access_review({"spec": {"user": SHARD, "groups": ["system:serviceaccounts"],
                                                          "resourceAttributes": {
                                                              "namespace": "apps", "verb": "update",
                                                              "group": "core.oam.dev", "resource": "applications",
                                                              "subresource": "status"}}})
    assert review.status.allowed and 'RoleBinding "shard" of Role "shard-role"' in review.status.reason
    shard = client_for(server, token, tmp_path)
    own = client.AuthorizationV1Api(shard)
    denied = own.create_self_subject_access_review({"spec": {"resourceAttributes": {
        "namespace": "apps", "verb": "delete", "group": "core.oam.dev", "resource": "applications"}}})
    assert denied.status.allowed is False
    rules = own.create_self_subject_rules_review({"spec": {"namespace": "apps"}}).status.resource_rules
    assert {"verbs": ["get", "update"], "api_groups": ["core.oam.dev"],
            "resources": ["applications", "applications/status"]} in [
        {"verbs": r.verbs, "api_groups": r.api_groups, "resources": r.resources} for r in rules]
    code, _ = raw_request(shard, "GET", "/version")
    assert code == 200  # discovery and version are open to everyone authenticated
    code, status = raw_request(shard, "GET", "/debug/audit")
    assert code == 403 and status["message"] == f'forbidden: User "{SHARD}" cannot get path "/debug/audit"'


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_auth_whoami_and_can_i(cluster, tmp_path: Path) -> None:
    server, admin, token = cluster
    bind(admin, [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list", "watch"]}])

    def kubectl(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["kubectl", "--kubeconfig", server.kubeconfig, "--cache-dir", str(tmp_path / "cache"),
                               *args], capture_output=True, text=True, timeout=60)

    assert "admin" in kubectl("auth", "whoami").stdout
    can = kubectl("auth", "can-i", "list", "deployments.apps", "-n", "apps", f"--as={SHARD}")
    assert can.stdout.strip() == "yes", can.stderr
    cannot = kubectl("auth", "can-i", "delete", "deployments.apps", "-n", "apps", f"--as={SHARD}")
    assert cannot.stdout.strip() == "no" and cannot.returncode == 1
    listed = kubectl("auth", "can-i", "--list", "-n", "apps", f"--as={SHARD}").stdout
    line = next(line for line in listed.splitlines() if line.startswith("deployments.apps"))
    assert line.split()[1:] == ["[]", "[]", "[list", "watch]"]
    created = kubectl("create", "token", "shard", "-n", "apps")
    assert created.returncode == 0, created.stderr
    with pytest.raises(errors.Forbidden):
        KubeClient.from_kubeconfig(kubeconfig_for(server, created.stdout.strip(), tmp_path)).request(
            "get", "GET", "/api/v1/namespaces/apps")
