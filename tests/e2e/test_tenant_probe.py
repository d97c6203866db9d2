"""A tenant attacks a shared platform through Applications, and every path is refused.

Real Helm installs helm/velashard with sharding and authentication (its RBAC, ServiceAccounts, shard-label and
author guards) into the embedded API server; a master and two shards run as processes with the chart's
ServiceAccounts' tokens. The tenant is a ServiceAccount that may edit Applications in team-a, plus ConfigMaps,
Services and Deployments there, and nothing else. Through apps it tries to write into other namespaces and the
release namespace, to grant itself cluster rights, to read the shard-signing key and another team's Secret, to
adopt and then garbage-collect objects no app manages, and to record someone else as its apps' author (with the
master up and with the master down). Each app says who was refused what; nothing outside team-a changes; the
tenant's ordinary apps run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import pytest

from tests.e2e.helpers import (RUNTIME_NS, chart_identities, free_port, shard_pod, stop_processes,
                               wait_for_shard_leases)
from tests.e2e.test_master_down import refuses
from tests.e2e.test_sharding import webhook_serving
from tests.integration.helpers import eventually
from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.core.events import EVENTS
from velashard.core.install import install
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.kubeconfig import write_kubeconfig
from velashard.kube.resources import (CONFIGMAPS, DEPLOYMENTS, LEASES, MUTATING_WEBHOOKS, NAMESPACES, SECRETS,
                                      SERVICEACCOUNTS)
from velashard.sharding.keys import SIGNING_KEY_SECRET, VERIFYING_KEY_CONFIGMAP
from tests.workflowsteps import install_missing

pytest.importorskip("helm_python", reason="helm-python-sdk is installed by the test extra")

NS, OTHER = "team-a", "team-b"
TENANT = f"system:serviceaccount:{NS}:tenant"
SHARDS = ("shard-a", "shard-b")
RBAC = "/apis/rbac.authorization.k8s.io/v1"
MASTER_DEPLOYMENT = "kubevela-velashard"
SECRET_VALUE = "team-b-password-7f3a"


def tenant_client(server, admin: KubeClient, directory) -> KubeClient:
    """Edit Applications in team-a, plus ConfigMaps, Services and Deployments there: nothing more."""
    admin.create(SERVICEACCOUNTS, {"apiVersion": "v1", "kind": "ServiceAccount",
                                   "metadata": {"name": "tenant", "namespace": NS}})
    admin.request("create", "POST", f"{RBAC}/namespaces/{NS}/roles", body={
        "metadata": {"name": "tenant"}, "rules": [
            {"apiGroups": ["core.oam.dev"], "resources": ["applications"], "verbs": ["*"]},
            {"apiGroups": [""], "resources": ["configmaps", "services"], "verbs": ["*"]},
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"]}]})
    admin.request("create", "POST", f"{RBAC}/namespaces/{NS}/rolebindings", body={
        "metadata": {"name": "tenant"}, "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": NS}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant"}})
    token = admin.request("create", "POST", f"/api/v1/namespaces/{NS}/serviceaccounts/tenant/token",
                          body={"spec": {"expirationSeconds": 3600}})["status"]["token"]
    doc = server.kubeconfig_document()
    doc["users"][0]["user"]["token"] = token
    return KubeClient.from_kubeconfig(write_kubeconfig(str(directory / "tenant.kubeconfig"), doc),
                                      shard_id="tenant", qps=200, burst=200)


def application(name: str, components: list[dict], **spec) -> dict:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": {"name": name, "namespace": NS},
            "spec": {"components": components, **spec}}


def objects(*manifests: dict) -> dict:
    return {"name": "objs", "type": "k8s-objects", "properties": {"objects": list(manifests)}}


def manifest(api_version: str, kind: str, name: str, namespace: str | None = None, **body) -> dict:
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, **({"namespace": namespace} if namespace else {})}, **body}


def ref(resource: str, name: str, namespace: str) -> dict:
    return {"name": "copy", "type": "ref-objects",
            "properties": {"objects": [{"resource": resource, "name": name, "namespace": namespace}]}}


def placeholder() -> dict:
    return objects(manifest("v1", "ConfigMap", "placeholder", data={"k": "v"}))


# Each path: the app, and what its Authorized condition must say the tenant was refused.
PATHS = {
    "write-other-team": (application("write-other-team", [objects(manifest(
        "v1", "ConfigMap", "planted", OTHER, data={"k": "v"}))]), "create configmaps in namespace team-b"),
    "overwrite-other-team": (application("overwrite-other-team", [objects(manifest(
        "v1", "ConfigMap", "team-b-settings", OTHER, data={"mode": "owned"}))]),
        "create configmaps in namespace team-b"),
    "step-writes-other-team": (application("step-writes-other-team", [placeholder()], workflow={"steps": [
        {"name": "plant", "type": "apply-object", "properties": {"value": manifest(
            "v1", "ConfigMap", "via-step", OTHER, data={"k": "v"})}}]}), "create configmaps in namespace team-b"),
    # Secrets are not in the shards' caches (their role has none): the first request is a read, as the tenant.
    "kube-system-secret": (application("kube-system-secret", [objects(manifest(
        "v1", "Secret", "planted", "kube-system", stringData={"k": "v"}))]),
        'secrets "planted" in namespace kube-system'),
    "service-account-token": (application("service-account-token", [objects(
        manifest("v1", "ServiceAccount", "robot", OTHER),
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
         "metadata": {"name": "robot-token", "namespace": OTHER,
                      "annotations": {"kubernetes.io/service-account.name": "robot"}}})]),
        "create serviceaccounts in namespace team-b"),
    "pods-as-the-master": (application("pods-as-the-master", [objects(manifest(
        "apps/v1", "Deployment", "miner", RUNTIME_NS, spec={
            "selector": {"matchLabels": {"app": "miner"}},
            "template": {"metadata": {"labels": {"app": "miner"}}, "spec": {
                "serviceAccountName": MASTER_DEPLOYMENT, "containers": [{"name": "m", "image": "miner"}]}}}))]),
        "create deployments.apps in namespace vela-system"),
    "adopt-the-master": (application("adopt-the-master", [objects(manifest(
        "apps/v1", "Deployment", MASTER_DEPLOYMENT, RUNTIME_NS, spec={
            "replicas": 0, "selector": {"matchLabels": {"app.kubernetes.io/name": "vela-core"}},
            "template": {"metadata": {"labels": {"app.kubernetes.io/name": "vela-core"}},
                         "spec": {"containers": [{"name": "vela-core", "image": "evil"}]}}}))]),
        "create deployments.apps in namespace vela-system"),
    "adopt-a-lease": (application("adopt-a-lease", [objects(manifest(
        "coordination.k8s.io/v1", "Lease", "velashard-shard-a", RUNTIME_NS, spec={"holderIdentity": "tenant"}))]),
        'get leases.coordination.k8s.io "velashard-shard-a" in namespace vela-system'),
    "verifying-key": (application("verifying-key", [objects(manifest(
        "v1", "ConfigMap", VERIFYING_KEY_CONFIGMAP, RUNTIME_NS, data={"public.pem": "mine"}))]),
        "create configmaps in namespace vela-system"),
    "cluster-role": (application("cluster-role", [objects(manifest(
        "rbac.authorization.k8s.io/v1", "ClusterRole", "tenant-everything",
        rules=[{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]))]),
        'clusterroles.rbac.authorization.k8s.io "tenant-everything" at the cluster scope'),
    "cluster-role-binding": (application("cluster-role-binding", [objects(manifest(
        "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "tenant-admin",
        roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        subjects=[{"kind": "ServiceAccount", "name": "tenant", "namespace": NS}]))]),
        'clusterrolebindings.rbac.authorization.k8s.io "tenant-admin" at the cluster scope'),
    "read-signing-key": (application("read-signing-key", [ref("secret", SIGNING_KEY_SECRET, RUNTIME_NS)]),
                         f'get secrets "{SIGNING_KEY_SECRET}" in namespace vela-system'),
    "read-other-team": (application("read-other-team", [ref("secret", "team-b-db", OTHER)]),
                        'get secrets "team-b-db" in namespace team-b'),
    "copy-into-a-configmap": (application("copy-into-a-configmap", [dict(ref("secret", "team-b-db", OTHER), traits=[
        {"type": "json-merge-patch", "properties": {"kind": "ConfigMap", "metadata": {"namespace": NS}}}])]),
        'get secrets "team-b-db" in namespace team-b'),
    "step-reads-signing-key": (application("step-reads-signing-key", [placeholder()], workflow={"steps": [
        {"name": "read", "type": "read-object", "properties": {"apiVersion": "v1", "kind": "Secret",
                                                               "name": SIGNING_KEY_SECRET, "namespace": RUNTIME_NS},
         "outputs": [{"name": "key", "valueFrom": "value"}]}]}),
        f'get secrets "{SIGNING_KEY_SECRET}" in namespace vela-system'),
    "watch-other-team-app": (application("watch-other-team-app", [placeholder()], workflow={"steps": [
        {"name": "wait", "type": "depends-on-app", "properties": {"name": "victim", "namespace": OTHER}}]}),
        'get applications.core.oam.dev "victim" in namespace team-b'),
    "adopt-then-collect": (application("adopt-then-collect", [ref("secret", "team-b-unowned", OTHER)]),
                           'get secrets "team-b-unowned" in namespace team-b'),
}
UNMANAGED = "adopt-own-unmanaged"  # an object no app manages, in the tenant's own namespace


def condition(admin: KubeClient, name: str, ctype: str) -> dict:
    status = admin.get(APPLICATIONS, name, NS).get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == ctype), {})


def phase(admin: KubeClient, name: str) -> str | None:
    return (admin.get(APPLICATIONS, name, NS).get("status") or {}).get("status")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from velashard.apiserver.http.server import APIServer

    server = APIServer(port=0, simulate_workloads=True).start()
    directory = tmp_path_factory.mktemp("probe")
    admin = KubeClient.from_kubeconfig(server.write_kubeconfig(str(directory / "admin")), shard_id="test",
                                       qps=500, burst=500)
    install(admin)
    install_missing(admin)  # the workflow steps these tests use, where the catalog has none
    for ns in (NS, OTHER):
        admin.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    # As the chart grants it: the default user may do nothing.
    master_kubeconfig, shard_kubeconfig = chart_identities(server, admin, directory, trust_admin=False)
    tenant = tenant_client(server, admin, directory)
    # What other teams and the platform own.
    admin.create(SECRETS, manifest("v1", "Secret", "team-b-db", OTHER, stringData={"password": SECRET_VALUE}))
    admin.create(SECRETS, manifest("v1", "Secret", "team-b-unowned", OTHER, stringData={"token": SECRET_VALUE}))
    admin.create(CONFIGMAPS, manifest("v1", "ConfigMap", "team-b-settings", OTHER, data={"mode": "theirs"}))
    admin.create(CONFIGMAPS, manifest("v1", "ConfigMap", "shared-settings", NS, data={"owner": "ops"}))
    admin.create(APPLICATIONS, {**application("victim", [placeholder()]),
                                "metadata": {"name": "victim", "namespace": OTHER}})
    webhook_port = free_port()
    procs: dict[str, subprocess.Popen] = {}

    def start(shard: str) -> None:
        master = shard == "master"
        extra = ["--webhook-port", str(webhook_port), "--webhook-url", f"https://127.0.0.1:{webhook_port}",
                 "--controller-identity", f"system:serviceaccount:{RUNTIME_NS}:kubevela-velashard"] if master else []
        procs[shard] = subprocess.Popen(
            [sys.executable, "-m", "velashard.cli.main", "--kubeconfig", master_kubeconfig if master else
             shard_kubeconfig, "--enable-sharding", "--shard-id", shard, "--namespace", RUNTIME_NS,
             "--metrics-addr", "127.0.0.1:0", "--health-addr", "127.0.0.1:0", *extra],
            stdout=open(directory / f"{shard}.log", "ab"), stderr=subprocess.STDOUT,
            start_new_session=master)  # its own group: killing it kills its webhook server too

    try:
        for shard in ("master", *SHARDS):
            start(shard)
            shard_pod(admin, shard, True)
        wait_for_shard_leases(admin, "master", *SHARDS)
        eventually(lambda: admin.list(MUTATING_WEBHOOKS)["items"], timeout=90)
        eventually(webhook_serving(webhook_port), timeout=90)
        yield server, admin, tenant, procs, start, webhook_port
    finally:
        stop_processes(list(procs.values()))
        server.stop()


def test_every_path_is_refused_with_a_condition_and_nothing_outside_changes(cluster):
    server, admin, tenant, *_ = cluster
    since = server.audit.since(1 << 62)["lastSeq"]
    master_before = admin.get(DEPLOYMENTS, MASTER_DEPLOYMENT, RUNTIME_NS)
    key_before = admin.get(CONFIGMAPS, VERIFYING_KEY_CONFIGMAP, RUNTIME_NS)["data"]
    for app, _ in PATHS.values():
        tenant.create(APPLICATIONS, app)
    tenant.create(APPLICATIONS, application(UNMANAGED, [objects(manifest(
        "v1", "ConfigMap", "shared-settings", data={"owner": "tenant"}))]))
    # Ordinary apps of the same tenant, in its namespace, run.
    tenant.create(APPLICATIONS, application("web", [{"name": "web", "type": "webservice", "properties": {
        "image": "nginx", "ports": [{"port": 80}]}}]))
    tenant.create(APPLICATIONS, application("settings", [objects(manifest("v1", "ConfigMap", "app-settings",
                                                                          data={"k": "v"}))]))

    def all_refused() -> dict[str, str]:
        found = {name: condition(admin, name, "Authorized") for name in PATHS}
        return found if all(c.get("status") == "False" for c in found.values()) else {}

    refusals = eventually(all_refused, timeout=120, interval=1.0)
    for name, (_, what) in PATHS.items():
        message = refusals[name]["message"]
        assert message.startswith(f"Forbidden: {TENANT} cannot ") and what in message, (name, message)
    events = [e for e in admin.list(EVENTS, NS)["items"] if e["reason"] == "Forbidden" and e["type"] == "Warning"]
    assert {e["involvedObject"]["name"] for e in events} >= set(PATHS)
    eventually(lambda: "exists but is not managed by any application" in condition(
        admin, UNMANAGED, "WorkflowFinished").get("message", ""), timeout=60)
    eventually(lambda: phase(admin, "web") == "running" and phase(admin, "settings") == "running", timeout=90)
    assert condition(admin, "web", "Authorized")["message"] == f"acts as {TENANT}"

    # Nothing outside team-a was created, changed or adopted.
    for res, name, ns in ((CONFIGMAPS, "planted", OTHER), (CONFIGMAPS, "via-step", OTHER),
                          (SECRETS, "planted", "kube-system"), (SERVICEACCOUNTS, "robot", OTHER),
                          (SECRETS, "robot-token", OTHER), (DEPLOYMENTS, "miner", RUNTIME_NS)):
        with pytest.raises(errors.NotFound):
            admin.get(res, name, ns)
    for plural in ("clusterroles/tenant-everything", "clusterrolebindings/tenant-admin"):
        with pytest.raises(errors.NotFound):
            admin.request("get", "GET", f"{RBAC}/{plural}")
    assert admin.get(CONFIGMAPS, "team-b-settings", OTHER)["data"] == {"mode": "theirs"}
    assert admin.get(CONFIGMAPS, "shared-settings", NS)["data"] == {"owner": "ops"}
    assert admin.get(CONFIGMAPS, VERIFYING_KEY_CONFIGMAP, RUNTIME_NS)["data"] == key_before
    master_after = admin.get(DEPLOYMENTS, MASTER_DEPLOYMENT, RUNTIME_NS)
    assert master_after["spec"] == master_before["spec"]
    assert labels.APP_NAME not in (master_after["metadata"].get("labels") or {})
    lease = admin.get(LEASES, "velashard-shard-a", RUNTIME_NS)
    assert lease["spec"]["holderIdentity"] != "tenant" and labels.APP_NAME not in (lease["metadata"].get("labels")
                                                                                    or {})
    # Nothing secret landed anywhere the tenant can read: its apps' status, its ConfigMaps.
    signing_key = admin.get(SECRETS, SIGNING_KEY_SECRET, RUNTIME_NS)["data"]
    readable = str(tenant.list(APPLICATIONS, NS)["items"]) + str(tenant.list(CONFIGMAPS, NS)["items"])
    for secret in [SECRET_VALUE, *signing_key.values()]:
        assert secret not in readable
    # The API server's audit log: every write the controllers made as the tenant stayed in team-a, and no read
    # of a Secret as the tenant succeeded.
    records = server.audit.since(since)["items"]
    as_tenant = [r for r in records if (r.get("impersonatedUser") or {}).get("username") == TENANT]
    assert as_tenant
    writes = [r for r in as_tenant if r.get("verb") in ("create", "update", "patch", "delete") and r["code"] < 400]
    assert writes and {r.get("namespace") for r in writes} == {NS}, writes[:5]
    assert not [r for r in as_tenant if r.get("resource") == "secrets" and r["code"] < 400]


def test_dropping_what_was_never_adopted_deletes_nothing(cluster):
    _, admin, tenant, *_ = cluster
    eventually(lambda: condition(admin, "adopt-then-collect", "Authorized").get("status") == "False"
               and condition(admin, UNMANAGED, "WorkflowFinished").get("status") == "False", timeout=60)
    for name in ("adopt-then-collect", UNMANAGED):
        current = admin.get(APPLICATIONS, name, NS)
        current["spec"]["components"] = [objects(manifest("v1", "ConfigMap", f"{name}-own", data={"k": "v"}))]
        tenant.update(APPLICATIONS, current)
    eventually(lambda: phase(admin, "adopt-then-collect") == "running" and phase(admin, UNMANAGED) == "running",
               timeout=90)
    assert admin.get(SECRETS, "team-b-unowned", OTHER)
    assert admin.get(CONFIGMAPS, "shared-settings", NS)["data"] == {"owner": "ops"}


def test_spoofed_authors_are_overwritten_with_the_master_up_and_denied_with_it_down(cluster):
    _, admin, tenant, procs, start, webhook_port = cluster
    spoofed = application("spoofed-up", [placeholder()])
    spoofed["metadata"]["annotations"] = {labels.APP_USERNAME: "admin", labels.APP_GROUP: "system:masters"}
    created = tenant.create(APPLICATIONS, spoofed)
    assert created["metadata"]["annotations"][labels.APP_USERNAME] == TENANT
    assert created["metadata"]["annotations"][labels.APP_GROUP] == ""
    # An update carrying the spoof is overwritten too.
    created["metadata"]["annotations"] = {labels.APP_USERNAME: "admin", labels.APP_GROUP: "system:masters"}
    for _ in range(10):
        try:
            updated = tenant.update(APPLICATIONS, created)
            break
        except errors.Conflict:
            created = dict(tenant.get(APPLICATIONS, "spoofed-up", NS), metadata={
                **tenant.get(APPLICATIONS, "spoofed-up", NS)["metadata"],
                "annotations": {labels.APP_USERNAME: "admin", labels.APP_GROUP: "system:masters"}})
    assert updated["metadata"]["annotations"][labels.APP_USERNAME] == TENANT

    os.killpg(procs["master"].pid, signal.SIGKILL)
    procs["master"].wait(10)
    eventually(lambda: refuses(webhook_port), timeout=15)
    try:
        down = application("spoofed-down", [placeholder()])
        down["metadata"]["annotations"] = {labels.APP_USERNAME: "admin", labels.APP_GROUP: "system:masters"}
        with pytest.raises(errors.Forbidden) as err:
            tenant.create(APPLICATIONS, down)
        assert 'may not record "admin" (groups "system:masters")' in err.value.message
        down["metadata"]["annotations"] = {labels.APP_GROUP: "system:masters"}
        with pytest.raises(errors.Forbidden):
            tenant.create(APPLICATIONS, down)
        # Written with no author at all, the app acts as the default user, whom the chart grants nothing.
        down["metadata"]["annotations"] = {}
        tenant.create(APPLICATIONS, down)
    finally:
        start("master")
        eventually(webhook_serving(webhook_port), timeout=60)
    eventually(lambda: condition(admin, "spoofed-down", "Authorized").get("status") == "False", timeout=90)
    assert condition(admin, "spoofed-down", "Authorized")["message"].startswith(
        "Forbidden: kubevela:vela-core cannot")
