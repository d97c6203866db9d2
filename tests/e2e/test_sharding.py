"""Sharding end to end: a master and two slaves as separate processes against the embedded API server.

Shard pods are Pod objects whose Ready condition the test sets, as a kubelet would.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from urllib.parse import urlsplit

import pytest

from velashard.apis import labels
from velashard.apis.oam import APPLICATION_REVISIONS, APPLICATIONS, RESOURCE_TRACKERS
from velashard.core.install import install
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.resources import MUTATING_WEBHOOKS, NAMESPACES
from tests.e2e.helpers import (RUNTIME_NS, chart_identities, free_port, grant_tenant, listening_addresses, shard_of,
                               shard_pod, stop_processes, wait_for_shard_leases, writers_by_app)
from tests.integration.helpers import eventually, trust_authorless_apps

@pytest.fixture(scope="module")
def sharded(make_module_apiserver, tmp_path_factory):
    server = make_module_apiserver
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test", qps=500, burst=500)
    install(kube)
    trust_authorless_apps(kube, "admin")  # admin's apps act as admin; authorless ones as the default user
    kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}})
    # Every process runs under the chart's RBAC, with its ServiceAccount's token.
    master_kubeconfig, shard_kubeconfig = chart_identities(server, kube, tmp_path_factory.mktemp("identities"))
    procs: dict[str, subprocess.Popen] = {}
    metrics: dict[str, int] = {}

    def start(shard: str, *extra: str) -> None:
        metrics[shard] = free_port()
        kubeconfig = master_kubeconfig if shard == "master" else shard_kubeconfig
        procs[shard] = subprocess.Popen(
            [sys.executable, "-m", "velashard.cli.main", "--kubeconfig", kubeconfig, "--enable-sharding",
             "--shard-id", shard, "--namespace", RUNTIME_NS, "--metrics-addr", f"127.0.0.1:{metrics[shard]}",
             "--health-addr", "127.0.0.1:0", "--state-keep-interval", "5", *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    webhook_port = free_port()
    start("master", "--reschedule-period", "1", "--orphan-grace-period", "3", "--webhook-port", str(webhook_port),
          "--webhook-url", f"https://127.0.0.1:{webhook_port}", "--shard-admin-users", "admin")
    start("shard-a")
    start("shard-b")
    shard_pod(kube, "master", True)
    shard_pod(kube, "shard-a", True)
    shard_pod(kube, "shard-b", True)
    wait_for_shard_leases(kube, "master", "shard-a", "shard-b")
    eventually(lambda: kube.list(MUTATING_WEBHOOKS)["items"], timeout=90)
    eventually(webhook_serving(webhook_port), timeout=90)
    yield server, kube, metrics
    stop_processes(list(procs.values()))


def webhook_serving(port: int):
    import ssl

    def check() -> bool:
        try:
            urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", timeout=2,
                                   context=ssl._create_unverified_context())
            return True
        except OSError:
            return False
    return check


@pytest.fixture(scope="module")
def make_module_apiserver(tmp_path_factory):
    from velashard.apiserver.http.server import APIServer
    server = APIServer(port=0, simulate_workloads=True).start()
    server.write_kubeconfig(str(tmp_path_factory.mktemp("sharding") / "kubeconfig"))
    yield server
    server.stop()


def app(name: str) -> dict:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": {"name": name, "namespace": "apps"},
            "spec": {"components": [{"name": name, "type": "worker", "properties": {"image": "busybox"}}]}}


def all_running(kube: KubeClient, count: int) -> list[dict]:
    items = kube.list(APPLICATIONS, "apps")["items"]
    return items if len(items) == count and all((a.get("status") or {}).get("status") == "running"
                                                and shard_of(a) for a in items) else []


def test_the_masters_webhooks_listen_on_loopback_only(sharded):
    """A master run as a local process is reached by an API server on the same machine, so its webhooks listen on
    loopback (in a pod the chart passes --webhook-bind-address=0.0.0.0)."""
    _, kube, _ = sharded
    port = urlsplit(kube.list(MUTATING_WEBHOOKS)["items"][0]["webhooks"][0]["clientConfig"]["url"]).port
    assert listening_addresses(port) == {"127.0.0.1"}


def test_apps_are_scheduled_across_slaves_and_reconciled_only_by_their_shard(sharded):
    server, kube, metrics = sharded
    since = server.audit.since(0)["lastSeq"]
    for i in range(60):
        kube.create(APPLICATIONS, app(f"app-{i}"))
    items = eventually(lambda: all_running(kube, 60), timeout=90, interval=0.5)
    counts = Counter(shard_of(a) for a in items)
    assert set(counts) == {"shard-a", "shard-b"} and counts["shard-a"] == counts["shard-b"] == 30  # round-robin
    owner = {a["metadata"]["name"]: shard_of(a) for a in items}
    writers: dict[str, set[str]] = {}
    for record in server.audit.since(since)["items"]:
        if record["resource"] == "applications" and record["subresource"] == "status" and record["verb"] == "update":
            agent = record["userAgent"]
            shard = agent.split("shard=")[1].rstrip(")") if "shard=" in agent else agent
            writers.setdefault(record["name"], set()).add(shard)
    assert writers and all(writers[name] == {owner[name]} for name in writers), writers
    for a in items:
        rev = kube.get(APPLICATION_REVISIONS, f'{a["metadata"]["name"]}-v1', "apps")
        assert shard_of(rev) == shard_of(a)
    # Each slave's cache holds only its own applications. The gauges are set after the status write that made
    # the app look running (a reconcile counts once it returns): wait for them rather than read them once.
    for shard in ("shard-a", "shard-b"):
        eventually(lambda shard=shard: gauges(metrics[shard], (counts[shard], counts[shard])), timeout=30,
                   interval=0.2)


def gauges(port: int, want: tuple[int, int]) -> bool:
    """A process's /metrics show `want`: (applications in the informer's cache, applications reconciled)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    cached = next(l for l in text.splitlines() if l.startswith("velashard_informer_objects{")
                  and "applications.core.oam.dev" in l)
    reconciled = next(l for l in text.splitlines() if l.startswith("velashard_applications_reconciled "))
    got = float(cached.rsplit(" ", 1)[1]), float(reconciled.split()[1])
    assert got == want, (port, got, want)
    return True


def test_a_shard_whose_container_terminated_moves_its_apps_with_revisions_and_trackers(sharded):
    server, kube, _ = sharded
    eventually(lambda: all_running(kube, 60), timeout=90, interval=0.5)
    before = {a["metadata"]["name"]: shard_of(a) for a in kube.list(APPLICATIONS, "apps")["items"]}
    shard_pod(kube, "shard-a", False, terminated=True)  # dead for sure: its apps move after the grace period
    started = time.monotonic()

    def moved() -> list[dict]:
        items = all_running(kube, 60)
        return items if items and all(shard_of(a) == "shard-b" for a in items) else []

    items = eventually(moved, timeout=90, interval=0.5)
    assert time.monotonic() - started >= 2.5  # not before the grace period
    for a in items:
        name = a["metadata"]["name"]
        if before[name] == "shard-a":
            revisions = kube.list(APPLICATION_REVISIONS, "apps", label_selector=f"{labels.APP_NAME}={name}")["items"]
            assert revisions and all(shard_of(r) == "shard-b" for r in revisions)
            assert shard_of(kube.get(RESOURCE_TRACKERS, f"{name}-apps")) == "shard-b"
    shard_pod(kube, "shard-a", True)


def cli(server, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "velashard.cli.main", *args, "--kubeconfig", server.kubeconfig],
                          capture_output=True, text=True, timeout=60)


def test_reschedule_cli_moves_app_with_dependents_and_shards_lists_them(sharded):
    server, kube, _ = sharded
    items = eventually(lambda: all_running(kube, 60), timeout=90, interval=0.5)
    target = items[0]
    name, current = target["metadata"]["name"], shard_of(target)
    other = "shard-a" if current == "shard-b" else "shard-b"
    refused = cli(server, "reschedule", name, "-n", "apps", "--shard-id", "shard-z")
    assert refused.returncode == 2 and "unknown" in refused.stderr and "--force" in refused.stderr
    moved = cli(server, "reschedule", name, "-n", "apps", "--shard-id", other)
    assert moved.returncode == 0, moved.stderr
    assert shard_of(kube.get(APPLICATIONS, name, "apps")) == other
    assert shard_of(kube.get(RESOURCE_TRACKERS, f"{name}-apps")) == other
    assert all(shard_of(r) == other for r in kube.list(APPLICATION_REVISIONS, "apps",
                                                       label_selector=f"{labels.APP_NAME}={name}")["items"])
    eventually(lambda: (kube.get(APPLICATIONS, name, "apps").get("status") or {}).get("status") == "running")
    table = cli(server, "shards")
    assert table.returncode == 0
    rows = {line.split()[0]: line.split() for line in table.stdout.splitlines()[1:]}
    assert rows["shard-a"][-1] == "yes" and rows["master"][-1] == "master"
    eventually(lambda: cli(server, "shards").stdout.count("ago") >= 2, timeout=20)


def test_kubevela_6433_sequence(tmp_path):
    """App created with sharding off; sharding turned on; app updated: the slave deploys it, nothing recreated."""
    from velashard.apiserver.http.server import APIServer
    from velashard.kube.resources import DEPLOYMENTS

    server = APIServer(port=0, simulate_workloads=True).start()
    server.write_kubeconfig(str(tmp_path / "kubeconfig"))
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test")
    procs: list[subprocess.Popen] = []

    def start(*flags: str) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", "velashard.cli.main", "--kubeconfig", server.kubeconfig,
                                 "--namespace", RUNTIME_NS, "--metrics-addr", "127.0.0.1:0", "--health-addr",
                                 "127.0.0.1:0", *flags], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(proc)
        return proc

    try:
        install(kube)
        trust_authorless_apps(kube, "admin")  # admin's apps act as admin; authorless ones as the default user
        kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}})
        unsharded = start()
        kube.create(APPLICATIONS, app("legacy"))
        eventually(lambda: (kube.get(APPLICATIONS, "legacy", "apps").get("status") or {}).get("status") == "running",
                   timeout=30)
        deployment_uid = kube.get(DEPLOYMENTS, "legacy", "apps")["metadata"]["uid"]
        assert shard_of(kube.get(APPLICATION_REVISIONS, "legacy-v1", "apps")) is None
        unsharded.send_signal(signal.SIGTERM)
        unsharded.wait(15)
        # The master's webhook is unreachable (nothing listens there): updates are admitted unscheduled
        # under failurePolicy Ignore, and the background scheduler schedules them within a period.
        from velashard.webhook.certificates import make_ca
        from velashard.webhook.runner import WebhookOptions, configurations
        dead = f"https://127.0.0.1:{free_port()}"
        mutating, _ = configurations(WebhookOptions(url=dead), make_ca().cert_pem)
        kube.create(MUTATING_WEBHOOKS, mutating)
        start("--enable-sharding", "--shard-id", "master", "--reschedule-period", "1", "--disable-webhooks")
        start("--enable-sharding", "--shard-id", "shard-0")
        shard_pod(kube, "shard-0", True)
        current = kube.get(APPLICATIONS, "legacy", "apps")
        current["spec"]["components"][0]["properties"]["image"] = "busybox:2"
        updated = kube.update(APPLICATIONS, current)
        assert shard_of(updated) is None  # admitted unscheduled
        eventually(lambda: shard_of(kube.get(APPLICATIONS, "legacy", "apps")) == "shard-0", timeout=60,
                   interval=0.2)

        def deployed() -> bool:
            status = kube.get(APPLICATIONS, "legacy", "apps").get("status") or {}
            return status.get("status") == "running" and status.get("latestRevision", {}).get("revision") == 2
        eventually(deployed, timeout=60, interval=0.5)
        assert shard_of(kube.get(APPLICATIONS, "legacy", "apps")) == "shard-0"
        assert all(shard_of(r) == "shard-0" for r in kube.list(APPLICATION_REVISIONS, "apps")["items"])
        assert shard_of(kube.get(RESOURCE_TRACKERS, "legacy-apps")) == "shard-0"
        deploy = kube.get(DEPLOYMENTS, "legacy", "apps")
        assert deploy["metadata"]["uid"] == deployment_uid  # updated in place, not recreated
        assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:2"
    finally:
        stop_processes(procs)
        server.stop()


def test_webhook_schedules_restores_removed_label_and_protects_it(sharded, tmp_path):
    server, kube, _ = sharded
    made = kube.create(APPLICATIONS, app("hooked"))
    shard = shard_of(made)
    assert shard in ("shard-a", "shard-b")  # scheduled at admission, not later
    removed = kube.patch(APPLICATIONS, "hooked", {"metadata": {"labels": {labels.SCHEDULED_SHARD_ID: None}}}, "apps")
    assert shard_of(removed) == shard  # a removed label comes back
    grant_tenant(kube, "alice")  # alice may edit applications (RBAC); only the shard-label guard stops a move
    alice = KubeClient.from_kubeconfig(server.write_kubeconfig(str(tmp_path / "alice"), user="alice"),
                                       shard_id="alice")
    other = "shard-a" if shard == "shard-b" else "shard-b"
    with pytest.raises(errors.Invalid) as err:  # the shard-label guard, a ValidatingAdmissionPolicy
        alice.patch(APPLICATIONS, "hooked", {"metadata": {"labels": {labels.SCHEDULED_SHARD_ID: other}}}, "apps")
    # Denied by the chart's guard or the master's (both are installed here).
    assert err.value.code == 422 and "velashard-shard-label-guard' with binding" in err.value.message
    assert "velashard reschedule hooked -n apps" in err.value.message
    assert shard_of(kube.get(APPLICATIONS, "hooked", "apps")) == shard
    chosen = {**app("chosen"), "metadata": {"name": "chosen", "namespace": "apps", "labels": {
        labels.SCHEDULED_SHARD_ID: other}, "annotations": {labels.ASSIGNED_BY_WEBHOOK: other}}}
    with pytest.raises(errors.Invalid) as err:  # a copied webhook annotation is stripped by the webhook
        alice.create(APPLICATIONS, chosen)
    assert f'may not choose shard "{other}"' in err.value.message
    assert shard_of(alice.create(APPLICATIONS, app("alices"))) in ("shard-a", "shard-b")
    kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": "tenant-b", "labels": {labels.SHARD_ID: "shard-b"}}})
    pinned = kube.create(APPLICATIONS, {**app("pinned"), "metadata": {"name": "pinned", "namespace": "tenant-b"}})
    assert shard_of(pinned) == "shard-b"  # namespace pinning
    steps = kube.create(APPLICATIONS, {**app("stepped"), "spec": {**app("stepped")["spec"], "workflow": {
        "steps": [{"type": "deploy"}]}}})
    assert steps["spec"]["workflow"]["steps"][0]["name"] == "deploy-1"  # unnamed steps get a default name


def test_consistent_hash_join_moves_about_a_third_through_the_drain_handshake(tmp_path):
    from velashard.apiserver.http.server import APIServer

    server = APIServer(port=0, simulate_workloads=True).start()
    server.write_kubeconfig(str(tmp_path / "kubeconfig"))
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test", qps=500, burst=500)
    procs: list[subprocess.Popen] = []

    def start(shard: str, *flags: str) -> None:
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "velashard.cli.main", "--kubeconfig", server.kubeconfig, "--enable-sharding",
             "--shard-id", shard, "--namespace", RUNTIME_NS, "--metrics-addr", "127.0.0.1:0", "--health-addr",
             "127.0.0.1:0", *flags], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    try:
        install(kube)
        trust_authorless_apps(kube, "admin")  # admin's apps act as admin; authorless ones as the default user
        kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}})
        start("master", "--shard-scheduler", "consistent-hash", "--reschedule-period", "1", "--disable-webhooks")
        for shard in ("shard-a", "shard-b"):
            start(shard)
            shard_pod(kube, shard, True)
        wait_for_shard_leases(kube, "shard-a", "shard-b")
        for i in range(30):
            kube.create(APPLICATIONS, app(f"app-{i}"))
        items = eventually(lambda: all_running(kube, 30), timeout=60, interval=0.5)
        before = {a["metadata"]["name"]: shard_of(a) for a in items}
        since = server.audit.since(0)["lastSeq"]
        start("shard-c")
        shard_pod(kube, "shard-c", True)

        def rebalanced() -> list[dict]:
            found = all_running(kube, 30)
            return found if found and any(shard_of(a) == "shard-c" for a in found) and not kube.list(
                APPLICATIONS, "apps", label_selector=labels.DRAIN)["items"] else []

        items = eventually(rebalanced, timeout=90, interval=0.5)
        after = {a["metadata"]["name"]: shard_of(a) for a in items}
        moved = [n for n in before if before[n] != after[n]]
        assert all(after[n] == "shard-c" for n in moved)  # only onto the newcomer
        assert 0 < len(moved) <= 1.2 * 30 / 3 + 2, moved
        for name, shards in writers_by_app(server.audit.since(since)["items"]).items():
            assert len(shards) <= 2 and (len(shards) == 1 or shards[-1] == "shard-c"), (name, shards)
        for name in moved:
            revisions = kube.list(APPLICATION_REVISIONS, "apps", label_selector=f"{labels.APP_NAME}={name}")["items"]
            assert all(shard_of(r) == "shard-c" for r in revisions)
    finally:
        stop_processes(procs)
        server.stop()
