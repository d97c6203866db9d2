"""The webhook's serving certificate: made once and shared by every master replica through a Secret, renewed by the
leader with the same CA, followed by every replica, and served by the running webhook server from the next
connection on; no admission call fails meanwhile, and the server is never restarted (issue 44, item 5)."""

from __future__ import annotations

import base64
import datetime
import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import uuid

from cryptography import x509

from tests.e2e.helpers import free_port, stop_processes
from tests.integration.helpers import eventually
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.resources import NAMESPACES, SECRETS
from velashard.webhook.certificates import KeyPair, make_serving_cert
from velashard.webhook.certstore import SharedCertificates
from velashard.webhook.paths import MUTATING_PATH

NS = "vela-system"


def review() -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "operation": "CREATE", "namespace": "team-a", "name": "a",
        "kind": {"group": "core.oam.dev", "version": "v1beta1", "kind": "Application"},
        "userInfo": {"username": "alice"},
        "object": {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
                   "metadata": {"name": "a", "namespace": "team-a"}, "spec": {"components": []}}}}).encode()


class Caller:
    """Admission calls back to back, each on a new connection (the handshake is where a certificate is read),
    verified against the CA: what failed, and the serials of the certificates served."""

    def __init__(self, port: int, ca_pem: bytes):
        self.port, self.failures, self.serials = port, [], []
        self.context = ssl.create_default_context(cadata=ca_pem.decode())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Caller":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=10)
            try:
                conn.request("POST", MUTATING_PATH, review(), {"Content-Type": "application/json"})
                response = conn.getresponse()
                answer = json.loads(response.read())
                if response.status != 200 or not answer["response"]["allowed"]:
                    self.failures.append(f"HTTP {response.status}: {answer}")
                der = conn.sock.getpeercert(binary_form=True)
                self.serials.append(x509.load_der_x509_certificate(der).serial_number)
            except (OSError, ValueError, KeyError) as err:
                self.failures.append(repr(err))
            finally:
                conn.close()


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def serial(pem: bytes) -> int:
    return x509.load_pem_x509_certificate(pem).serial_number


def test_shared_certificates_are_renewed_and_rotated_under_a_serving_webhook(make_apiserver, tmp_path):
    server = make_apiserver()
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test")
    try:
        kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    except errors.AlreadyExists:
        pass
    now = datetime.datetime.now(datetime.timezone.utc)

    def replica(name: str) -> SharedCertificates:
        return SharedCertificates(kube, NS, "velashard-webhook-certs", ["127.0.0.1", "localhost"],
                                  str(tmp_path / name), recheck=0.5)

    leader, standby = replica("leader"), replica("standby")
    for certs in (leader, standby):
        os.makedirs(tmp_path / ("leader" if certs is leader else "standby"))
        certs.follow()  # a standby never makes the Secret; both wait for it
    assert not standby.ready()
    assert leader.ensure(now) == "created"
    eventually(lambda: leader.ready() and standby.ready(), timeout=20)
    assert leader.ensure(now) == "unchanged"
    # Both replicas serve the same pair, and trust the same CA: the API server's one caBundle fits both.
    assert (tmp_path / "leader" / "tls.crt").read_bytes() == (tmp_path / "standby" / "tls.crt").read_bytes()
    assert leader.ca_pem() == standby.ca_pem() and leader.ca_pem() is not None
    first = serial((tmp_path / "standby" / "tls.crt").read_bytes())

    port = free_port()
    webhook = subprocess.Popen([sys.executable, "-m", "velashard.webhook.server", "--kubeconfig", server.kubeconfig,
                                "--bind", f"127.0.0.1:{port}", "--certfile", standby.cert_path,
                                "--keyfile", standby.key_path, "--namespace", NS, "--threads", "2"])
    try:
        eventually(lambda: listening(port), timeout=30)
        with Caller(port, standby.ca_pem()) as calls:
            eventually(lambda: first in calls.serials, timeout=30)
            # The leader renews a year on (30 days before expiry): same CA, a new pair; the standby follows.
            assert leader.ensure(now + datetime.timedelta(days=340)) == "renewed"
            secret = kube.get(SECRETS, "velashard-webhook-certs", NS)
            assert secret["type"] == "kubernetes.io/tls" and set(secret["data"]) == {"ca.crt", "ca.key", "tls.crt",
                                                                                     "tls.key"}
            renewed = serial(base64.b64decode(secret["data"]["tls.crt"]))
            assert renewed != first
            second = eventually(lambda: serial((tmp_path / "leader" / "tls.crt").read_bytes()) == renewed and renewed)
            eventually(lambda: second in calls.serials, timeout=30)
            assert standby.ca_pem() == leader.ca_pem()  # the CA did not change: caBundle stays valid
            # Someone else's writer, replacing the files in place one after the other (certificate first): the
            # old pair serves until both are new.
            standby.stop()  # it would put the Secret's pair back
            ca = KeyPair(base64.b64decode(secret["data"]["ca.crt"]), base64.b64decode(secret["data"]["ca.key"]))
            third = make_serving_cert(ca, ["127.0.0.1"])
            for path, data in ((standby.cert_path, third.cert_pem), (standby.key_path, third.key_pem)):
                with open(path, "wb") as fh:
                    fh.write(data[:100])
                    fh.flush()
                    threading.Event().wait(0.2)
                    fh.write(data[100:])
            eventually(lambda: serial(third.cert_pem) in calls.serials, timeout=30)
            count = len(calls.serials)
            eventually(lambda: len(calls.serials) > count + 20, timeout=30)
        assert calls.failures == [], calls.failures[:5]
        assert webhook.poll() is None  # the same server process throughout: nothing restarted it
    finally:
        stop_processes([webhook])
        leader.stop()
        standby.stop()
