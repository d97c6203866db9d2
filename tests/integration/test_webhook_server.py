"""The master's webhook server process (gunicorn with the sticky thread worker): kept-alive connections are
served back to back, one busy connection does not keep another waiting for the only thread, and a namespace's
pin is followed as it changes."""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from velashard.apis.labels import SCHEDULED_SHARD_ID, SHARD_ID
from velashard.kube.client import KubeClient
from velashard.kube.resources import NAMESPACES
from velashard.sharding.proof import Signer
from velashard.webhook.certificates import make_ca, make_serving_cert
from velashard.webhook.paths import MUTATING_PATH


def review(name: str, namespace: str = "default") -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "operation": "CREATE", "namespace": namespace,
        "kind": {"group": "core.oam.dev", "version": "v1beta1", "kind": "Application"},
        "userInfo": {"username": "someone"},
        "object": {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
                   "metadata": {"name": name, "namespace": namespace}, "spec": {"components": []}}}}).encode()


@pytest.fixture
def apiserver(make_apiserver):
    return make_apiserver()


@pytest.fixture
def webhook(apiserver, tmp_path: Path) -> Iterator[tuple[int, ssl.SSLContext]]:
    kubeconfig = str(tmp_path / "webhook.kubeconfig")
    apiserver.write_kubeconfig(kubeconfig)
    ca = make_ca()
    serving = make_serving_cert(ca, ["127.0.0.1"])
    (tmp_path / "tls.crt").write_bytes(serving.cert_pem)
    (tmp_path / "tls.key").write_bytes(serving.key_pem)
    (tmp_path / "signing.key").write_bytes(Signer.generate().private_pem())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "velashard.webhook.server", "--kubeconfig", kubeconfig,
                             "--bind", f"127.0.0.1:{port}", "--certfile", str(tmp_path / "tls.crt"),
                             "--keyfile", str(tmp_path / "tls.key"), "--signing-key-file",
                             str(tmp_path / "signing.key"), "--namespace", "vela-system",
                             "--schedulable-shards", "shard-0,shard-1", "--threads", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    context = ssl.create_default_context(cadata=ca.cert_pem.decode())
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the webhook server did not start"
            time.sleep(0.2)
        yield port, context
    finally:
        proc.terminate()
        proc.wait(15)


def post(conn: http.client.HTTPSConnection, name: str, namespace: str = "default") -> dict:
    conn.request("POST", MUTATING_PATH, review(name, namespace), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200 and not resp.will_close
    return json.loads(resp.read())["response"]


def test_kept_alive_connections_share_the_only_thread(webhook):
    port, context = webhook
    first = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
    second = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
    assert post(first, "a")["allowed"]
    assert post(first, "b")["allowed"]  # the same connection, served again by the thread that waits on it
    started = time.monotonic()
    assert post(second, "c")["allowed"]  # the thread lets go of the first connection for it
    assert time.monotonic() - started < 2.0
    assert post(first, "d")["allowed"]  # and the first is kept alive meanwhile


def test_a_response_comes_in_one_tls_record(webhook):
    """Head and body in one write: the API server reads an admission answer in one call (one TLS record)."""
    port, context = webhook
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        body = review("one")
        tls.sendall(f"POST {MUTATING_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        time.sleep(0.5)  # all that the server writes is here by now
        first = tls.recv(1 << 20)  # one TLS record at most
        head, _, rest = first.partition(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        assert head.startswith(b"HTTP/1.1 200") and len(rest) == length
        assert json.loads(rest)["response"]["allowed"]


def assigned_shard(response: dict) -> str | None:
    ops = json.loads(base64.b64decode(response["patch"]))
    labels = [op["value"] for op in ops if op["path"] == f"/metadata/labels/{SCHEDULED_SHARD_ID.replace('/', '~1')}"]
    labels += [op["value"].get(SCHEDULED_SHARD_ID) for op in ops if op["path"] == "/metadata/labels"]
    return next((label for label in labels if label), None)


def test_a_namespace_pin_is_followed_as_it_changes(webhook, apiserver, tmp_path):
    """Pins come from an informer of pinned namespaces: a pin set while the webhook runs holds for the next
    apps within moments (a cached read of the namespace would hold the old answer for its whole lifetime)."""
    port, context = webhook
    kube = KubeClient.from_kubeconfig(str(tmp_path / "webhook.kubeconfig"), shard_id="test")
    kube.create(NAMESPACES, {"metadata": {"name": "tenant"}})
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
    assert {assigned_shard(post(conn, f"before-{i}", "tenant")) for i in range(4)} == {"shard-0", "shard-1"}
    namespace = kube.get(NAMESPACES, "tenant")
    namespace["metadata"]["labels"] = {SHARD_ID: "shard-1"}
    kube.update(NAMESPACES, namespace)
    deadline = time.monotonic() + 5
    while assigned_shard(post(conn, f"after-{time.monotonic()}", "tenant")) != "shard-1":
        assert time.monotonic() < deadline, "the pin did not hold within 5 s"
        time.sleep(0.1)
    assert {assigned_shard(post(conn, f"pinned-{i}", "tenant")) for i in range(4)} == {"shard-1"}
    namespace = kube.get(NAMESPACES, "tenant")
    namespace["metadata"]["labels"] = {}
    kube.update(NAMESPACES, namespace)  # unpinned: the namespace leaves the informer's cache
    deadline = time.monotonic() + 5
    while {assigned_shard(post(conn, f"unpinned-{time.monotonic()}-{i}", "tenant")) for i in range(2)} != {
            "shard-0", "shard-1"}:
        assert time.monotonic() < deadline, "the pin outlived its label by 5 s"
        time.sleep(0.1)
