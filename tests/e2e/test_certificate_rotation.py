"""Serving certificates rotate under running webhooks, without a restart (issue 44, item 5).

`velashard dev` installs the chart as a cert-manager user does (`webhook.certificate.secretName`: the Secret is
mounted into both master replicas and served from where it is mounted). The test plays cert-manager: it makes
the Secret, then renews the serving certificate in it three times while apps are created through the API server
and admission calls are made straight to each replica on new connections. The local kubelet projects each new
version into the pods' volumes as a kubelet does. No call fails (the API server's audit log names none that
failed open; the direct callers saw no failure), every app gets its author, each replica serves the newest
certificate, and the webhook servers were never restarted (the same processes). A new CA then reaches the
webhook configurations, with the CA it replaced, while the old one is still served.
"""

from __future__ import annotations

import base64
import threading

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from tests.e2e.helpers import RUNTIME_NS, Dev
from tests.integration.helpers import AdmissionCaller, eventually, serial
from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.resources import MUTATING_WEBHOOKS, NAMESPACES, SECRETS
from velashard.webhook.certificates import make_ca, make_serving_cert

pytest.importorskip("helm_python", reason="helm-python-sdk is installed by the test extra")

SECRET = "velashard-webhook-tls"
HOSTS = ["velashard.vela-system.svc", "velashard.vela-system.svc.cluster.local", "127.0.0.1"]


def certificate_secret(ca, serving) -> dict:
    """What a cert-manager Certificate with a CA issuer writes."""
    data = {"ca.crt": ca.cert_pem, "tls.crt": serving.cert_pem, "tls.key": serving.key_pem}
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": SECRET, "namespace": RUNTIME_NS},
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()}}


def renew(kube: KubeClient, ca, serving) -> None:
    current = kube.get(SECRETS, SECRET, RUNTIME_NS)
    body = certificate_secret(ca, serving)
    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    kube.update(SECRETS, body)


def webhook_server(master_pid: int) -> set[int]:
    """The master process's children: its webhook server (gunicorn's arbiter)."""
    with open(f"/proc/{master_pid}/task/{master_pid}/children") as fh:
        return {int(pid) for pid in fh.read().split()}


def registered_cas(kube: KubeClient) -> set[bytes]:
    hook = kube.get(MUTATING_WEBHOOKS, "velashard-mutating")["webhooks"][0]
    return {c.public_bytes(serialization.Encoding.PEM)
            for c in x509.load_pem_x509_certificates(base64.b64decode(hook["clientConfig"]["caBundle"]))}


def test_a_certificate_secret_renewed_while_apps_are_admitted(tmp_path):
    ca = make_ca()
    cluster = Dev(tmp_path / "dev", "--shards", "1", "--set", "replicaCount=2",
                  "--set", f"webhook.certificate.secretName={SECRET}")
    try:
        # The masters wait for the Secret, as pods wait for a Certificate's: made once the chart made the namespace.
        kubeconfig = tmp_path / "dev" / "kubeconfig"
        eventually(lambda: kubeconfig.exists(), timeout=120, interval=0.2)
        admin = KubeClient.from_kubeconfig(str(kubeconfig), shard_id="test")

        def namespace_made() -> bool:
            try:
                return bool(admin.get(NAMESPACES, RUNTIME_NS))
            except errors.NotFound:
                return False

        eventually(namespace_made, timeout=120, interval=0.2)
        admin.create(SECRETS, certificate_secret(ca, make_serving_cert(ca, HOSTS)))
        kube = cluster.wait_started()
        eventually(lambda: len(cluster.masters()) == 2, timeout=120, interval=0.5)
        assert registered_cas(kube) == {ca.cert_pem}
        ports = [p["ports"]["webhook"] for p in cluster.masters()]
        servers = [webhook_server(p["pid"]) for p in cluster.masters()]
        created: list[str] = []
        stop = threading.Event()

        def create_apps() -> None:
            while not stop.is_set():
                name = f"rotate-{len(created)}"
                kube.create(APPLICATIONS, {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
                                           "metadata": {"name": name, "namespace": "default"},
                                           "spec": {"components": [{"name": name, "type": "worker",
                                                                    "properties": {"image": "busybox"}}]}})
                created.append(name)
                stop.wait(0.05)

        since = kube.request("get", "GET", "/debug/audit", query={"since": "0"})["lastSeq"]
        writer = threading.Thread(target=create_apps, daemon=True)
        with AdmissionCaller(ports[0], ca.cert_pem) as first, AdmissionCaller(ports[1], ca.cert_pem) as second:
            writer.start()
            newest = None
            for _ in range(3):
                eventually(lambda: len(first.serials) > 5 and len(second.serials) > 5, timeout=30)
                newest = make_serving_cert(ca, HOSTS)
                renew(kube, ca, newest)
                # Each replica serves it from its next connection on.
                eventually(lambda: first.serials[-1] == serial(newest.cert_pem) and
                           second.serials[-1] == serial(newest.cert_pem), timeout=60, interval=0.1)
                first.serials.clear()
                second.serials.clear()
            stop.set()
            writer.join(30)
        assert first.failures == [] and second.failures == [], (first.failures[:3], second.failures[:3])
        records = [r for r in kube.request("get", "GET", "/debug/audit", query={"since": str(since)})["items"]
                   if r["resource"] == "applications" and r["verb"] == "create"]
        assert len(records) == len(created) >= 10
        assert not [r for r in records if any(k.startswith("failed-open.") for k in r.get("annotations") or {})]
        apps = {a["metadata"]["name"]: a for a in kube.list(APPLICATIONS, "default")["items"]}
        assert all((apps[n]["metadata"].get("annotations") or {}).get(labels.APP_USERNAME) == "admin"
                   for n in created)
        assert [webhook_server(p["pid"]) for p in cluster.masters()] == servers  # the same server processes
        # A new CA: the leader puts it into the webhook configurations, beside the one it replaced.
        new_ca = make_ca(common_name="rotated-ca")
        renew(kube, new_ca, make_serving_cert(new_ca, HOSTS))
        eventually(lambda: registered_cas(kube) == {ca.cert_pem, new_ca.cert_pem}, timeout=60, interval=0.5)
    finally:
        out = cluster.stop()
    assert cluster.proc.returncode == 0, out
