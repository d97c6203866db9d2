"""How many times a new app goes through the work queue: the reconcile that adds the finalizer goes on to apply
the app, and the finalizer's own event wakes nobody (each pass waits behind every other app's at scale)."""

from __future__ import annotations

import threading

import pytest

from velashard.apis.oam import APPLICATIONS
from velashard.apiserver.http.server import APIServer
from velashard.core.controller import ApplicationController, Options
from velashard.core.install import install
from velashard.core.reconciler import FINALIZER
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.manager import Manager
from velashard.kube.resources import DEPLOYMENTS, NAMESPACES
from tests.integration.helpers import eventually, trust_authorless_apps

NS = "passes"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    server = APIServer(port=0, simulate_workloads=True).start()
    server.write_kubeconfig(str(tmp_path_factory.mktemp("passes") / "kubeconfig"))
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test", qps=500, burst=500)
    trust_authorless_apps(kube)
    install(kube)
    kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    manager = Manager(kube, "master")
    controller = ApplicationController(manager, Options(workers=2))
    passes: list[tuple[str, bool, bool]] = []  # (key, had the finalizer before, its Deployment existed after)
    inner = controller.controller.reconcile  # the worker's chain

    def counted(key: str):
        cached = controller.apps.store.get(key)
        had = cached is not None and FINALIZER in (cached["metadata"].get("finalizers") or [])
        try:
            return inner(key)
        finally:
            passes.append((key, had, deployment_exists(kube, key.split("/")[1])))

    controller.controller.reconcile = counted
    stop = threading.Event()
    thread = threading.Thread(target=manager.run, args=(stop,), daemon=True)
    thread.start()
    yield kube, passes
    stop.set()
    thread.join(15)
    server.stop()


def deployment_exists(kube: KubeClient, name: str) -> bool:
    try:
        kube.get(DEPLOYMENTS, name, NS)
    except errors.NotFound:
        return False
    return True


def test_the_pass_that_adds_the_finalizer_applies_the_app(cluster):
    kube, passes = cluster
    kube.create(APPLICATIONS, {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
                               "metadata": {"name": "web", "namespace": NS},
                               "spec": {"components": [{"name": "web", "type": "webservice",
                                                        "properties": {"image": "nginx:1.25"}}]}})
    eventually(lambda: (kube.get(APPLICATIONS, "web", NS).get("status") or {}).get("status") == "running",
               timeout=30)
    mine = [p for p in passes if p[0] == f"{NS}/web"]
    assert mine[0] == (f"{NS}/web", False, True)  # no finalizer yet, and the Deployment applied in that pass
    assert FINALIZER in kube.get(APPLICATIONS, "web", NS)["metadata"]["finalizers"]
    # Then the workload's progress (no pass for the finalizer's event): a handful at most, not one per write.
    assert all(had for _, had, _ in mine[1:]) and len(mine) <= 3
