"""API cost benchmark, printing one JSON object.

A master and 2 slave shards (apps placed by the master's webhook) against the API server's audit log
(every controller process sends a User-Agent carrying shard=<id>; this script's own requests carry
shard=bench and are not counted). For `--apps` apps, then again once `--large` apps run (same processes):

- requests per new app: every controller request from the first app's creation until all run,
  divided by the apps created, by verb and resource; reads of the discovery documents (once per process,
  at its first reconcile) are counted apart;
- steady state: controller requests over `--window` seconds once all apps run and settled, per app per
  hour, how many are neither lease renewals nor re-watches (goal 0: nothing else is sent at steady state),
  and the ratio of total requests per minute between both sizes (goal <= 1.10). The default
  window, 300 s, is one informer watch timeout, so every informer's re-watch counts once at both sizes
  (a shorter window catches some of them at one size and not the other); below 120 s only for smoke
  tests. The fixed costs (lease renewals, the master's scheduling pass, re-watches) do not grow with
  apps: the marginal requests per app-hour between both sizes is the per-app cost;
- health latency: for `--probes` apps at once, a Deployment's status turns unavailable (as a
  kubelet would report it); p50/p99 seconds until its app's status shows the service unhealthy
  (goal p99 <= 2 s); then the Deployments recover;
- resident-memory growth per app on each shard over its idle baseline, at both sizes (goal <= 20 KiB,
  judged at the larger).

    python hack/bench_api_cost.py [--apps 300] [--large 3000] [--window 300] [--probes 20]
    python hack/bench_api_cost.py --apps 200 --large 0 --window 600    # the 10-minute steady state
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hack.bench_apiserver import _commit  # noqa: E402
from hack.benchlib import APPS_NS, Cluster  # noqa: E402
from velashard.apis import labels  # noqa: E402
from velashard.kube.resources import DEPLOYMENTS  # noqa: E402

SHARDS = ("shard-0", "shard-1")

# The six writes a new app needs (finalizer, revision, tracker, Deployment, two status writes) and the Scheduled
# Event of its placement (issue 45; KubeVela itself records several Events per app).
NEW_APP_MAX = 7


def audit(cluster: Cluster, since: int) -> dict:
    req = urllib.request.Request(f"http://{cluster.host}:{cluster.port}/debug/audit?since={since}",
                                 headers={"Authorization": f"Bearer {cluster.token}"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def last_seq(cluster: Cluster) -> int:
    return audit(cluster, 1 << 62)["lastSeq"]


def controller_requests(cluster: Cluster, since: int) -> list[dict]:
    """Audit records of the controller processes (master, its webhook server, shards) after `since`."""
    return [r for r in audit(cluster, since)["items"]
            if "shard=" in r.get("userAgent", "") and "shard=bench" not in r.get("userAgent", "")]


def by_kind(records: list[dict]) -> dict[str, int]:
    kinds = Counter(f'{r["verb"]} {r["resource"]}{"/" + r["subresource"] if r.get("subresource") else ""}'
                    for r in records)
    return dict(kinds.most_common())


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def steady(cluster: Cluster, apps: int, window: float) -> dict:
    start = last_seq(cluster)
    time.sleep(window)
    records = controller_requests(cluster, start)
    # What a steady state may cost: each process's shard Lease renewals and its informers' re-watches.
    other = [r for r in records if (r["verb"], r["resource"]) != ("update", "leases") and r["verb"] != "watch"]
    return {"apps": apps, "window_seconds": window, "requests": len(records),
            "requests_per_minute": round(len(records) * 60 / window, 2),
            "requests_per_app_hour": round(len(records) * 3600 / window / apps, 3),
            "by_verb_and_resource": by_kind(records),
            "other_than_lease_renewals_and_rewatches": len(other)}


def set_available(cluster: Cluster, name: str, available: bool) -> None:
    """Report the Deployment's pods as (un)available, as a kubelet would; the generation stays observed, so
    the simulated workload controller leaves it so."""
    live = cluster.client.get(DEPLOYMENTS, name, APPS_NS)
    replicas = (live.get("spec") or {}).get("replicas", 1)
    ready = replicas if available else 0
    status = dict(live.get("status") or {}, availableReplicas=ready, readyReplicas=ready)
    cluster.client.patch_status(DEPLOYMENTS, name, {"status": status}, APPS_NS)


def service_healthy(app: dict) -> bool | None:
    services = (app.get("status") or {}).get("services") or []
    return services[0].get("healthy") if services else None


def health_latency(cluster: Cluster, names: list[str], timeout: float) -> dict:
    """Seconds from each Deployment's status change to its app's status showing it, both ways."""
    result = {}
    for label, available in (("unhealthy", False), ("healthy_again", True)):
        changed: dict[str, float] = {}
        for name in names:
            set_available(cluster, name, available)
            changed[name] = time.monotonic()
        seen: dict[str, float] = {}
        deadline = time.monotonic() + timeout
        while len(seen) < len(names) and time.monotonic() < deadline:
            now = time.monotonic()
            for app in cluster.apps():
                name = app["metadata"]["name"]
                if name in changed and name not in seen and service_healthy(app) is available:
                    seen[name] = now - changed[name]
            time.sleep(0.05)
        latencies = list(seen.values())
        result[label] = {"probes": len(names), "seen": len(latencies),
                         "p50_seconds": round(percentile(latencies, 0.5), 3) if latencies else None,
                         "p99_seconds": round(percentile(latencies, 0.99), 3) if latencies else None}
    return result


def shard_memory(cluster: Cluster) -> dict:
    counts = Counter((a["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID) for a in cluster.apps())
    out = {}
    for shard in SHARDS:
        ctl = cluster.controllers[shard]
        grown = ctl.rss_kib() - ctl.baseline_kib
        out[shard] = {"apps": counts.get(shard, 0), "baseline_kib": ctl.baseline_kib, "growth_kib": grown,
                      "kib_per_app": round(grown / max(counts.get(shard, 0), 1), 2)}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=300)
    parser.add_argument("--large", type=int, default=3000, help="apps for the second size (0: skip it)")
    parser.add_argument("--window", type=float, default=300.0,
                        help="seconds of steady state counted (>= 120; default one watch timeout)")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds to wait once all apps run")
    parser.add_argument("--probes", type=int, default=20, help="apps whose Deployment turns unavailable")
    parser.add_argument("--latency-timeout", type=float, default=90.0)
    parser.add_argument("--timeout", type=float, default=1200)
    parser.add_argument("--shard-flags", default="", help="extra flags for the slave shards, space-separated")
    args = parser.parse_args()
    result: dict = {"benchmark": "api-cost", "cores": os.cpu_count(), "commit": _commit(), "shards": len(SHARDS),
                    "smoke_window": args.window < 120}
    extra = args.shard_flags.split()
    with Cluster() as cluster:
        cluster.start_master()
        for shard in SHARDS:
            cluster.start(shard, *extra, shard=shard)
        cluster.settle(5.0)

        start = last_seq(cluster)
        began = time.monotonic()
        cluster.create_apps(0, args.apps)
        cluster.wait_running(args.apps, args.timeout, set(SHARDS))
        records = controller_requests(cluster, start)
        discovery = [r for r in records if not r.get("resource")]
        records = [r for r in records if r.get("resource")]
        result["new_apps"] = {"apps": args.apps, "seconds_to_all_running": round(time.monotonic() - began, 1),
                              "requests": len(records), "requests_per_new_app": round(len(records) / args.apps, 2),
                              "discovery_requests_once_per_process": len(discovery),
                              "per_new_app_by_verb_and_resource": {
                                  k: round(v / args.apps, 2) for k, v in by_kind(records).items()}}
        time.sleep(args.settle)
        result["small"] = steady(cluster, args.apps, args.window)
        result["shard_memory"] = shard_memory(cluster)
        probes = [f"app-{i}" for i in range(0, args.apps, max(1, args.apps // max(args.probes, 1)))][:args.probes]
        result["health_latency"] = health_latency(cluster, probes, args.latency_timeout)

        if args.large > args.apps:
            cluster.create_apps(args.apps, args.large)
            cluster.wait_running(args.large, args.timeout, set(SHARDS))
            time.sleep(args.settle)
            result["large"] = steady(cluster, args.large, args.window)
            result["shard_memory_large"] = shard_memory(cluster)
            small, large = result["small"], result["large"]
            result["requests_per_minute_ratio"] = round(
                large["requests_per_minute"] / max(small["requests_per_minute"], 1e-9), 3)
            result["marginal_requests_per_app_hour"] = round(
                (large["requests_per_minute"] - small["requests_per_minute"]) * 60 / (args.large - args.apps), 3)

    worst_latency = result["health_latency"]["unhealthy"]["p99_seconds"]
    # Per-app growth is judged at the larger size, where a process's fixed costs weigh least.
    worst_kib = max(s["kib_per_app"] for s in result.get("shard_memory_large", result["shard_memory"]).values())
    result["goals"] = {"requests_per_new_app_max": NEW_APP_MAX, "requests_per_app_hour_max": 1,
                       "requests_per_minute_ratio_max": 1.10, "health_p99_seconds_max": 2,
                       "shard_kib_per_app_max": 20, "steady_other_than_lease_renewals_and_rewatches": 0}
    steady_other = sum(result[size]["other_than_lease_renewals_and_rewatches"] for size in ("small", "large")
                       if size in result)
    result["meets_goals"] = (result["new_apps"]["requests_per_new_app"] <= NEW_APP_MAX and steady_other == 0
                             and result["small"]["requests_per_app_hour"] <= 1
                             and result.get("requests_per_minute_ratio", 0) <= 1.10
                             and worst_latency is not None and worst_latency <= 2 and worst_kib <= 20)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
