"""The master's webhook server process (gunicorn with the sticky thread worker): kept-alive connections are
served back to back, and one busy connection does not keep another waiting for the only thread."""

from __future__ import annotations

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

from velashard.sharding.proof import Signer
from velashard.webhook.certificates import make_ca, make_serving_cert
from velashard.webhook.paths import MUTATING_PATH


def review(name: str) -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "operation": "CREATE", "namespace": "default",
        "kind": {"group": "core.oam.dev", "version": "v1beta1", "kind": "Application"},
        "userInfo": {"username": "someone"},
        "object": {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
                   "metadata": {"name": name, "namespace": "default"}, "spec": {"components": []}}}}).encode()


@pytest.fixture
def webhook(make_apiserver, tmp_path: Path) -> Iterator[tuple[int, ssl.SSLContext]]:
    kubeconfig = str(tmp_path / "webhook.kubeconfig")
    make_apiserver().write_kubeconfig(kubeconfig)
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
                             "--schedulable-shards", "shard-0", "--threads", "1"],
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


def post(conn: http.client.HTTPSConnection, name: str) -> dict:
    conn.request("POST", MUTATING_PATH, review(name), {"Content-Type": "application/json"})
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
