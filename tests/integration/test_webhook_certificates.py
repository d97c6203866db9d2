"""The webhook's serving certificate: made once and shared by every master replica through a Secret, renewed by the
leader with the same CA, followed by every replica, and served by the running webhook server from the next
connection on; no admission call fails meanwhile, and the server is never restarted (issue 44, item 5)."""

from __future__ import annotations

import base64
import datetime
import os
import subprocess
import sys
import threading

from tests.e2e.helpers import free_port, stop_processes
from tests.integration.helpers import AdmissionCaller, eventually, listening, serial
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.resources import NAMESPACES, SECRETS
from velashard.webhook.certificates import KeyPair, make_serving_cert
from velashard.webhook.certstore import SharedCertificates

NS = "vela-system"


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
        with AdmissionCaller(port, standby.ca_pem()) as calls:
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
