"""One shard's share of KubeVela's 400,000-app tier, printing one JSON object.

KubeVela's largest published size is 400,000 apps on five controllers (80,000 each). This script puts
KubeVela's load-test app (hack/bench_kubevela_tiers.py's: two components, five traits, five objects) on ONE
shard at growing sizes (`--sizes`, default 4,000, 12,000 and 40,000) and reports whether its cost per app stays
flat. A master (webhooks, background scheduler, leader election), shard-0 and shard-1 run as processes against
`velashard apiserver --simulate-workloads`; the apps' namespace is pinned to shard-0 (its
`controller.core.oam.dev/shard-id` label), so shard-1 stays idle beside it (placement among available shards
stays cheap, and it is where the failover goes). The apps are added to the same processes size after size.

For each size, once the added apps all run:
- shard-0's RSS and KiB per app (growth over its idle baseline / its apps), the idle shard's RSS;
- CPU seconds per added app until all ran, of shard-0, the master (with its webhook server) and the API server;
  the share of shard-0's CPU that went to Python's cyclic garbage collector (velashard_gc_seconds_total);
- reconcile p50/p99 and queue wait p50/p99 of shard-0 over the added apps (histogram differences);
- API requests per added app (the controllers', from the audit log, by verb and resource);
- at steady state over `--window` seconds: the master's RSS and requests per minute, shard-0's requests per
  minute; the API server's RSS, the objects it holds and its bytes per object.

Then, at the last size:
- continuous updates (`--update-share` of the apps a minute for `--update-minutes`): p50/p99 from the update
  until the app's status shows the new generation running;
- a restart of shard-0 (`--restart`): killed (SIGKILL, its pod reported terminated) and started again at once;
  seconds until it has reconciled all its apps, and every write the controllers made, from the audit log
  (wanted: none but Leases and Events);
- a failover (`--failover`): shard-0 killed for good; seconds until every app is labelled for shard-1 and
  until shard-1 has reconciled all of them (from the kill and from the end of the master's grace period),
  and the writes per app it took.

Goals (issue 48): shard-0 at most 25 KiB per app, KiB per app and CPU seconds per app at the last size within
15% of the first; update p99 <= 5 s; restart within 120 s with no write but Leases and Events; failover within
300 s; the master's RSS and steady-state requests per minute at the last size within 10% of the first.
`--profile DIR` records shard-0, the master and the API server with py-spy while the last size converges and during
the updates (DIR/updates), and shard-0 and the API server during the restart (DIR/restart).

    nice -n 19 python hack/bench_shard_scale.py [--sizes 4000,12000,40000] [--update-minutes 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hack.apptracker import AppTracker, wait_until  # noqa: E402
from hack.bench_apiserver import _commit  # noqa: E402
from hack.bench_kubevela_tiers import (app_shards, audit_since, by_verb, continuous_updates, create_apps,  # noqa: E402
                                       cpu_seconds, histogram, quantile, start_profiles, stop_profiles,
                                       tree_cpu_seconds)
from hack.bench_master_flat import tree_rss_kib  # noqa: E402
from hack.benchlib import APPS_NS, Cluster, rss_kib, wait_ready  # noqa: E402
from velashard.apis import labels  # noqa: E402
from velashard.apis.oam import APPLICATION_REVISIONS, APPLICATIONS, RESOURCE_TRACKERS  # noqa: E402
from velashard.cli.manager import duration  # noqa: E402
from velashard.kube.resources import (CONFIGMAPS, DEPLOYMENTS, EVENTS, LEASES, NAMESPACES, PODS,  # noqa: E402
                                      SERVICES, Resource)

SHARD, IDLE = "shard-0", "shard-1"
REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet")
INGRESSES = Resource("networking.k8s.io", "v1", "ingresses", "Ingress")
# What grows with the apps in the API server: each app, its revision and tracker, its five objects, and what the
# simulated controllers make of its two Deployments (ReplicaSets, pods), and Events.
HELD = (APPLICATIONS, APPLICATION_REVISIONS, RESOURCE_TRACKERS, DEPLOYMENTS, SERVICES, INGRESSES, CONFIGMAPS,
        REPLICASETS, PODS, EVENTS, LEASES)
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
# Created, but questions rather than writes: nothing is stored.
QUESTIONS = ("selfsubjectaccessreviews", "selfsubjectreviews", "subjectaccessreviews", "tokenreviews")


def objects_held(cluster: Cluster) -> dict[str, int]:
    """How many objects of each growing kind the API server holds (a list of one item and its remaining count)."""
    held = {}
    for res in HELD:
        page = cluster.client.list(res, None, None, None, 1)
        held[res.plural] = len(page.get("items") or []) + int(page["metadata"].get("remainingItemCount") or 0)
    return held


def controller_of(record: dict) -> str:
    return record.get("userAgent", "").split("shard=")[-1].rstrip(")")


def requests_per_minute(cluster: Cluster, window: float) -> dict[str, dict]:
    """Every controller's requests over `window` seconds of steady state, per minute and by verb."""
    _, seq = audit_since(cluster, 1 << 62)
    time.sleep(window)
    records, _ = audit_since(cluster, seq)
    out: dict[str, dict] = {}
    for name in sorted({controller_of(r) for r in records}):
        mine = [r for r in records if controller_of(r) == name and r.get("resource")]
        out[name] = {"per_minute": round(len(mine) * 60 / window, 1), "by_verb": by_verb(mine, 1)}
    return out


def histogram_delta(before: dict[float, float], after: dict[float, float]) -> dict[float, float]:
    return {bound: value - before.get(bound, 0.0) for bound, value in after.items()}


def grow(cluster: Cluster, tracker: AppTracker, done: int, size: int, args: argparse.Namespace,
         profile: bool, api_baseline_kib: int) -> dict:
    """Add apps `done`..`size`, wait until all run, and measure."""
    shard, master = cluster.controllers[SHARD], cluster.controllers["master"]
    pids = {"shard": shard.proc.pid, "master": master.proc.pid, "apiserver": cluster.server.proc.pid,
            "idle_shard": cluster.controllers[IDLE].proc.pid}
    added = size - done
    _, seq = audit_since(cluster, 1 << 62)
    durations_before = histogram(shard, "velashard_reconcile_duration_seconds")
    waits_before = histogram(shard, "velashard_workqueue_queue_duration_seconds")
    reconciles_before = shard.metric("velashard_reconcile_total")
    gc_before = shard.metric("velashard_gc_seconds_total")
    profiles = start_profiles(os.path.join(args.profile, str(size)), {k: v for k, v in pids.items()
                                                                      if k != "idle_shard"}) if profile else []
    cpu_before = {name: tree_cpu_seconds(pid) for name, pid in pids.items()}
    load_before = os.getloadavg()
    first = create_apps(cluster, size, start=done)
    created = time.monotonic() - first
    running = tracker.wait(lambda: tracker.running() >= size, args.timeout)
    seconds = time.monotonic() - first
    cpu = {name: round(tree_cpu_seconds(pid) - cpu_before[name], 1) for name, pid in pids.items()}
    stop_profiles(profiles)
    records, _ = audit_since(cluster, seq)
    records = [r for r in records if r.get("resource")]
    durations = histogram_delta(durations_before, histogram(shard, "velashard_reconcile_duration_seconds"))
    waits = histogram_delta(waits_before, histogram(shard, "velashard_workqueue_queue_duration_seconds"))
    result = {
        "apps": size, "added": added, "all_running": running, "running": tracker.running(),
        "creation_seconds": round(created, 1), "seconds_to_all_running": round(seconds, 1),
        "load_before": [round(x, 1) for x in load_before], "load_after": [round(x, 1) for x in os.getloadavg()],
        "cpu_seconds": cpu, "cpu_seconds_per_app": {name: round(v / added, 4) for name, v in cpu.items()},
        "reconciles_per_app": round((shard.metric("velashard_reconcile_total") - reconciles_before) / added, 2),
        "shard_gc_share": round((shard.metric("velashard_gc_seconds_total") - gc_before) / max(cpu["shard"], 0.1), 3),
        "reconcile_seconds": {"p50": quantile(durations, 0.5), "p99": quantile(durations, 0.99)},
        "queue_wait_seconds": {"p50": quantile(waits, 0.5), "p99": quantile(waits, 0.99)},
        "api_requests_per_app": round(len(records) / added, 2),
        "api_requests_per_app_by_verb": by_verb(records, added)}
    time.sleep(args.settle)
    shard_rss = shard.rss_kib()
    result["shard"] = {"rss_mib": round(shard_rss / 1024, 1), "baseline_mib": round(shard.baseline_kib / 1024, 1),
                       "kib_per_app": round((shard_rss - shard.baseline_kib) / size, 2),
                       "apps": app_shards(cluster).get(SHARD, 0)}
    result["idle_shard_rss_mib"] = round(cluster.controllers[IDLE].rss_kib() / 1024, 1)
    steady = requests_per_minute(cluster, args.window)
    result["master"] = {"rss_mib": round(tree_rss_kib(master.proc.pid) / 1024, 1),
                        "requests_per_minute": (steady.get("master") or {}).get("per_minute", 0.0),
                        "requests_by_verb": (steady.get("master") or {}).get("by_verb", {})}
    result["shard"]["steady_requests_per_minute"] = (steady.get(SHARD) or {}).get("per_minute", 0.0)
    held = objects_held(cluster)
    api_rss = rss_kib(cluster.server.proc.pid)
    result["apiserver"] = {"rss_mib": round(api_rss / 1024, 1), "objects": sum(held.values()), "by_kind": held,
                           "bytes_per_object": round((api_rss - api_baseline_kib) * 1024
                                                     / max(1, sum(held.values())))}
    return result


def writes_of(records: list[dict]) -> list[dict]:
    return [r for r in records if r["verb"] in WRITE_VERBS and r.get("code", 0) < 400 and r.get("resource")
            and r["resource"] not in QUESTIONS]


def updates(cluster: Cluster, tracker: AppTracker, apps: int, args: argparse.Namespace) -> dict:
    """Continuous updates at the last size, with what each update cost every process and how many reconciles of
    shard-0 it took (py-spy profiles in DIR/updates with `--profile`)."""
    shard = cluster.controllers[SHARD]
    pids = {"shard": shard.proc.pid, "master": cluster.controllers["master"].proc.pid,
            "apiserver": cluster.server.proc.pid}
    profiles = start_profiles(os.path.join(args.profile, "updates"), pids) if args.profile else []
    cpu_before = {name: tree_cpu_seconds(pid) for name, pid in pids.items()}
    reconciles_before = shard.metric("velashard_reconcile_total")
    result = continuous_updates(cluster, tracker, apps, args.update_share, args.update_minutes, args.update_grace)
    stop_profiles(profiles)
    cpu = {name: round(tree_cpu_seconds(pid) - cpu_before[name], 1) for name, pid in pids.items()}
    sent = max(1, result["updates"])
    result["shard_cpu_seconds"] = cpu["shard"]
    result["cpu_ms_per_update"] = {name: round(seconds * 1000 / sent, 1) for name, seconds in cpu.items()}
    result["reconciles_per_update"] = round((shard.metric("velashard_reconcile_total") - reconciles_before) / sent, 2)
    result["load"] = [round(x, 1) for x in os.getloadavg()]
    return result


def restart(cluster: Cluster, args: argparse.Namespace) -> dict:
    """Kill shard-0 and start it again at once; seconds until it has reconciled all its apps, and the writes."""
    owned = app_shards(cluster).get(SHARD, 0)
    _, seq = audit_since(cluster, 1 << 62)
    others = {"master": cluster.controllers["master"].proc.pid, "apiserver": cluster.server.proc.pid}
    directory = os.path.join(args.profile, "restart") if args.profile else None
    profiles = start_profiles(directory, {"apiserver": others["apiserver"]}) if directory else []
    cpu_before = {name: tree_cpu_seconds(pid) for name, pid in others.items()}
    killed = time.monotonic()
    cluster.kill(SHARD)
    cluster.shard_pod(SHARD, False, terminated=True)
    ctl = cluster.start(SHARD, *shard_flags(args), shard=SHARD, wait=False)
    if directory:
        profiles += start_profiles(directory, {"shard": ctl.proc.pid})
    wait_ready(ctl.health, args.timeout)  # its pod turns Ready once it serves /readyz, as a kubelet would say
    cluster.shard_pod(SHARD, True)
    ready = time.monotonic() - killed
    done = wait_until(lambda: ctl.metric("velashard_applications_reconciled") >= owned, args.timeout)
    seconds = time.monotonic() - killed
    cpu = cpu_seconds(ctl.proc.pid)
    reconciles = ctl.metric("velashard_reconcile_total")
    cpu_others = {name: round(tree_cpu_seconds(pid) - cpu_before[name], 1) for name, pid in others.items()}
    stop_profiles(profiles)
    time.sleep(args.settle)
    records, _ = audit_since(cluster, seq)
    writes = writes_of(records)
    other = Counter(f'{controller_of(r)} {r["verb"]} {r["resource"]}'
                    f'{"/" + r["subresource"] if r.get("subresource") else ""}'
                    for r in writes if r["resource"] not in ("leases", "events"))
    return {"apps": owned, "seconds_until_ready": round(ready, 1),
            "seconds_until_all_reconciled": round(seconds, 1) if done else None,
            "cpu_seconds_until_reconciled": round(cpu, 1),
            "cpu_seconds_per_app": {"shard": round(cpu / max(1, owned), 4),
                                    **{name: round(v / max(1, owned), 4) for name, v in cpu_others.items()}},
            "cpu_seconds_others": cpu_others, "reconciles_per_app": round(reconciles / max(1, owned), 2), "load": [round(x, 1) for x in os.getloadavg()],
            "apps_moved": owned - app_shards(cluster).get(SHARD, 0),
            "writes_other_than_leases_and_events": sum(other.values()), "writes_by_kind": dict(other.most_common()),
            "lease_writes": sum(r["resource"] == "leases" for r in writes),
            "event_writes": sum(r["resource"] == "events" for r in writes),
            "requests": len([r for r in records if r.get("resource")])}


def failover(cluster: Cluster, tracker: AppTracker, args: argparse.Namespace) -> dict:
    """Kill shard-0 for good: seconds until every app is labelled for the idle shard and reconciled there."""
    owned = app_shards(cluster).get(SHARD, 0)
    idle = cluster.controllers[IDLE]
    _, seq = audit_since(cluster, 1 << 62)
    pids = {"idle_shard": idle.proc.pid, "master": cluster.controllers["master"].proc.pid,
            "apiserver": cluster.server.proc.pid}
    cpu_before = {name: tree_cpu_seconds(pid) for name, pid in pids.items()}
    killed = time.monotonic()
    cluster.kill(SHARD)
    cluster.shard_pod(SHARD, False, terminated=True)
    moved_at = reconciled_at = None
    deadline = killed + args.timeout
    while time.monotonic() < deadline and reconciled_at is None:
        if moved_at is None and tracker.count_on(IDLE) >= owned:
            moved_at = time.monotonic() - killed
        if moved_at is not None and idle.metric("velashard_applications_reconciled") >= owned:
            reconciled_at = time.monotonic() - killed
        time.sleep(0.5)
    cpu = {name: round(tree_cpu_seconds(pid) - cpu_before[name], 1) for name, pid in pids.items()}
    time.sleep(args.settle)
    records, _ = audit_since(cluster, seq)
    writes = writes_of(records)
    grace = duration(args.grace)
    return {"apps": owned, "grace_seconds": grace,
            "seconds_until_all_moved": round(moved_at, 1) if moved_at is not None else None,
            "seconds_until_all_reconciled": round(reconciled_at, 1) if reconciled_at is not None else None,
            "seconds_after_grace_until_all_reconciled": round(reconciled_at - grace, 1)
            if reconciled_at is not None else None,
            "running": tracker.running(), "cpu_seconds": cpu, "load": [round(x, 1) for x in os.getloadavg()],
            "writes": len(writes), "writes_per_app": round(len(writes) / max(1, owned), 2),
            "writes_per_app_by_verb": by_verb(writes, max(1, owned))}


def shard_flags(args: argparse.Namespace) -> list[str]:
    """The shards keep their caches in a file across restarts (each its own, by shard id) with --cache-dir."""
    return ["--cache-dir", args.cache_dir] if args.cache_dir else []


def flatness(sizes: list[dict], path: tuple[str, ...]) -> float | None:
    """The last size's figure over the first's."""
    def value(entry: dict) -> float:
        for key in path:
            entry = entry[key]
        return entry  # type: ignore[return-value]
    first, last = value(sizes[0]), value(sizes[-1])
    return round(last / first, 3) if first else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="4000,12000,40000", help="apps on the one shard, in growing order")
    parser.add_argument("--window", type=float, default=60.0, help="seconds of steady state to count requests")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds once all apps run before memory")
    parser.add_argument("--update-share", type=float, default=0.1, help="share of the apps updated per minute")
    parser.add_argument("--update-minutes", type=int, default=5, help="0: no continuous updates")
    parser.add_argument("--update-grace", type=float, default=120.0)
    parser.add_argument("--restart", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--failover", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--grace", default="60s", help="the master's --orphan-grace-period")
    parser.add_argument("--timeout", type=float, default=7200.0)
    parser.add_argument("--profile", metavar="DIR", help="py-spy raw profiles while the last size converges and during the restart")
    parser.add_argument("--cache-dir", default="", metavar="DIR",
                        help="where the shards' --cache-dir is made (a directory per run; a restart then finds their caches)")
    args = parser.parse_args()
    if args.cache_dir:  # a directory of this run's own: another run's snapshot (another tree's) is not this cluster's
        os.makedirs(args.cache_dir, exist_ok=True)
        args.cache_dir = tempfile.mkdtemp(prefix="shard-scale-", dir=args.cache_dir)
    sizes = [int(s) for s in args.sizes.split(",")]
    result: dict = {"benchmark": "shard-scale", "cores": os.cpu_count(), "commit": _commit(), "sizes": sizes,
                    "load_at_start": [round(x, 1) for x in os.getloadavg()]}
    with Cluster() as cluster:
        cluster.client.patch(NAMESPACES, APPS_NS, {"metadata": {"labels": {labels.SHARD_ID: SHARD}}})
        cluster.start_master("--enable-leader-election", "--orphan-grace-period", args.grace)
        for name in (SHARD, IDLE):
            cluster.start(name, *shard_flags(args), shard=name)
        cluster.settle(5.0)
        api_baseline_kib = rss_kib(cluster.server.proc.pid)
        tracker = AppTracker(cluster.client, APPS_NS).start()
        per_size, done = [], 0
        for size in sizes:
            per_size.append(grow(cluster, tracker, done, size, args, bool(args.profile) and size == sizes[-1],
                                 api_baseline_kib))
            print(json.dumps({"size": per_size[-1]}), file=sys.stderr, flush=True)  # kept if a later step fails
            done = size
        result["per_size"] = per_size
        if args.update_minutes:
            result["continuous_updates"] = updates(cluster, tracker, done, args)
            print(json.dumps({"continuous_updates": result["continuous_updates"]}), file=sys.stderr, flush=True)
        if args.restart:
            result["restart"] = restart(cluster, args)
            print(json.dumps({"restart": result["restart"]}), file=sys.stderr, flush=True)
        if args.failover:
            result["failover"] = failover(cluster, tracker, args)
        tracker.stop()
    if args.cache_dir:
        shutil.rmtree(args.cache_dir, ignore_errors=True)
    first, last = per_size[0], per_size[-1]
    result["summary"] = {
        "kib_per_app_first_last": [first["shard"]["kib_per_app"], last["shard"]["kib_per_app"]],
        "kib_per_app_ratio": flatness(per_size, ("shard", "kib_per_app")),
        "cpu_seconds_per_app_first_last": [first["cpu_seconds_per_app"]["shard"], last["cpu_seconds_per_app"]["shard"]],
        "cpu_per_app_ratio": flatness(per_size, ("cpu_seconds_per_app", "shard")),
        "master_rss_ratio": flatness(per_size, ("master", "rss_mib")),
        "master_requests_per_minute_ratio": flatness(per_size, ("master", "requests_per_minute"))}
    summary = result["summary"]
    goals = {"all_running": all(s["all_running"] for s in per_size),
             "kib_per_app_at_most_25": last["shard"]["kib_per_app"] <= 25,
             "kib_per_app_flat_15pct": (summary["kib_per_app_ratio"] or 0) <= 1.15,
             "cpu_per_app_flat_15pct": (summary["cpu_per_app_ratio"] or 0) <= 1.15,
             "master_rss_flat_10pct": (summary["master_rss_ratio"] or 0) <= 1.10,
             "master_requests_flat_10pct": (summary["master_requests_per_minute_ratio"] or 0) <= 1.10}
    if "continuous_updates" in result:
        goals["update_p99_at_most_5s"] = (result["continuous_updates"]["p99_seconds"] or 1e9) <= 5
    if "restart" in result:
        goals["restart_within_120s"] = (result["restart"]["seconds_until_all_reconciled"] or 1e9) <= 120
        goals["restart_no_writes_but_leases_and_events"] = result["restart"]["writes_other_than_leases_and_events"] == 0
    if "failover" in result:
        goals["failover_within_300s"] = (result["failover"]["seconds_until_all_reconciled"] or 1e9) <= 300
    result["goals"] = goals
    result["load_at_end"] = [round(x, 1) for x in os.getloadavg()]
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
