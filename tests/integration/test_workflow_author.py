"""Every request a workflow step makes in the cluster goes through the client the engine is given for the app,
which acts as its author (core/authors.py): here a user whose RBAC allows ConfigMaps in the app's namespace only.
What the user may do works; what it may not is refused (403) whatever the controller itself could do, and the
step says so."""

from __future__ import annotations

import threading

import pytest

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.apiserver.http.server import APIServer
from velashard.core.controller import ApplicationController, Options
from velashard.core.install import install
from velashard.kube.client import KubeClient
from velashard.kube.manager import Manager
from velashard.kube.resources import CONFIGMAPS, NAMESPACES, Resource
from velashard.workflow.store import context_name
from tests.integration.helpers import eventually
from tests.workflowsteps import install_missing

ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
AUTHOR = "jane@example.com"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    server = APIServer(port=0, simulate_workloads=True).start()
    folder = tmp_path_factory.mktemp("author")
    server.write_kubeconfig(str(folder / "kubeconfig"))
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test", qps=500, burst=500)
    install(kube)
    install_missing(kube)
    for name in ("authored", "elsewhere"):
        kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    kube.create(ROLES, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                        "metadata": {"name": "configmaps"}, "rules": [
                            {"apiGroups": [""], "resources": ["configmaps"],
                             "verbs": ["get", "list", "create", "update", "patch", "delete"]}]}, "authored")
    kube.create(BINDINGS, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                           "metadata": {"name": "jane"}, "subjects": [{"kind": "User", "name": AUTHOR}],
                           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                       "name": "configmaps"}}, "authored")
    manager = Manager(kube, "master")
    ApplicationController(manager, Options(workers=2, state_keep_interval=1.0, waiting_requeue=0.5))
    stop = threading.Event()
    thread = threading.Thread(target=manager.run, args=(stop,), daemon=True)
    thread.start()
    yield server, kube
    stop.set()
    thread.join(15)
    server.stop()


def app(name: str, steps: list[dict]) -> dict:
    """An app Jane wrote (the author the master's webhook would record)."""
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": name, "namespace": "authored", "annotations": {labels.APP_USERNAME: AUTHOR}},
            "spec": {"components": [], "workflow": {"steps": steps}}}


def acting(record: dict) -> str:
    """Whom a request acted as: the impersonated user, else who sent it (the audit log records both)."""
    return (record.get("impersonatedUser") or {}).get("username") or record["user"]


def test_steps_read_and_keep_their_context_as_the_author(cluster):
    server, kube = cluster
    kube.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "go"},
                             "data": {"ready": "true"}}, "authored")
    seq = server.audit.since(1 << 62)["lastSeq"]
    kube.create(APPLICATIONS, app("mine", [{"name": "gate", "type": "wait-for-config", "properties": {"name": "go"},
                                            "outputs": [{"name": "seen", "valueFrom": "data.ready"}]}]))
    eventually(lambda: (kube.get(APPLICATIONS, "mine", "authored").get("status") or {}).get("status") == "running",
               timeout=20)
    records = server.audit.since(seq)["items"]
    read = [r for r in records if r["resource"] == "configmaps" and r["name"] == "go" and r["verb"] == "get"]
    assert read and {acting(r) for r in read} == {AUTHOR}
    context = [r for r in records if r["resource"] == "configmaps" and r["verb"] == "create"
               and r["namespace"] == "authored"]
    assert context and {acting(r) for r in context} == {AUTHOR}
    assert kube.get(CONFIGMAPS, context_name("mine"), "authored")["metadata"]["ownerReferences"][0]["name"] == "mine"


def test_what_the_author_may_not_do_is_refused_and_the_step_says_so(cluster):
    server, kube = cluster
    kube.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "theirs"},
                             "data": {"ready": "true"}}, "elsewhere")
    seq = server.audit.since(1 << 62)["lastSeq"]
    kube.create(APPLICATIONS, app("nosy", [{"name": "peek", "type": "read-object", "properties": {
        "apiVersion": "v1", "kind": "ConfigMap", "name": "theirs", "namespace": "elsewhere"},
        "outputs": [{"name": "x", "valueFrom": "output.value.data.ready"}]}]))

    def peek() -> dict | None:
        steps = ((kube.get(APPLICATIONS, "nosy", "authored").get("status") or {}).get("workflow") or {}).get(
            "steps") or []
        return next((s for s in steps if s["name"] == "peek" and s.get("message")), None)

    step = eventually(peek, timeout=20)
    # the refusal fails the step and is its message (KubeVela would leave it in $returns.err)
    assert step["phase"] == "failed" and 'cannot get configmaps "theirs" in namespace elsewhere' in step["message"]
    refused = [r for r in server.audit.since(seq)["items"] if r["resource"] == "configmaps"
               and r["name"] == "theirs"]
    assert refused and all(acting(r) == AUTHOR and r["code"] == 403 for r in refused)
