"""Every request a workflow step makes in the cluster goes through the client the engine is given for the app,
which acts as its author (core/authors.py): here a user whose RBAC allows ConfigMaps in the app's namespace only.
What the user may do works; what it may not is refused (403) whatever the controller itself could do, and the
step says so."""

from __future__ import annotations


import pytest

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.kube.resources import CONFIGMAPS
from velashard.workflow.store import context_name
from tests.integration.helpers import AUTHOR, CONFIGMAP_RULES, controller_cluster, eventually

@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from controller_cluster(tmp_path_factory, trust_authorless=False, author_rules=CONFIGMAP_RULES, workers=2)


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
