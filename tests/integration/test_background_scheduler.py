"""The background scheduler against the embedded API server: placement through the same pure functions as the
webhook, pins honoured, every assignment proven, a rebalance that never drains a pinned app, orphans after grace;
and driven by its informers' events, with no request of its own at steady state."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from velashard.apis import labels
from velashard.apis.oam import API_VERSION, APPLICATIONS
from velashard.core.install import install
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.manager import Manager
from velashard.kube.resources import LEASES, NAMESPACES, PODS
from velashard.sharding.discovery import ShardDiscovery
from velashard.sharding.keys import SigningKey
from velashard.sharding.placement import PlacementState, place
from velashard.sharding.scheduler import BackgroundScheduler
from tests.integration.helpers import eventually

SHARDS = ["shard-0", "shard-1", "shard-2"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A private server: a pass looks at every app in the cluster."""
    from velashard.apiserver.http.server import APIServer

    server = APIServer(port=0).start()
    server.write_kubeconfig(str(tmp_path_factory.mktemp("scheduler") / "kubeconfig"))
    install(KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def kube(server):
    return KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test", qps=500, burst=500)


@pytest.fixture
def scheduler(server):
    """Make a scheduler as the master wires it (its informers started, its key loaded); stopped after the test."""
    made: list[tuple[Manager, BackgroundScheduler]] = []

    def make(strategy: str, shards: list[str], grace: float = 60.0, period: float = 30.0) -> BackgroundScheduler:
        client = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="master", qps=500, burst=500)
        manager = Manager(client, "master")
        keys = SigningKey(client, "vela-system")
        background = BackgroundScheduler(manager, ShardDiscovery(manager, "vela-system", static=shards), strategy,
                                         "vela-system", keys, period=period, grace=grace)
        threading.Thread(target=manager.start_controllers, daemon=True).start()
        keys.load()
        eventually(manager.ready, timeout=10)
        made.append((manager, background))
        return background

    yield make
    for manager, background in made:
        background.stop()
        manager.shutdown()


def namespace(kube: KubeClient, name: str, pin: str | None = None) -> None:
    kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": name, "labels": {labels.SHARD_ID: pin} if pin else {}}})


def create_app(kube: KubeClient, ns: str, name: str, shard: str | None = None) -> dict:
    return kube.create(APPLICATIONS, {"apiVersion": API_VERSION, "kind": "Application", "metadata": {
        "name": name, "namespace": ns, "labels": {labels.SCHEDULED_SHARD_ID: shard} if shard else {}},
        "spec": {"components": []}})


def shards_in(kube: KubeClient, ns: str, label: str = labels.SCHEDULED_SHARD_ID) -> Counter:
    return Counter((a["metadata"].get("labels") or {}).get(label) for a in kube.list(APPLICATIONS, ns)["items"])


def cached(background: BackgroundScheduler, count: int) -> bool:
    return len(background.unscheduled.store) == count


def proven(background: BackgroundScheduler, app: dict) -> bool:
    meta = app["metadata"]
    return background.keys.signer.proves(meta["namespace"], meta["name"], meta["labels"][labels.SCHEDULED_SHARD_ID],
                                         meta["annotations"][labels.ASSIGNMENT_PROOF])


def test_a_pass_spreads_unscheduled_apps_proves_them_and_honours_a_pin(kube, scheduler):
    namespace(kube, "ll-free")
    namespace(kube, "ll-tenant", pin="shard-2")
    for i in range(30):
        create_app(kube, "ll-free", f"a{i}")
    for i in range(5):
        create_app(kube, "ll-tenant", f"t{i}")
    background = scheduler("least-loaded", SHARDS)
    eventually(lambda: cached(background, 35))
    assert background.run_once(now=0.0) == 35
    assert shards_in(kube, "ll-tenant") == {"shard-2": 5}
    free = shards_in(kube, "ll-free")
    assert max(free.values()) - min(free.values()) <= 1 + 5  # the tenant's five count against shard-2
    assert all(proven(background, a) for ns in ("ll-free", "ll-tenant") for a in kube.list(APPLICATIONS, ns)["items"])


def test_a_rebalance_onto_a_new_shard_asks_no_pinned_app_to_drain(kube, scheduler):
    namespace(kube, "ch-free")
    namespace(kube, "ch-tenant", pin="shard-0")
    state = PlacementState("consistent-hash")
    for i in range(20):
        create_app(kube, "ch-tenant", f"t{i}", "shard-0")
        obj = {"apiVersion": API_VERSION, "kind": "Application", "metadata": {"name": f"f{i}", "namespace": "ch-free"}}
        create_app(kube, "ch-free", f"f{i}", place(obj, SHARDS, None, None, state)[0])
    scheduler("consistent-hash", SHARDS + ["shard-3"]).drain_misplaced(SHARDS + ["shard-3"])
    assert shards_in(kube, "ch-tenant", labels.DRAIN) == {None: 20}
    drained = shards_in(kube, "ch-free", labels.DRAIN)
    assert drained[None] < 20 and set(drained) == {None, "shard-3"}  # the ring moved some, all to the newcomer


def test_orphans_move_only_after_the_grace_period(kube, scheduler):
    namespace(kube, "orphans")
    for i in range(4):
        create_app(kube, "orphans", f"o{i}", "gone-shard")
    background = scheduler("round-robin", SHARDS, grace=60.0)
    assert background.run_once(now=1000.0) == 0  # starts following the apps of shards not available
    eventually(lambda: background.orphans.has_synced() and len(background.orphans.store) == 4)
    assert background.run_once(now=1000.0) == 0
    assert background.run_once(now=1059.0) == 0
    assert background.run_once(now=1060.0) == 4
    assert shards_in(kube, "orphans") == {"shard-0": 2, "shard-1": 1, "shard-2": 1}  # round-robin from the start


def test_events_drive_it_and_at_steady_state_it_sends_nothing(server, kube, scheduler):
    """With a period far beyond the test, everything it does here it does on its informers' events; its own
    passes then read only caches."""
    namespace(kube, "events")
    background = scheduler("round-robin", SHARDS, grace=0.5, period=3600.0)
    background.start()
    create_app(kube, "events", "late")  # admitted while the webhook was down
    create_app(kube, "events", "stranded", "removed-shard")  # its shard is gone
    eventually(lambda: set(shards_in(kube, "events")) <= set(SHARDS), timeout=10)
    # Handed back by a shard for want of a valid proof: unscheduled again, so placed again, with a proof.
    kube.patch(APPLICATIONS, "late", {"metadata": {"labels": {labels.SCHEDULED_SHARD_ID: None},
                                                   "annotations": {labels.ASSIGNMENT_PROOF: None}}}, "events")
    eventually(lambda: set(shards_in(kube, "events")) <= set(SHARDS), timeout=10)
    assert all(proven(background, a) for a in kube.list(APPLICATIONS, "events")["items"])
    since = server.audit.since(0)["lastSeq"]
    for _ in range(5):
        background.run_once()  # the periodic safety net
    requests = [r for r in server.audit.since(since)["items"] if "shard=master" in r["userAgent"]
                and r["verb"] != "watch"]
    assert requests == [], [(r["verb"], r["resource"]) for r in requests]


def shard_pod(kube: KubeClient, shard: str, ready: bool) -> None:
    name = f"vela-core-{shard}"
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "vela-system", "labels": {
        labels.POD_NAME_LABEL: labels.POD_NAME_VALUE, labels.SHARD_ID: shard}},
        "spec": {"containers": [{"name": "vela-core", "image": "velashard"}]}}
    if not kube.list(PODS, "vela-system", field_selector=f"metadata.name={name}")["items"]:
        kube.create(PODS, body)
    kube.patch_status(PODS, name, {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}],
        "containerStatuses": [{"name": "vela-core", "ready": ready, "state": {"running": {}}}]}}, "vela-system")


def shard_lease(kube: KubeClient, shard: str, holder: str) -> None:
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {
        "name": f"velashard-{shard}", "namespace": "vela-system", "labels": {labels.SHARD_ID: shard}},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 3600, "renewTime": "2024-01-01T00:00:00.000000Z"}}
    try:
        current = kube.get(LEASES, f"velashard-{shard}", "vela-system")
        current["spec"] = body["spec"]
        kube.update(LEASES, current)
    except errors.NotFound:
        kube.create(LEASES, body)


def test_a_suspects_apps_move_once_both_its_lease_is_gone_and_the_grace_period_passed(server, kube):
    """A suspect shard's apps wait for its lease to expire (an hour here) however long the grace period has run;
    a clean shutdown releases the lease, and that event, not a timer, moves them, as the grace period is over.
    A released lease alone moves nothing within the grace period: a restart releases it too."""
    namespace(kube, "suspects")
    for shard in ("alive", "leaving", "restarting"):
        shard_pod(kube, shard, True)
        shard_lease(kube, shard, f"{shard}-1")
    for i in range(3):
        create_app(kube, "suspects", f"s{i}", "leaving")
        create_app(kube, "suspects", f"r{i}", "restarting")
    client = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="master", qps=500, burst=500)
    manager = Manager(client, "master")
    keys = SigningKey(client, "vela-system")
    background = BackgroundScheduler(manager, ShardDiscovery(manager, "vela-system"), "round-robin", "vela-system",
                                     keys, period=3600.0, grace=2.0)
    threading.Thread(target=manager.start_controllers, daemon=True).start()
    keys.load()
    try:
        eventually(manager.ready, timeout=10)
        background.start()
        eventually(lambda: background.discovery.available() == ["alive", "leaving", "restarting"], timeout=10)
        shard_pod(kube, "leaving", False)  # NotReady: suspect, its lease still held
        eventually(lambda: background.orphans is not None and len(
            [a for a in background.orphans.store.list() if a["metadata"]["namespace"] == "suspects"]) == 3, timeout=10)
        time.sleep(3.0)  # past the grace period
        assert shards_in(kube, "suspects") == {"leaving": 3, "restarting": 3}
        shard_lease(kube, "leaving", "")  # released on a clean shutdown
        eventually(lambda: "leaving" not in shards_in(kube, "suspects"), timeout=5)
        placed = shards_in(kube, "suspects")
        # A clean restart: the lease released, the new process Ready as a standby, then holding the lease, all
        # within the grace period.
        shard_lease(kube, "restarting", "")
        eventually(lambda: background.discovery.members()["restarting"].status == "restarting", timeout=5)
        time.sleep(1.0)
        shard_lease(kube, "restarting", "restarting-2")
        eventually(lambda: "restarting" in background.discovery.available(), timeout=5)
        time.sleep(2.5)  # the whole grace period after the release
        assert shards_in(kube, "suspects") == placed
    finally:
        background.stop()
        manager.shutdown()
        for shard in ("alive", "leaving", "restarting"):
            kube.delete(PODS, f"vela-core-{shard}", "vela-system")
            kube.delete(LEASES, f"velashard-{shard}", "vela-system")


def test_a_new_leader_drains_what_the_ring_places_elsewhere_once(kube, scheduler):
    # The static list grew while no master led (a chart upgrade adds a shard and restarts the master): no
    # membership change is ever seen, so the new leader's first pass looks for misplaced apps itself.
    namespace(kube, "ch-upgrade")
    state = PlacementState("consistent-hash")
    for i in range(20):
        obj = {"apiVersion": API_VERSION, "kind": "Application", "metadata": {"name": f"u{i}", "namespace": "ch-upgrade"}}
        create_app(kube, "ch-upgrade", f"u{i}", place(obj, SHARDS, None, None, state)[0])
    background = scheduler("consistent-hash", SHARDS + ["shard-4"])
    background.run_once(now=0.0)
    drained = shards_in(kube, "ch-upgrade", labels.DRAIN)
    assert drained[None] < 20 and set(drained) == {None, "shard-4"}
    for app in kube.list(APPLICATIONS, "ch-upgrade")["items"]:  # the shards let go; nothing more is asked
        if labels.DRAIN in app["metadata"]["labels"]:
            kube.patch(APPLICATIONS, app["metadata"]["name"], {"metadata": {"labels": {
                labels.DRAIN: None, labels.SCHEDULED_SHARD_ID: None}}}, "ch-upgrade")
    background.run_once(now=1.0)
    assert shards_in(kube, "ch-upgrade", labels.DRAIN) == {None: 20}
