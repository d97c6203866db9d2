"""Managed resources carry their app's shard label, are cached by it, and their changes wake the app at once;
a periodic re-sync of a settled app costs no request."""

from __future__ import annotations

import threading
import time

import pytest

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.apiserver.http.server import APIServer
from velashard.core import render_cache
from velashard.core.controller import ApplicationController, Options
from velashard.core.install import install
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.manager import Manager
from velashard.kube.resources import CONFIGMAPS, DEPLOYMENTS, NAMESPACES
from velashard.sharding.move import set_shard
from velashard.sharding.proof import Signer
from tests.integration.helpers import eventually, trust_authorless_apps

SHARD = "s1"
SIGNER = Signer.generate()  # the shard here checks no proof (no assignment_key_namespace)
NS = "managed"


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    server = APIServer(port=0, simulate_workloads=True).start()
    server.write_kubeconfig(str(tmp_path_factory.mktemp("managed") / "kubeconfig"))
    setup = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test", qps=500, burst=500)
    install(setup)
    setup.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id=SHARD, qps=500, burst=500)
    trust_authorless_apps(kube)
    manager = Manager(kube, SHARD)
    # Polling intervals far beyond the test's waits: whatever converges here converges by events.
    controller = ApplicationController(manager, Options(
        workers=2, state_keep_interval=600, resync_period=600, waiting_requeue=600,
        shard_selector=f"{labels.SCHEDULED_SHARD_ID}={SHARD}"))
    stop = threading.Event()
    thread = threading.Thread(target=manager.run, args=(stop,), daemon=True)
    thread.start()
    yield server, setup, controller
    stop.set()
    thread.join(15)
    server.stop()


def create_app(kube: KubeClient, name: str, component: dict) -> None:
    kube.create(APPLICATIONS, {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": {
        "name": name, "namespace": NS, "labels": {labels.SCHEDULED_SHARD_ID: SHARD}},
        "spec": {"components": [component]}})


def app_status(kube: KubeClient, name: str) -> dict:
    return kube.get(APPLICATIONS, name, NS).get("status") or {}


def healthy(kube: KubeClient, name: str) -> bool | None:
    services = app_status(kube, name).get("services") or []
    return services[0]["healthy"] if services else None


def controller_requests(server: APIServer, since: int) -> list[dict]:
    return [r for r in server.audit.since(since)["items"] if f"shard={SHARD}" in r.get("userAgent", "")]


def test_health_and_drift_are_event_driven_and_a_resync_costs_nothing(shard):
    server, kube, controller = shard
    create_app(kube, "web", {"name": "web", "type": "webservice", "properties": {"image": "nginx:1.25"}})
    eventually(lambda: app_status(kube, "web").get("status") == "running", timeout=20)
    deploy = kube.get(DEPLOYMENTS, "web", NS)
    assert deploy["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] == SHARD
    assert controller.managed.get(DEPLOYMENTS).store.get_by(NS, "web") is not None

    # A settled app re-synced (as the periodic re-sync does) reads only caches: no request, no write.
    time.sleep(0.5)
    since = server.audit.since(1 << 62)["lastSeq"]
    controller.controller.queue.add(f"{NS}/web")
    time.sleep(1.0)
    assert controller_requests(server, since) == []

    # The workload turns unavailable as a kubelet would report it: the app shows it at once.
    status = dict(deploy["status"], availableReplicas=0, readyReplicas=0)
    kube.patch_status(DEPLOYMENTS, "web", {"status": status}, NS)
    eventually(lambda: healthy(kube, "web") is False, timeout=5)
    kube.patch_status(DEPLOYMENTS, "web", {"status": dict(status, availableReplicas=1, readyReplicas=1)}, NS)
    eventually(lambda: healthy(kube, "web") is True, timeout=5)

    # Drift is undone as soon as it happens, deletion too.
    kube.patch(DEPLOYMENTS, "web", {"spec": {"template": {"spec": {"containers": [
        {"name": "web", "image": "drifted:1"}]}}}}, NS, patch_type="strategic")
    eventually(lambda: kube.get(DEPLOYMENTS, "web", NS)["spec"]["template"]["spec"]["containers"][0]["image"]
               == "nginx:1.25", timeout=5)
    kube.delete(DEPLOYMENTS, "web", NS)

    def recreated() -> bool:
        try:
            return kube.get(DEPLOYMENTS, "web", NS)["metadata"]["uid"] != deploy["metadata"]["uid"]
        except errors.NotFound:
            return False
    eventually(recreated, timeout=5)


def test_other_kinds_are_cached_on_demand_and_dropped_when_unused(shard):
    _, kube, controller = shard
    assert controller.managed.get(CONFIGMAPS) is None
    create_app(kube, "objs", {"name": "objs", "type": "k8s-objects", "properties": {"objects": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"k": "v"}}]}})
    eventually(lambda: app_status(kube, "objs").get("status") == "running", timeout=20)
    assert f"{NS}/objs" in render_cache._RENDERED
    assert kube.get(CONFIGMAPS, "settings", NS)["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] == SHARD
    informer = controller.managed.get(CONFIGMAPS)
    assert informer is not None and informer.label_selector == f"{labels.SCHEDULED_SHARD_ID}={SHARD}"
    eventually(lambda: informer.store.get_by(NS, "settings") is not None)

    kube.patch(CONFIGMAPS, "settings", {"data": {"k": "drifted"}}, NS)  # drift of an on-demand kind
    eventually(lambda: kube.get(CONFIGMAPS, "settings", NS)["data"] == {"k": "v"}, timeout=5)

    kube.delete(APPLICATIONS, "objs", NS)

    def gone() -> bool:
        try:
            kube.get(APPLICATIONS, "objs", NS)
            return False
        except errors.NotFound:
            return True
    eventually(gone, timeout=20)
    eventually(lambda: controller.managed.get(CONFIGMAPS) is None)
    assert f"{NS}/objs" not in render_cache._RENDERED  # what was cached of it went with it


def move(kube: KubeClient, name: str, shard: str) -> None:
    """As the master moves an app (its status may change meanwhile: try again on a conflict)."""
    for _ in range(20):
        try:
            set_shard(kube, kube.get(APPLICATIONS, name, NS), shard, "test", SIGNER)
            return
        except errors.Conflict:
            time.sleep(0.1)
    raise AssertionError(f"could not move {name} to {shard}")


def test_a_moving_apps_resources_are_not_written_back_and_its_new_owner_writes_nothing(shard):
    """The master relabels a moving app's resources before the app: the shard losing it, reading one of them
    past its cache, lets go instead of writing it back; the shard taking it over finds them as it would
    apply them and writes nothing (a failover would otherwise rewrite every workload it takes over)."""
    server, kube, _ = shard
    create_app(kube, "moved", {"name": "moved", "type": "webservice", "properties": {"image": "nginx:1.25"}})
    eventually(lambda: app_status(kube, "moved").get("status") == "running", timeout=20)
    move(kube, "moved", "elsewhere")
    time.sleep(1.0)  # the Deployment left this shard's cache: its app was reconciled once more
    assert kube.get(DEPLOYMENTS, "moved", NS)["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] == "elsewhere"

    since = server.audit.since(1 << 62)["lastSeq"]
    move(kube, "moved", SHARD)
    time.sleep(1.5)  # picked up again, reconciled from its caches
    writes = [r for r in controller_requests(server, since)
              if r["verb"] in ("create", "update", "patch", "delete") and r["resource"] != "events"]
    assert writes == [], [(w["verb"], w["resource"], w.get("subresource")) for w in writes]
    assert app_status(kube, "moved").get("status") == "running"
