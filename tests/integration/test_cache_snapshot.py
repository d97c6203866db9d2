"""A restarted controller with --cache-dir reads its caches back: a settled app's first pass is the one it had
remembered (nothing rendered, evaluated or written), and a changed app is rendered again."""

from __future__ import annotations

import threading

from velashard.apis.oam import APPLICATIONS
from velashard.apiserver.http.server import APIServer
from velashard.core import health, render_cache, settled
from velashard.core.cachesnapshot import CacheSnapshots, app_caches
from velashard.core.controller import ApplicationController, Options
from velashard.core.install import install
from velashard.kube.client import KubeClient
from velashard.kube.manager import Manager
from velashard.kube.resources import NAMESPACES
from velashard.observability import REGISTRY
from tests.integration.helpers import eventually, trust_authorless_apps

NS = "snapshots"


def run(kube: KubeClient, path: str) -> tuple[ApplicationController, int, threading.Event, threading.Thread]:
    """The controller as `velashard --cache-dir` wires it: the snapshot read before the workers start."""
    manager = Manager(kube, "master")
    controller = ApplicationController(manager, Options(workers=2))
    snapshots = CacheSnapshots(path, app_caches())
    restored = snapshots.load()
    manager.add_runnable(snapshots.start, snapshots.stop)
    stop = threading.Event()
    thread = threading.Thread(target=manager.run, args=(stop,), daemon=True)
    thread.start()
    return controller, restored, stop, thread


def skips() -> float:
    """Reconciles answered by a remembered settled pass (core/settled.py), as /metrics says."""
    return REGISTRY.get_sample_value("velashard_application_settled_passes_total") or 0.0


def running(kube: KubeClient, name: str) -> bool:
    return (kube.get(APPLICATIONS, name, NS).get("status") or {}).get("status") == "running"


def test_a_restart_renders_nothing_for_settled_apps_and_writes_nothing(tmp_path):
    server = APIServer(port=0, simulate_workloads=True).start()
    try:
        server.write_kubeconfig(str(tmp_path / "kubeconfig"))
        kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test", qps=500, burst=500)
        trust_authorless_apps(kube)
        install(kube)
        kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        path = str(tmp_path / "cache" / "master.cache")
        controller, restored, stop, thread = run(kube, path)
        assert restored == 0
        for name in ("settled", "changed"):
            kube.create(APPLICATIONS, {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
                                       "metadata": {"name": name, "namespace": NS},
                                       "spec": {"components": [{"name": name, "type": "webservice",
                                                                "properties": {"image": "nginx:1.25"},
                                                                "traits": [{"type": "scaler",
                                                                            "properties": {"replicas": 2}}]}]}})
        eventually(lambda: running(kube, "settled") and running(kube, "changed"), timeout=60)
        # a settled pass or two (a re-sync's): the first is remembered, the next answered from it
        before = skips()

        def resynced() -> bool:
            controller.controller.enqueue(f"{NS}/settled")
            return skips() > before
        eventually(resynced, timeout=30, interval=0.5)
        stop.set()  # the snapshot is written as the controller stops
        thread.join(15)
        settled_version = kube.get(APPLICATIONS, "settled", NS)["metadata"]["resourceVersion"]
        for name in ("settled", "changed"):  # a new process starts with empty caches
            render_cache.forget(f"{NS}/{name}")
            health.forget(f"{NS}/{name}")
            settled.forget(f"{NS}/{name}")
        changed = kube.get(APPLICATIONS, "changed", NS)
        changed["spec"]["components"][0]["properties"]["image"] = "nginx:1.26"
        kube.update(APPLICATIONS, changed)

        renders = render_cache.render_count()
        skipped = skips()
        controller, restored, stop, thread = run(kube, path)
        try:
            assert restored > 0
            eventually(lambda: controller.reconciled.count() == 2, timeout=60)
            eventually(lambda: (kube.get(APPLICATIONS, "changed", NS).get("status") or {}).get(
                "observedGeneration") == 2 and running(kube, "changed"), timeout=60)
            # the changed app alone was rendered again; the settled one was neither rendered nor written
            assert render_cache.render_count() - renders == 1
            # and the settled one's pass was the one it had remembered: not run at all (no health, no merge)
            assert skips() - skipped >= 1
            assert kube.get(APPLICATIONS, "settled", NS)["metadata"]["resourceVersion"] == settled_version
        finally:
            stop.set()
            thread.join(15)
    finally:
        server.stop()
