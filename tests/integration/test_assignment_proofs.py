"""The owning shard checks its apps' proofs against the embedded API server: a proven app runs (and its
re-syncs cost no request), an app whose proof is missing or made for another app or shard is handed back
unrun with an Event, and apps wait for the master's key rather than being handed back without it."""

from __future__ import annotations

import threading
import time

import pytest

from velashard.apis import labels
from velashard.apis.oam import APPLICATION_REVISIONS, APPLICATIONS
from velashard.apiserver.http.server import APIServer
from velashard.core.controller import ApplicationController, Options
from velashard.core.events import EVENTS
from velashard.core.install import install
from velashard.kube.client import KubeClient
from velashard.kube.manager import Manager
from velashard.kube.resources import NAMESPACES
from velashard.sharding.keys import SigningKey, load_or_create_signing_key, publish_verifying_key
from velashard.sharding.proof import Signer
from tests.integration.helpers import eventually, trust_authorless_apps

SHARD = "s1"
NS = "proofs"
KEYS_NS = "vela-system"


def run_shard(server: APIServer, shard: str, key_namespace: str, stops: list) -> ApplicationController:
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id=shard, qps=500, burst=500)
    trust_authorless_apps(kube)
    manager = Manager(kube, shard)
    controller = ApplicationController(manager, Options(
        workers=2, resync_period=600, shard_selector=f"{labels.SCHEDULED_SHARD_ID}={shard}",
        assignment_key_namespace=key_namespace))
    stop = threading.Event()
    thread = threading.Thread(target=manager.run, args=(stop,), daemon=True)
    thread.start()
    stops.append((stop, thread))
    return controller


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    server = APIServer(port=0, simulate_workloads=True).start()
    server.write_kubeconfig(str(tmp_path_factory.mktemp("proofs") / "kubeconfig"))
    setup = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test", qps=500, burst=500)
    install(setup)
    setup.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    signer = SigningKey(setup, KEYS_NS).load()  # as the master does once it leads
    stops: list = []
    controller = run_shard(server, SHARD, KEYS_NS, stops)
    yield server, setup, signer, controller, stops
    for stop, thread in stops:
        stop.set()
        thread.join(15)
    server.stop()


def create_app(kube: KubeClient, name: str, shard: str, proof: str | None) -> dict:
    meta: dict = {"name": name, "namespace": NS, "labels": {labels.SCHEDULED_SHARD_ID: shard}}
    if proof is not None:
        meta["annotations"] = {labels.ASSIGNMENT_PROOF: proof}
    return kube.create(APPLICATIONS, {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": meta,
                                      "spec": {"components": [{"name": name, "type": "worker",
                                                               "properties": {"image": "busybox"}}]}})


def running(kube: KubeClient, name: str) -> bool:
    return (kube.get(APPLICATIONS, name, NS).get("status") or {}).get("status") == "running"


def shard_requests(server: APIServer, since: int, shard: str = SHARD) -> list[dict]:
    return [r for r in server.audit.since(since)["items"] if f"shard={shard})" in r.get("userAgent", "")]


def test_a_proven_app_runs_and_its_resyncs_cost_nothing(cluster):
    server, kube, signer, controller, _ = cluster
    create_app(kube, "proven", SHARD, signer.sign(NS, "proven", SHARD))
    eventually(lambda: running(kube, "proven"), timeout=30)
    since = server.audit.since(0)["lastSeq"]
    for _ in range(3):  # as periodic re-syncs do
        controller.reconcile(f"{NS}/proven")
    assert [(r["verb"], r["resource"]) for r in shard_requests(server, since)
            if r["verb"] not in ("watch", "list")] == []


@pytest.mark.parametrize("name,proof,reason", [
    ("no-proof", None, "no proof"),
    ("copied", "other-app", "an invalid proof"),  # a valid proof, of another app
    ("other-shard", "other-shard", "an invalid proof"),  # a valid proof, for this app on another shard
    ("garbage", "not-a-signature", "an invalid proof")])
def test_an_unproven_app_is_handed_back_unrun_with_an_event(cluster, name, proof, reason):
    server, kube, signer, _, _ = cluster
    proofs = {"other-app": signer.sign(NS, "proven", SHARD), "other-shard": signer.sign(NS, name, "s2")}
    since = server.audit.since(0)["lastSeq"]
    create_app(kube, name, SHARD, proofs.get(proof, proof))

    def handed_back() -> dict | None:
        got = kube.get(APPLICATIONS, name, NS)
        return got if labels.SCHEDULED_SHARD_ID not in (got["metadata"].get("labels") or {}) else None

    app = eventually(handed_back, timeout=20)
    assert labels.ASSIGNMENT_PROOF not in (app["metadata"].get("annotations") or {})
    assert not app["metadata"].get("finalizers") and not app.get("status")  # never run here
    assert kube.list(APPLICATION_REVISIONS, NS, label_selector=f"{labels.APP_NAME}={name}")["items"] == []
    events = eventually(lambda: [e for e in kube.list(EVENTS, NS)["items"]
                                 if e["involvedObject"]["name"] == name], timeout=10)
    assert events[0]["reason"] == "UnprovenShardAssignment" and events[0]["type"] == "Warning"
    assert f"shard {SHARD} has {reason}" in events[0]["message"]
    # Its only writes: the hand-back and the Event (audited once answered: allow it a moment).
    def writes() -> list[tuple[str, str]]:
        return sorted((r["verb"], r["resource"]) for r in shard_requests(server, since)
                      if r["verb"] not in ("get", "list", "watch"))
    expected = [("create", "events"), ("patch", "applications")]
    eventually(lambda: writes() == expected, timeout=5)
    time.sleep(0.5)
    assert writes() == expected  # and nothing more


def test_without_the_masters_key_apps_wait_rather_than_being_handed_back(cluster, tmp_path):
    server, kube, _, _, stops = cluster
    late_keys = "late-keys"
    kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": late_keys}})
    signer: Signer = load_or_create_signing_key(kube, late_keys)  # made, but its public half not published yet
    late = run_shard(server, "s3", late_keys, stops)
    create_app(kube, "waits", "s3", signer.sign(NS, "waits", "s3"))
    create_app(kube, "forged-waits", "s3", None)
    eventually(lambda: len(late.apps.store) == 2 and len(late.controller.queue) == 0, timeout=10)  # looked at
    time.sleep(0.5)
    for name in ("waits", "forged-waits"):
        app = kube.get(APPLICATIONS, name, NS)
        assert app["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] == "s3" and not app.get("status")
    publish_verifying_key(kube, late_keys, signer)
    eventually(lambda: running(kube, "waits"), timeout=30)
    eventually(lambda: labels.SCHEDULED_SHARD_ID not in kube.get(APPLICATIONS, "forged-waits", NS)["metadata"]
               .get("labels", {}), timeout=20)


def test_an_event_that_cannot_be_recorded_yet_holds_the_hand_back_until_it_is(cluster, monkeypatch):
    """The Event is the only trace a user sees of a forged assignment, and once handed back the app leaves the
    shard's cache: the shard records it first, and a failure that may pass (here two 500s) fails the reconcile
    with the app still its own, so nothing is handed back without its Event."""
    from velashard.apiserver import errors as api_errors

    server, kube, _, _, _ = cluster
    real_create = server.api.create
    failures = [2]

    def create(rt, namespace, body, req):
        if rt.plural == "events" and namespace == NS and failures[0] > 0:
            failures[0] -= 1
            raise api_errors.internal("injected: the event store is unavailable")
        return real_create(rt, namespace, body, req)

    monkeypatch.setattr(server.api, "create", create)  # failure injection
    since = server.audit.since(0)["lastSeq"]
    create_app(kube, "late-event", SHARD, None)
    eventually(lambda: labels.SCHEDULED_SHARD_ID not in (kube.get(APPLICATIONS, "late-event", NS)["metadata"]
                                                         .get("labels") or {}), timeout=30)
    events = [e for e in kube.list(EVENTS, NS)["items"] if e["involvedObject"]["name"] == "late-event"]
    assert [e["reason"] for e in events] == ["UnprovenShardAssignment"]
    sent = [(r["verb"], r["resource"], r["code"]) for r in shard_requests(server, since)
            if r["verb"] in ("create", "patch")]
    assert sent == [("create", "events", 500), ("create", "events", 500), ("create", "events", 201),
                    ("patch", "applications", 200)], sent
