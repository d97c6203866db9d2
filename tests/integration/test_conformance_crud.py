"""Object metadata, CRUD and error semantics, through the official client."""

from __future__ import annotations

import email.utils
import json
import socket
import ssl
import time

import pytest
from kubernetes import client, utils
from kubernetes.client.exceptions import ApiException

from velashard.apiserver.registry import rest
from tests.integration.helpers import deployment, raw_request, status_of


def cm(name: str = "", labels: dict | None = None, data: dict | None = None, **meta) -> client.V1ConfigMap:
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name or None, labels=labels, **meta),
                              data=data or {"k": "v"})


def test_create_fills_metadata_and_rv_is_global_and_monotonic(api_client, namespace):
    core = client.CoreV1Api(api_client)
    a = core.create_namespaced_config_map(namespace, cm("a"))
    b = core.create_namespaced_config_map(namespace, cm("b"))
    assert a.metadata.uid and b.metadata.uid and a.metadata.uid != b.metadata.uid
    assert a.metadata.creation_timestamp is not None
    assert a.metadata.generation == 1
    assert int(b.metadata.resource_version) > int(a.metadata.resource_version)
    listed = core.list_namespaced_config_map(namespace)
    assert int(listed.metadata.resource_version) >= int(b.metadata.resource_version)


def test_generate_name(api_client, namespace):
    core = client.CoreV1Api(api_client)
    made = core.create_namespaced_config_map(namespace, cm(generate_name="gen-"))
    assert made.metadata.name.startswith("gen-") and len(made.metadata.name) == len("gen-") + 5


def test_generated_name_that_is_taken_is_generated_again(api_client, namespace, monkeypatch):
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(namespace, cm("gen-taken"))
    names = iter(["gen-taken", "gen-taken", "gen-fresh"])
    monkeypatch.setattr(rest, "_generated_name", lambda prefix: next(names))  # collisions, injected
    made = core.create_namespaced_config_map(namespace, cm(generate_name="gen-"))
    assert made.metadata.name == "gen-fresh"
    assert core.read_namespaced_config_map("gen-taken", namespace).metadata.generate_name is None

    monkeypatch.setattr(rest, "_generated_name", lambda prefix: "gen-taken")  # every try taken: 409 at the end
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(namespace, cm(generate_name="gen-"))
    assert err.value.status == 409 and status_of(err.value)["reason"] == "AlreadyExists"


def test_get_missing_is_404_status(api_client, namespace):
    with pytest.raises(ApiException) as err:
        client.CoreV1Api(api_client).read_namespaced_config_map("nope", namespace)
    assert err.value.status == 404
    body = status_of(err.value)
    assert body["kind"] == "Status" and body["reason"] == "NotFound"
    assert body["message"] == 'configmaps "nope" not found'


def test_create_twice_is_409_already_exists(api_client, namespace):
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(namespace, cm("dup"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(namespace, cm("dup"))
    assert err.value.status == 409 and status_of(err.value)["reason"] == "AlreadyExists"


def _service(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"ports": [{"port": 99, "protocol": "TCP", "targetPort": 9949}], "selector": {"app": name}}}


def _already_exists(resource: str, name: str, group: str = "") -> str:
    """The text the official client's FailToCreateError prints for one 409, byte for byte as kube-apiserver's."""
    qualified = f"{resource}.{group}" if group else resource
    details = f'"name":"{name}",' + (f'"group":"{group}",' if group else "") + f'"kind":"{resource}"'
    return ('Error from server (Conflict): {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
            f'"message":"{qualified} \\"{name}\\" already exists","reason":"AlreadyExists",'
            f'"details":{{{details}}},"code":409}}\n')


def test_create_from_yaml_fails_each_conflicting_object_and_creates_the_others(api_client, namespace):
    """The official client's e2e tests of multi-document YAML with conflicts compare the Status bodies as text."""
    utils.create_from_yaml(api_client, yaml_objects=[_service("mock")], namespace=namespace)
    controller = {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "mock"},
                  "spec": {"replicas": 1, "selector": {"app": "mock"}, "template": {
                      "metadata": {"labels": {"app": "mock"}},
                      "spec": {"containers": [{"name": "c", "image": "k8s.gcr.io/pause:2.0"}]}}}}
    with pytest.raises(utils.FailToCreateError) as err:
        utils.create_from_yaml(api_client, yaml_objects=[_service("mock"), controller], namespace=namespace)
    assert str(err.value) == _already_exists("services", "mock")
    assert client.CoreV1Api(api_client).read_namespaced_replication_controller("mock", namespace).metadata.name

    triple = {"apiVersion": "apps/v1", "kind": "Deployment",
              **client.ApiClient().sanitize_for_serialization(deployment("triple"))}
    with pytest.raises(utils.FailToCreateError) as err:
        utils.create_from_yaml(api_client, yaml_objects=[triple, triple, triple], namespace=namespace)
    assert str(err.value) == 2 * _already_exists("deployments", "triple", "apps")
    assert client.AppsV1Api(api_client).read_namespaced_deployment("triple", namespace).metadata.name == "triple"


def test_create_in_missing_namespace_is_404(api_client):
    with pytest.raises(ApiException) as err:
        client.CoreV1Api(api_client).create_namespaced_config_map("no-such-ns", cm("x"))
    assert err.value.status == 404
    assert status_of(err.value)["message"] == 'namespaces "no-such-ns" not found'


@pytest.mark.parametrize("name,labels", [
    ("Bad_Name", None),
    ("ok", {"bad key!": "v"}),
    ("ok", {"key": "bad value!"}),
    ("ok", {"k": "x" * 64}),
])
def test_invalid_metadata_is_422_with_field(api_client, namespace, name, labels):
    with pytest.raises(ApiException) as err:
        client.CoreV1Api(api_client).create_namespaced_config_map(namespace, cm(name, labels))
    assert err.value.status == 422
    body = status_of(err.value)
    assert body["reason"] == "Invalid"
    field = body["details"]["causes"][0]["field"]
    assert field == ("metadata.name" if labels is None else "metadata.labels")


def test_update_with_stale_rv_conflicts_and_without_rv_succeeds(api_client, namespace):
    core = client.CoreV1Api(api_client)
    made = core.create_namespaced_config_map(namespace, cm("u"))
    first = core.replace_namespaced_config_map("u", namespace, cm("u", data={"k": "1"},
                                                                   resource_version=made.metadata.resource_version))
    assert first.data == {"k": "1"}
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map("u", namespace, cm("u", data={"k": "2"},
                                                              resource_version=made.metadata.resource_version))
    assert err.value.status == 409 and status_of(err.value)["reason"] == "Conflict"
    unconditional = core.replace_namespaced_config_map("u", namespace, cm("u", data={"k": "3"}))
    assert unconditional.data == {"k": "3"}
    assert unconditional.metadata.uid == made.metadata.uid


def test_name_mismatch_and_malformed_body_are_400(api_client, namespace):
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(namespace, cm("n1"))
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map("n1", namespace, cm("other"))
    assert err.value.status == 400 and status_of(err.value)["reason"] == "BadRequest"
    code, body = raw_request(api_client, "POST", f"/api/v1/namespaces/{namespace}/configmaps", "{not json")
    assert code == 400 and body["reason"] == "BadRequest" and "decoding" in body["message"]


def test_method_not_allowed_is_405(api_client, namespace):
    code, body = raw_request(api_client, "PUT", f"/api/v1/namespaces/{namespace}/configmaps", "{}")
    assert code == 405 and body["reason"] == "MethodNotAllowed"


def test_generation_bumps_only_on_spec_changes(api_client, namespace):
    apps = client.AppsV1Api(api_client)
    dep = apps.create_namespaced_deployment(namespace, deployment("g"))
    assert dep.metadata.generation == 1
    labelled = apps.patch_namespaced_deployment("g", namespace, {"metadata": {"labels": {"x": "y"}}})
    assert labelled.metadata.generation == 1
    scaled = apps.patch_namespaced_deployment("g", namespace, {"spec": {"replicas": 3}})
    assert scaled.metadata.generation == 2


def test_noop_update_writes_nothing(api_client, namespace):
    core = client.CoreV1Api(api_client)
    made = core.create_namespaced_config_map(namespace, cm("same"))
    again = core.patch_namespaced_config_map("same", namespace, {"data": {"k": "v"}})
    assert again.metadata.resource_version == made.metadata.resource_version


def test_dry_run_stores_nothing(api_client, namespace):
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(namespace, cm("dry"), dry_run="All")
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("dry", namespace)
    assert err.value.status == 404


def test_secret_string_data_and_service_cluster_ip(api_client, namespace):
    core = client.CoreV1Api(api_client)
    secret = core.create_namespaced_secret(namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name="s"), string_data={"password": "hunter2"}))
    assert secret.data == {"password": "aHVudGVyMg=="} and secret.type == "Opaque"
    svc = core.create_namespaced_service(namespace, client.V1Service(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1ServiceSpec(selector={"app": "web"}, ports=[client.V1ServicePort(port=80)])))
    assert svc.spec.cluster_ip.startswith("10.")
    assert svc.spec.ports[0].target_port == 80 and svc.spec.ports[0].protocol == "TCP"
    # A client that omits the allocated IP on update keeps it.
    body = core.read_namespaced_service("web", namespace)
    body.spec.cluster_ip = None
    body.spec.cluster_ips = None
    assert core.replace_namespaced_service("web", namespace, body).spec.cluster_ip == svc.spec.cluster_ip


def test_deployment_validation(api_client, namespace):
    bad = deployment("bad")
    bad.spec.selector = client.V1LabelSelector(match_labels={"app": "other"})
    with pytest.raises(ApiException) as err:
        client.AppsV1Api(api_client).create_namespaced_deployment(namespace, bad)
    assert err.value.status == 422
    assert status_of(err.value)["details"]["causes"][0]["field"] == "spec.template.metadata.labels"




def test_an_answer_comes_in_one_tls_record(apiserver, api_client, namespace):
    """Head and body in one write: a client reads an answer in one call (a TLS record at most)."""
    client.CoreV1Api(api_client).create_namespaced_config_map(namespace, cm("one-record"))
    context = ssl.create_default_context(cadata=apiserver.ca.cert_pem.decode())
    with socket.create_connection((apiserver.host, apiserver.port)) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.sendall(f"GET /api/v1/namespaces/{namespace}/configmaps/one-record HTTP/1.1\r\nHost: x\r\n"
                    f"Authorization: Bearer {apiserver.admin_token}\r\n\r\n".encode())
        time.sleep(0.3)  # all the server writes is here by now
        head, _, body = tls.recv(1 << 20).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert json.loads(body)["metadata"]["name"] == "one-record"
    date = next(line.split(b": ", 1)[1] for line in head.split(b"\r\n") if line.lower().startswith(b"date:"))
    assert abs(email.utils.parsedate_to_datetime(date.decode()).timestamp() - time.time()) < 5


def _raw_exchange(apiserver, data: bytes) -> bytes:
    """What the server answers before it closes the connection (each of these requests closes it)."""
    answer = b""
    with socket.create_connection((apiserver.host, apiserver.port)) as sock:
        sock.settimeout(5)
        try:
            sock.sendall(data)
            while chunk := sock.recv(1 << 16):
                answer += chunk
        except ConnectionResetError:  # the server closed with part of a long request unread
            pass
    return answer


@pytest.mark.parametrize("head,status", ids=["version", "http2", "words", "http09-post", "long-line", "many"], argvalues=[
    (b"GET /version HTTP/1.x\r\n\r\n", b"400"),
    (b"GET /version HTTP/2.0\r\n\r\n", b"505"),
    (b"GET /version extra HTTP/1.1\r\n\r\n", b"400"),
    (b"POST /version\r\n\r\n", b"400"),                            # HTTP/0.9 knows only GET
    (b"GET /version HTTP/1.1\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n", b"431"),
    (b"GET /version HTTP/1.1\r\n" + b"X-Many: a\r\n" * 101 + b"\r\n", b"431"),
])
def test_a_malformed_request_head_is_refused_with_its_status(apiserver, head, status):
    # As http.server answers: without a status line where the request line gave no usable version (HTTP/0.9).
    assert b"<p>Error code: " + status + b"</p>" in _raw_exchange(apiserver, head)


def test_expect_100_continue_and_connection_headers(apiserver):
    body = b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"continued"}}'
    with socket.create_connection((apiserver.host, apiserver.port)) as sock:
        sock.settimeout(5)
        sock.sendall(b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     b"application/json\r\nAuthorization: Bearer " + apiserver.admin_token.encode() +
                     b"\r\nExpect: 100-continue\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body))
        assert sock.recv(1 << 16).startswith(b"HTTP/1.1 100 Continue")
        sock.sendall(body)
        answer = b""
        while chunk := sock.recv(1 << 16):  # Connection: close: the server closes after its answer
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 201") and b"Connection: close" in answer
