"""Tenant isolation: an Application does in the cluster only what its author may (impersonation), nothing is
adopted by accident, and every refusal is a condition on the app and a Warning Event. The author guard (a
ValidatingAdmissionPolicy) keeps recorded authors true without the master."""

from __future__ import annotations

import threading

import pytest

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.apiserver.http.server import APIServer
from velashard.core.authors import AuthConfig
from velashard.core.controller import ApplicationController, Options
from velashard.core.events import EVENTS
from velashard.core.install import install
from tests.workflowsteps import install_missing
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.kubeconfig import write_kubeconfig
from velashard.kube.manager import Manager
from velashard.kube.resources import (ADMISSION_POLICIES, ADMISSION_POLICY_BINDINGS, CONFIGMAPS, NAMESPACES, SECRETS,
                                      Resource)
from velashard.webhook.author_guard import guard_objects
from tests.integration.helpers import eventually, update_latest

TENANT = "system:serviceaccount:team-a:tenant"
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
CLUSTER_ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding",
                                 namespaced=False)
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")


def grant(kube: KubeClient, namespace: str, name: str, subject: dict, rules: list[dict]) -> None:
    kube.create(ROLES, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                        "metadata": {"name": name, "namespace": namespace}, "rules": rules})
    kube.create(ROLE_BINDINGS, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                                "metadata": {"name": name, "namespace": namespace},
                                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                                "subjects": [subject]})


# The tenant may edit Applications in team-a, plus ConfigMaps, Services and Deployments there, and nothing else.
TENANT_RULES = [{"apiGroups": ["core.oam.dev"], "resources": ["applications"], "verbs": ["*"]},
                {"apiGroups": [""], "resources": ["configmaps", "services"], "verbs": ["*"]},
                {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"]}]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    server = APIServer(port=0, simulate_workloads=True).start()
    directory = tmp_path_factory.mktemp("tenants")
    server.write_kubeconfig(str(directory / "kubeconfig"))
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test", qps=500, burst=500)
    install(kube)
    install_missing(kube)  # the workflow steps these tests use, where the catalog has none
    for ns in ("team-a", "team-b"):
        kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    kube.create(SERVICE_ACCOUNTS, {"apiVersion": "v1", "kind": "ServiceAccount",
                                   "metadata": {"name": "tenant", "namespace": "team-a"}})
    grant(kube, "team-a", "tenant", {"kind": "ServiceAccount", "name": "tenant", "namespace": "team-a"}, TENANT_RULES)
    token = kube.request("create", "POST", "/api/v1/namespaces/team-a/serviceaccounts/tenant/token",
                         body={"spec": {"expirationSeconds": 3600}})["status"]["token"]
    doc = server.kubeconfig_document()
    doc["users"][0]["user"]["token"] = token
    tenant = KubeClient.from_kubeconfig(write_kubeconfig(str(directory / "tenant"), doc), shard_id="tenant")
    # Secrets the tenant must never reach through an app.
    kube.create(SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "team-b-db", "namespace": "team-b"},
                          "stringData": {"password": "hunter2"}})
    manager = Manager(kube, "master")
    ApplicationController(manager, Options(workers=4, state_keep_interval=1.0, waiting_requeue=0.5,
                                           auth=AuthConfig()))
    stop = threading.Event()
    thread = threading.Thread(target=manager.run, args=(stop,), daemon=True)
    thread.start()
    yield server, kube, tenant
    stop.set()
    thread.join(15)
    server.stop()


def app(name: str, components: list[dict], author: str | None = TENANT, ns: str = "team-a", **spec) -> dict:
    annotations = {labels.APP_USERNAME: author, labels.APP_GROUP: ""} if author else {}
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": name, "namespace": ns, "annotations": annotations},
            "spec": {"components": components, **spec}}


def objects(*manifests: dict, name: str = "objs") -> dict:
    return {"name": name, "type": "k8s-objects", "properties": {"objects": list(manifests)}}


def configmap(name: str, namespace: str | None = None) -> dict:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


def condition(kube: KubeClient, name: str, ctype: str, ns: str = "team-a") -> dict:
    status = kube.get(APPLICATIONS, name, ns).get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == ctype), {})


def refused(kube: KubeClient, name: str, ns: str = "team-a") -> str:
    """The app's Authorized condition once it says Forbidden; its message."""
    found = eventually(lambda: condition(kube, name, "Authorized", ns).get("status") == "False"
                       and condition(kube, name, "Authorized", ns), timeout=20)
    assert found["reason"] in ("Forbidden", "ServiceAccountRefused"), found
    return found["message"]


def warnings(kube: KubeClient, name: str, ns: str = "team-a") -> list[str]:
    return [e["message"] for e in kube.list(EVENTS, ns)["items"]
            if e["involvedObject"]["name"] == name and e["type"] == "Warning"]


def test_a_tenants_own_apps_run_as_the_tenant(cluster):
    server, kube, tenant = cluster
    tenant.create(APPLICATIONS, app("own", [
        {"name": "web", "type": "webservice", "properties": {"image": "nginx", "ports": [{"port": 80}]}},
        objects(configmap("settings"))]))
    eventually(lambda: (kube.get(APPLICATIONS, "own", "team-a").get("status") or {}).get("status") == "running",
               timeout=30)
    assert condition(kube, "own", "Authorized")["message"] == f"acts as {TENANT}"
    assert kube.get(CONFIGMAPS, "settings", "team-a")["data"] == {"k": "v"}
    # The API server's audit log: the controller made the writes as the tenant (impersonation).
    records = server.audit.since(0)["items"]
    creates = [r for r in records if r.get("verb") == "create" and r.get("namespace") == "team-a"
               and r.get("resource") in ("deployments", "configmaps", "services")]
    assert creates and all(r["user"] == "admin" and r["impersonatedUser"]["username"] == TENANT for r in creates)


@pytest.mark.parametrize("name,manifest,what", [
    ("other-team", configmap("planted", "team-b"), "create configmaps in namespace team-b"),
    ("kube-system-secret", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x", "namespace": "kube-system"},
                            "stringData": {"a": "b"}}, "create secrets in namespace kube-system"),
    ("cluster-admin", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                       "metadata": {"name": "tenant-is-admin"},
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                       "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": "team-a"}]},
     "create clusterrolebindings.rbac.authorization.k8s.io at the cluster scope"),
])
def test_writes_beyond_the_authors_rights_are_refused_with_a_condition(cluster, name, manifest, what):
    _, kube, tenant = cluster
    tenant.create(APPLICATIONS, app(name, [objects(manifest)]))
    message = refused(kube, name)
    assert message == f"Forbidden: {TENANT} cannot {what}"
    assert eventually(lambda: [w for w in warnings(kube, name) if w == message])
    step = kube.get(APPLICATIONS, name, "team-a")["status"]["workflow"]["steps"][0]
    assert step["phase"] == "failed" and what in step["message"]
    kind = manifest["kind"]
    res = {"ConfigMap": CONFIGMAPS, "Secret": SECRETS, "ClusterRoleBinding": CLUSTER_ROLE_BINDINGS}[kind]
    with pytest.raises(errors.NotFound):
        kube.get(res, manifest["metadata"]["name"], manifest["metadata"].get("namespace"))


def test_reads_beyond_the_authors_rights_land_nowhere(cluster):
    _, kube, tenant = cluster
    tenant.create(APPLICATIONS, app("peek", [{"name": "copy", "type": "ref-objects", "properties": {
        "objects": [{"resource": "secret", "name": "team-b-db", "namespace": "team-b"}]}}]))
    message = refused(kube, "peek")
    assert message == f'Forbidden: {TENANT} cannot get secrets "team-b-db" in namespace team-b'
    assert condition(kube, "peek", "Rendered")["reason"] == "RefObjectsFailed"
    tenant.create(APPLICATIONS, app("read-step", [objects(configmap("unused"))], workflow={"steps": [
        {"name": "read", "type": "read-object", "properties": {"apiVersion": "v1", "kind": "Secret",
                                                               "name": "team-b-db", "namespace": "team-b"},
         "outputs": [{"name": "secret", "valueFrom": "value"}]}]}))
    assert refused(kube, "read-step") == f'Forbidden: {TENANT} cannot get secrets "team-b-db" in namespace team-b'
    # a refused read fails its step, saying what was refused
    step = eventually(lambda: (kube.get(APPLICATIONS, "read-step", "team-a")["status"]["workflow"]["steps"][0]
                               if "cannot get secrets" in str(kube.get(APPLICATIONS, "read-step", "team-a")["status"]
                                                                  ["workflow"]) else None), timeout=20)
    assert step["phase"] == "failed" and 'cannot get secrets "team-b-db" in namespace team-b' in step["message"]
    status = kube.get(APPLICATIONS, "read-step", "team-a")["status"]
    assert "hunter2" not in str(status) and "aHVudGVyMg" not in str(status)


def test_health_of_another_namespaces_object_is_read_as_the_author(cluster):
    """The shard caches every app's objects; another namespace's object is not healthy for the tenant's app (nor
    does it exist): the health read goes through the author, who may not read it."""
    _, kube, tenant = cluster
    theirs = dict(configmap("b-settings", "team-b"), metadata={
        "name": "b-settings", "namespace": "team-b",
        "labels": {labels.APP_NAME: "owner", labels.APP_NAMESPACE: "team-b"}})
    kube.create(CONFIGMAPS, theirs)
    tenant.create(APPLICATIONS, app("own-configmaps", [objects(configmap("mine"))]))  # the kind gets cached
    eventually(lambda: (kube.get(APPLICATIONS, "own-configmaps", "team-a").get("status") or {}).get("status")
               == "running", timeout=30)
    tenant.create(APPLICATIONS, app("health-peek", [objects(configmap("b-settings", "team-b"))]))
    assert "configmaps" in refused(kube, "health-peek")
    services = eventually(lambda: (kube.get(APPLICATIONS, "health-peek", "team-a").get("status") or {}).get(
        "services"), timeout=20)
    assert services[0]["healthy"] is False and "Exists" not in services[0].get("message", ""), services


def test_nothing_is_adopted_or_collected_by_accident(cluster):
    _, kube, tenant = cluster
    kube.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "seed", "namespace": "team-a"}, "data": {"owner": "ops"}})
    tenant.create(APPLICATIONS, app("grab", [objects(configmap("seed"))]))
    eventually(lambda: "exists but is not managed by any application" in condition(
        kube, "grab", "WorkflowFinished").get("message", ""), timeout=20)
    assert kube.get(CONFIGMAPS, "seed", "team-a")["data"] == {"owner": "ops"}
    # The app stops rendering it: what was never adopted is never garbage-collected.
    current = kube.get(APPLICATIONS, "grab", "team-a")
    current["spec"]["components"] = [objects(configmap("grab-own"))]
    tenant.update(APPLICATIONS, current)
    eventually(lambda: (kube.get(APPLICATIONS, "grab", "team-a").get("status") or {}).get("status") == "running",
               timeout=30)
    assert kube.get(CONFIGMAPS, "seed", "team-a")["data"] == {"owner": "ops"}
    # A take-over policy says so: then it is adopted.
    tenant.create(APPLICATIONS, app("adopt", [objects(configmap("seed"))], policies=[
        {"name": "mine", "type": "take-over", "properties": {"rules": [{"selector": {"resourceTypes": ["ConfigMap"]}}]}}]))
    eventually(lambda: (kube.get(CONFIGMAPS, "seed", "team-a")["metadata"].get("labels") or {}).get(
        labels.APP_NAME) == "adopt", timeout=30)


def test_authorless_apps_act_as_the_default_user(cluster):
    _, kube, _ = cluster
    kube.create(APPLICATIONS, app("legacy", [objects(configmap("legacy-settings"))], author=None))
    message = refused(kube, "legacy")
    # It says why it acts as the default user, and what to check.
    assert message.startswith("Forbidden: kubevela:vela-core cannot create configmaps in namespace team-a (no author "
                              "was recorded on this application (annotation app.oam.dev/username), so it acts as the "
                              "default user kubevela:vela-core: it was written past the master's mutating webhook; "
                              "check that the webhook is registered (kubectl get mutatingwebhookconfigurations)"), message
    assert eventually(lambda: message in warnings(kube, "legacy"))
    # The platform admin gives the default user the right here: the app is retried (with backoff) and runs.
    grant(kube, "team-a", "default-user", {"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                           "name": "kubevela:vela-core"},
          [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}])
    eventually(lambda: condition(kube, "legacy", "Authorized").get("status") == "True", timeout=40)
    assert kube.get(CONFIGMAPS, "legacy-settings", "team-a")["data"] == {"k": "v"}


def test_an_app_may_not_name_a_service_account(cluster):
    _, kube, _ = cluster
    named = app("sa", [objects(configmap("sa-settings"))])
    named["metadata"]["annotations"][labels.APP_SERVICE_ACCOUNT] = "default"
    kube.create(APPLICATIONS, named)
    assert "app.oam.dev/service-account-name is not permitted" in refused(kube, "sa")
    with pytest.raises(errors.NotFound):
        kube.get(CONFIGMAPS, "sa-settings", "team-a")


def test_the_author_guard_keeps_authors_true_without_the_master(cluster):
    _, kube, tenant = cluster
    policy, binding = guard_objects(AuthConfig(), ["admin"], name="author-guard-test")
    kube.create(ADMISSION_POLICIES, policy)
    kube.create(ADMISSION_POLICY_BINDINGS, binding)
    try:
        def denied(body: dict) -> str:
            with pytest.raises(errors.Forbidden) as err:
                tenant.create(APPLICATIONS, body)
            return err.value.message

        def update_denied(change) -> str:
            """Change alice's app as the tenant, re-reading on a 409 (the controller writes its status)."""
            for _ in range(20):
                current = tenant.get(APPLICATIONS, "alices", "team-a")
                change(current)
                try:
                    tenant.update(APPLICATIONS, current)
                except errors.Conflict:
                    continue
                except errors.Forbidden as err:
                    return err.message
                raise AssertionError("the update was allowed")
            raise AssertionError("kept conflicting")

        spoofed = app("spoof", [objects(configmap("s"))], author="admin")
        spoofed["metadata"]["annotations"][labels.APP_GROUP] = "system:masters"
        assert 'may not record "admin" (groups "system:masters") as the author' in denied(spoofed)
        # Naming itself, or nothing (the app then acts as the default user), is fine.
        tenant.create(APPLICATIONS, app("honest", [objects(configmap("h"))]))
        tenant.create(APPLICATIONS, app("anonymous", [objects(configmap("n"))], author=None))
        # Another author's app: its metadata may change, its spec only through the webhook (which is down).
        kube.create(APPLICATIONS, app("alices", [objects(configmap("al"))], author="alice"))
        update_latest(tenant, APPLICATIONS, "alices", "team-a",
                      lambda obj: obj["metadata"].__setitem__("labels", {"team": "a"}))

        def edit(obj: dict) -> None:
            obj["spec"]["components"][0]["properties"]["objects"][0]["data"] = {"k": "mine"}

        assert 'its recorded author is "alice"' in update_denied(edit)
        assert "may not remove the recorded author" in update_denied(
            lambda obj: obj["metadata"].__setitem__("annotations", {}))
        named = app("named-sa", [objects(configmap("x"))])
        named["metadata"]["annotations"][labels.APP_SERVICE_ACCOUNT] = "default"
        assert "service-account-name is not permitted" in denied(named)
    finally:
        kube.delete(ADMISSION_POLICY_BINDINGS, binding["metadata"]["name"])
        kube.delete(ADMISSION_POLICIES, policy["metadata"]["name"])
