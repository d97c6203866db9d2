"""Admission webhooks: matching, AdmissionReview contents, JSONPatch, denial, failure policies, TLS."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.integration.helpers import status_of
from tests.integration.webhook_server import WebhookServer, patch_response


@pytest.fixture
def hook():
    server = WebhookServer(hosts=["127.0.0.1", "localhost", "hooks.webhooks.svc"])
    yield server
    server.stop()


@pytest.fixture
def cluster(make_apiserver, hook):
    server = make_apiserver(service_endpoints={"webhooks/hooks": f"127.0.0.1:{hook.port}"})
    api = config.new_client_from_config(config_file=server.kubeconfig)
    yield server, api
    api.close()


def webhook(name: str, client_config: dict, rules: list | None = None, **extra) -> dict:
    return {"name": name, "clientConfig": client_config, "admissionReviewVersions": ["v1"],
            "sideEffects": "None", "timeoutSeconds": 5,
            "rules": rules or [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                "resources": ["configmaps"]}], **extra}


def register(api, kind: str, hooks: list[dict]) -> None:
    reg = client.AdmissionregistrationV1Api(api)
    body = {"metadata": {"name": f"test-{kind}"}, "webhooks": hooks}
    if kind == "mutating":
        reg.create_mutating_webhook_configuration(body)
    else:
        reg.create_validating_webhook_configuration(body)


def cm(name: str, labels: dict | None = None) -> client.V1ConfigMap:
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels=labels), data={"a": "b"})


def test_mutating_patch_applied_and_review_contents(cluster, hook):
    _, api = cluster
    hook.handlers["/mutate"] = lambda req: patch_response(
        [{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}])
    register(api, "mutating", [webhook("mutate.example.com", {"url": hook.url("/mutate"),
                                                              "caBundle": hook.ca_bundle})])
    made = client.CoreV1Api(api).create_namespaced_config_map("default", cm("m"))
    assert made.metadata.labels == {"mutated": "yes"}
    request = hook.reviews[-1]["request"]
    assert request["operation"] == "CREATE" and request["name"] == "m" and request["namespace"] == "default"
    assert request["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert request["userInfo"]["username"] == "admin" and request["uid"]
    assert request["object"]["data"] == {"a": "b"} and request["oldObject"] is None
    client.CoreV1Api(api).patch_namespaced_config_map("m", "default", {"data": {"a": "c"}})
    update = hook.reviews[-1]["request"]
    assert update["operation"] == "UPDATE" and update["oldObject"]["data"] == {"a": "b"}


def test_validating_denial_is_4xx_with_message(cluster, hook):
    _, api = cluster
    hook.handlers["/deny"] = lambda req: {"allowed": False, "status": {"code": 403, "message": "no configmaps today"}}
    register(api, "validating", [webhook("deny.example.com", {"url": hook.url("/deny"), "caBundle": hook.ca_bundle})])
    with pytest.raises(ApiException) as err:
        client.CoreV1Api(api).create_namespaced_config_map("default", cm("d"))
    assert err.value.status == 403
    assert status_of(err.value)["message"] == 'admission webhook "deny.example.com" denied the request: ' \
                                              "no configmaps today"


def test_object_selector_matches_old_or_new_and_identity_headers(cluster, hook):
    _, api = cluster
    register(api, "validating", [webhook("sel.example.com", {"url": hook.url("/sel"), "caBundle": hook.ca_bundle},
                                         objectSelector={"matchExpressions": [
                                             {"key": "shard", "operator": "DoesNotExist"}]})])
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map("default", cm("labelled", {"shard": "a"}))
    assert hook.reviews == []
    core.create_namespaced_config_map("default", cm("plain"))
    assert len(hook.reviews) == 1
    # Removing the label on update: the new object matches, so the webhook is called.
    core.patch_namespaced_config_map("labelled", "default", {"metadata": {"labels": {"shard": None}}})
    assert len(hook.reviews) == 2 and hook.reviews[-1]["request"]["oldObject"]["metadata"]["labels"] == {"shard": "a"}
    client.RbacAuthorizationV1Api(api).create_namespaced_role_binding("default", {
        "metadata": {"name": "alice-edit"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                        "name": "edit"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]})
    api.set_default_header("Impersonate-User", "alice")
    core.patch_namespaced_config_map("plain", "default", {"data": {"x": "y"}})
    assert hook.reviews[-1]["request"]["userInfo"]["username"] == "alice"


def test_namespace_selector_and_subresource_rules(cluster, hook):
    _, api = cluster
    core = client.CoreV1Api(api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="team-a", labels={"team": "a"})))
    register(api, "validating", [webhook("ns.example.com", {"url": hook.url("/ns"), "caBundle": hook.ca_bundle},
                                         rules=[{"operations": ["*"], "apiGroups": ["apps"], "apiVersions": ["*"],
                                                 "resources": ["deployments/status"]}],
                                         namespaceSelector={"matchLabels": {"team": "a"}})])
    from tests.integration.helpers import deployment
    apps = client.AppsV1Api(api)
    apps.create_namespaced_deployment("team-a", deployment("d"))
    assert hook.reviews == []  # main resource writes do not match a status-only rule
    apps.patch_namespaced_deployment_status("d", "team-a", {"status": {"replicas": 1}})
    assert hook.reviews[-1]["request"]["subResource"] == "status"
    apps.create_namespaced_deployment("default", deployment("d"))
    apps.patch_namespaced_deployment_status("d", "default", {"status": {"replicas": 1}})
    assert len(hook.reviews) == 1


def test_service_reference_resolved_by_endpoint_flag(cluster, hook):
    _, api = cluster
    hook.handlers["/svc"] = lambda req: {"allowed": False, "status": {"message": "via service"}}
    register(api, "validating", [webhook("svc.example.com", {"service": {"namespace": "webhooks", "name": "hooks",
                                                                         "path": "/svc"},
                                                             "caBundle": hook.ca_bundle})])
    with pytest.raises(ApiException) as err:
        client.CoreV1Api(api).create_namespaced_config_map("default", cm("s"))
    assert err.value.status == 400 and "via service" in status_of(err.value)["message"]


@pytest.mark.parametrize("policy,expect_error", [("Fail", True), ("Ignore", False)])
def test_untrusted_certificate_is_a_failed_call(cluster, hook, policy, expect_error):
    _, api = cluster
    other_ca = WebhookServer()
    try:
        register(api, "validating", [webhook("tls.example.com", {"url": hook.url("/tls"),
                                                                 "caBundle": other_ca.ca_bundle},
                                             failurePolicy=policy)])
        core = client.CoreV1Api(api)
        if expect_error:
            with pytest.raises(ApiException) as err:
                core.create_namespaced_config_map("default", cm("t"))
            assert err.value.status == 500
            assert 'failed calling webhook "tls.example.com"' in status_of(err.value)["message"]
        else:
            core.create_namespaced_config_map("default", cm("t"))
        assert hook.reviews == []
    finally:
        other_ca.stop()


def test_timeout_is_a_failed_call(cluster, hook):
    _, api = cluster

    def slow(req):
        time.sleep(2)
        return {"allowed": True}

    hook.handlers["/slow"] = slow
    register(api, "validating", [webhook("slow.example.com", {"url": hook.url("/slow"), "caBundle": hook.ca_bundle},
                                         timeoutSeconds=1)])
    started = time.monotonic()
    with pytest.raises(ApiException) as err:
        client.CoreV1Api(api).create_namespaced_config_map("default", cm("slow"))
    assert err.value.status == 500 and time.monotonic() - started < 1.9


def test_delete_reaches_webhook_with_old_object(cluster, hook):
    _, api = cluster
    register(api, "validating", [webhook("del.example.com", {"url": hook.url("/del"), "caBundle": hook.ca_bundle},
                                         rules=[{"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"],
                                                 "resources": ["configmaps"]}])])
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map("default", cm("gone"))
    core.delete_namespaced_config_map("gone", "default")
    request = hook.reviews[-1]["request"]
    assert request["operation"] == "DELETE" and request["object"] is None
    assert request["oldObject"]["metadata"]["name"] == "gone"


def test_match_conditions_decide_whether_the_webhook_is_called(cluster, hook):
    _, api = cluster
    core = client.CoreV1Api(api)
    conditions = [{"name": "data-changed", "expression": "oldObject == null || object.data != oldObject.data"},
                  {"name": "not-bob", "expression": "request.userInfo.username != 'bob'"}]
    register(api, "validating", [webhook("cond.example.com", {"url": hook.url("/cond"), "caBundle": hook.ca_bundle},
                                         matchConditions=conditions)])
    core.create_namespaced_config_map("default", cm("c"))
    assert len(hook.reviews) == 1
    core.patch_namespaced_config_map("c", "default", {"metadata": {"labels": {"x": "y"}}})
    assert len(hook.reviews) == 1  # data unchanged: every condition must hold for a call
    core.patch_namespaced_config_map("c", "default", {"data": {"a": "z"}})
    assert len(hook.reviews) == 2
    # A condition that cannot be evaluated fails the request (failurePolicy Fail), naming the condition.
    register(api, "mutating", [webhook("broken.example.com", {"url": hook.url("/b"), "caBundle": hook.ca_bundle},
                                       matchConditions=[{"name": "missing-key",
                                                         "expression": "object.data['nope'] == 'x'"}])])
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map("c", "default", {"data": {"a": "w"}})
    assert err.value.status == 500 and 'match condition "missing-key"' in status_of(err.value)["message"]


def test_a_review_reaches_the_webhook_in_one_tls_record(cluster, hook, tmp_path):
    """Head and body in one write: the webhook reads the whole review in one call (a TLS record at most)."""
    _, api = cluster
    (tmp_path / "tls.crt").write_bytes(hook.serving.cert_pem)
    (tmp_path / "tls.key").write_bytes(hook.serving.key_pem)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    listener = socket.create_server(("127.0.0.1", 0))
    first_reads: list[bytes] = []

    def serve_one() -> None:
        raw, _ = listener.accept()
        with context.wrap_socket(raw, server_side=True) as tls:
            time.sleep(0.3)  # all that the API server writes is here by now
            first = tls.recv(1 << 20)
            first_reads.append(first)
            head, _, body = first.partition(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            while len(body) < length:
                body += tls.recv(1 << 20)
            uid = json.loads(body)["request"]["uid"]
            answer = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                 "response": {"uid": uid, "allowed": True}}).encode()
            tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(answer), answer))

    thread = threading.Thread(target=serve_one, daemon=True)
    thread.start()
    try:
        register(api, "validating", [webhook("one.example.com", {
            "url": f"https://127.0.0.1:{listener.getsockname()[1]}/one", "caBundle": hook.ca_bundle})])
        client.CoreV1Api(api).create_namespaced_config_map("default", cm("one-record"))
        thread.join(10)
    finally:
        listener.close()
    head, _, body = first_reads[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST /one HTTP/1.1")
    assert json.loads(body)["request"]["name"] == "one-record"  # the whole review came with the head
