"""The background scheduler's pass against the embedded API server: placement through the same pure
functions as the webhook, pins honoured, a rebalance that never drains a pinned app, orphans after grace."""

from __future__ import annotations

from collections import Counter

import pytest

from velashard.apis import labels
from velashard.apis.oam import API_VERSION, APPLICATIONS
from velashard.core.install import install
from velashard.kube.client import KubeClient
from velashard.kube.manager import Manager
from velashard.kube.resources import NAMESPACES
from velashard.sharding.discovery import ShardDiscovery
from velashard.sharding.placement import PlacementState, place
from velashard.sharding.scheduler import BackgroundScheduler

SHARDS = ["shard-0", "shard-1", "shard-2"]


@pytest.fixture(scope="module")
def kube(tmp_path_factory):
    """A private server: a pass looks at every app in the cluster."""
    from velashard.devcluster.server import APIServer

    server = APIServer(port=0).start()
    server.write_kubeconfig(str(tmp_path_factory.mktemp("scheduler") / "kubeconfig"))
    client = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test", qps=500, burst=500)
    install(client)
    yield client
    server.stop()


def scheduler(kube: KubeClient, strategy: str, shards: list[str], grace: float = 60.0) -> BackgroundScheduler:
    discovery = ShardDiscovery(Manager(kube, "master"), "vela-system", static=shards)
    return BackgroundScheduler(kube, discovery, strategy, "vela-system", grace=grace)


def namespace(kube: KubeClient, name: str, pin: str | None = None) -> None:
    kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": name, "labels": {labels.SHARD_ID: pin} if pin else {}}})


def create_app(kube: KubeClient, ns: str, name: str, shard: str | None = None) -> dict:
    return kube.create(APPLICATIONS, {"apiVersion": API_VERSION, "kind": "Application", "metadata": {
        "name": name, "namespace": ns, "labels": {labels.SCHEDULED_SHARD_ID: shard} if shard else {}},
        "spec": {"components": []}})


def shards_in(kube: KubeClient, ns: str, label: str = labels.SCHEDULED_SHARD_ID) -> Counter:
    return Counter((a["metadata"].get("labels") or {}).get(label) for a in kube.list(APPLICATIONS, ns)["items"])


def test_a_pass_spreads_unscheduled_apps_and_honours_a_pin(kube):
    namespace(kube, "ll-free")
    namespace(kube, "ll-tenant", pin="shard-2")
    for i in range(30):
        create_app(kube, "ll-free", f"a{i}")
    for i in range(5):
        create_app(kube, "ll-tenant", f"t{i}")
    assert scheduler(kube, "least-loaded", SHARDS).run_once(now=0.0) == 35
    assert shards_in(kube, "ll-tenant") == {"shard-2": 5}
    free = shards_in(kube, "ll-free")
    assert max(free.values()) - min(free.values()) <= 1 + 5  # the tenant's five count against shard-2


def test_a_rebalance_onto_a_new_shard_asks_no_pinned_app_to_drain(kube):
    namespace(kube, "ch-free")
    namespace(kube, "ch-tenant", pin="shard-0")
    state = PlacementState("consistent-hash")
    for i in range(20):
        create_app(kube, "ch-tenant", f"t{i}", "shard-0")
        obj = {"apiVersion": API_VERSION, "kind": "Application", "metadata": {"name": f"f{i}", "namespace": "ch-free"}}
        create_app(kube, "ch-free", f"f{i}", place(obj, SHARDS, None, None, state)[0])
    scheduler(kube, "consistent-hash", SHARDS + ["shard-3"]).drain_misplaced(SHARDS + ["shard-3"])
    assert shards_in(kube, "ch-tenant", labels.DRAIN) == {None: 20}
    drained = shards_in(kube, "ch-free", labels.DRAIN)
    assert drained[None] < 20 and set(drained) == {None, "shard-3"}  # the ring moved some, all to the newcomer


def test_orphans_move_only_after_the_grace_period(kube):
    namespace(kube, "orphans")
    for i in range(4):
        create_app(kube, "orphans", f"o{i}", "gone-shard")
    background = scheduler(kube, "round-robin", SHARDS, grace=60.0)
    assert background.run_once(now=1000.0) == 0
    assert background.run_once(now=1059.0) == 0
    assert background.run_once(now=1060.0) == 4
    assert shards_in(kube, "orphans") == {"shard-0": 2, "shard-1": 1, "shard-2": 1}  # round-robin from the start
