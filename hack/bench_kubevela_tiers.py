"""KubeVela's load-test tiers, printing one JSON object.

KubeVela sizes its controller by the apps of its load test (3,000 apps on 0.5 core / 1 GiB, 6,000 on 1 core /
2 GiB, 12,000 on 2 cores / 4 GiB). Its load-test app has two components and five objects: a webservice with
a scaler, a sidecar and a gateway (a Deployment, and the gateway's Service and Ingress) and a worker with a
scaler and a ConfigMap created by the storage trait (a Deployment and a ConfigMap). This script creates
`--apps` such apps from 4 threads against `velashard apiserver --simulate-workloads`, under a master and
`--shards` slave shards (each a process; apps placed by the master's webhook), then on a fresh API server
under one unsharded controller (with its webhooks, as the chart runs it: both setups record every app's
author), and reports for each setup:

- seconds from the first create until every app runs, apps/s, and how many ran at each 10-second mark;
- reconciles per app (the controllers' velashard_reconcile_total) and API requests per app (the API
  server's audit log, by verb and resource), reconcile p50/p99 and work-queue wait p50/p99 (histograms);
- resident memory of every process (the master with its webhook server), KiB per app on the fullest shard
  (growth over its idle baseline / its apps) and the API server's;
- continuous updates as in KubeVela v1.8's load test: for `--update-minutes` minutes, `--update-share` of
  the apps are updated every minute (evenly spread; a new image of the webservice); p50/p99 seconds from
  the update to the app's status showing the new generation running.

With `--restart` (sharded setup), once the apps run every slave shard is killed (SIGKILL, its pod reported
terminated, as a kubelet would) and started again at once, with leader election as the chart runs it (so the
new process waits out its predecessor's Lease); reported: seconds from the kill until each new process holds
its Lease and has reconciled every app it owns (`velashard_applications_reconciled`), and the writes every
controller made meanwhile and in the `--settle` seconds after, from the audit log (wanted: none but Leases and
Events; a moved app would show as the master's writes).

`sharding_ratio` is the sharded setup's apps/s over the unsharded one's. `--profile DIR` records every
process with py-spy (`-f raw --threads --gil`: where each holds the GIL) while the apps are created and
converge.

    nice -n 19 python hack/bench_kubevela_tiers.py --apps 3000 [--shards 3] [--setups sharded,unsharded] [--restart]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hack.apptracker import AppTracker  # noqa: E402
from hack.bench_apiserver import _commit, percentile, request  # noqa: E402
from hack.bench_master_flat import tree_rss_kib  # noqa: E402
from hack.benchlib import APPS_NS, Cluster, Controller, rss_kib  # noqa: E402
from velashard.apis import labels  # noqa: E402
from velashard.apis.oam import APPLICATIONS  # noqa: E402

APPS_PATH = f"/apis/core.oam.dev/v1beta1/namespaces/{APPS_NS}/applications"
PUBLISHED = {3000: "0.5 core / 1 GiB", 6000: "1 core / 2 GiB", 12000: "2 cores / 4 GiB"}


def kubevela_app(i: int, version: int = 1) -> dict:
    """KubeVela's load-test app in its shape (two components, five traits, five objects), in our words."""
    web = {"name": f"web-{i}", "type": "webservice",
           "properties": {"image": f"crccheck/hello-world:v{version}", "port": 8000},
           "traits": [{"type": "sidecar", "properties": {"name": "sidecar", "image": "busybox",
                                                         "cmd": ["sleep", "1000000"]}},
                      {"type": "scaler", "properties": {"replicas": 3}},
                      {"type": "gateway", "properties": {"domain": f"app-{i}.example.com", "http": {"/": 8000}}}]}
    worker = {"name": f"worker-{i}", "type": "worker", "properties": {"image": "crccheck/hello-world"},
              "traits": [{"type": "scaler", "properties": {"replicas": 3}},
                         {"type": "storage", "properties": {"configMap": [{
                             "name": f"data-{i}", "mountPath": "/data", "readOnly": True,
                             "data": {"key1": "value1", "key2": "value2"}}]}}]}
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": f"app-{i}", "namespace": APPS_NS}, "spec": {"components": [web, worker]}}


def create_apps(cluster: Cluster, count: int, threads: int = 4, start: int = 0) -> float:
    """Create apps `start`..`count` from `threads` connections; the monotonic time of the first create."""
    started = time.monotonic()

    def worker(indices: range) -> None:
        conn = http.client.HTTPConnection(cluster.host, cluster.port, timeout=120)
        for i in indices:
            code, body = request(conn, cluster.token, "POST", APPS_PATH, kubevela_app(i))
            if code != 201:
                raise RuntimeError(f"creating app-{i} answered {code}: {body[:200]!r}")

    workers = [threading.Thread(target=worker, args=(range(start + t, count, threads),)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return started


def audit_since(cluster: Cluster, since: int) -> tuple[list[dict], int]:
    req = urllib.request.Request(f"http://{cluster.host}:{cluster.port}/debug/audit?since={since}",
                                 headers={"Authorization": f"Bearer {cluster.token}"})
    with urllib.request.urlopen(req, timeout=300) as resp:
        body = json.loads(resp.read())
    records = [r for r in body["items"] if "shard=" in r.get("userAgent", "")
               and "shard=bench" not in r.get("userAgent", "")]
    return records, body["lastSeq"]


def by_verb(records: list[dict], per: int) -> dict[str, float]:
    kinds = Counter(f'{r["verb"]} {r["resource"]}{"/" + r["subresource"] if r.get("subresource") else ""}'
                    for r in records if r.get("resource"))
    return {k: round(v / per, 3) for k, v in kinds.most_common()}


def histogram(ctl: Controller, metric: str) -> dict[float, float]:
    """Cumulative bucket counts of a histogram, summed over its label sets."""
    conn = http.client.HTTPConnection("127.0.0.1", ctl.metrics, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    buckets: dict[float, float] = {}
    for le, value in re.findall(rf'^{metric}_bucket{{[^}}]*le="([^"]+)"[^}}]*}} ([0-9.e+-]+)$', text, re.M):
        bound = float("inf") if le == "+Inf" else float(le)
        buckets[bound] = buckets.get(bound, 0.0) + float(value)
    return buckets


def quantile(buckets: dict[float, float], q: float) -> float | None:
    """Prometheus' histogram_quantile: linear within the bucket that holds the q-th observation."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] == 0:
        return None
    rank, lower, below = q * buckets[bounds[-1]], 0.0, 0.0
    for bound in bounds:
        if buckets[bound] >= rank:
            if bound == float("inf"):
                return lower
            inside = buckets[bound] - below
            return round(lower + (bound - lower) * ((rank - below) / inside if inside else 1.0), 4)
        lower, below = bound, buckets[bound]
    return None


def merged(controllers: list[Controller], metric: str) -> dict[float, float]:
    total: dict[float, float] = {}
    for ctl in controllers:
        for bound, value in histogram(ctl, metric).items():
            total[bound] = total.get(bound, 0.0) + value
    return total


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process and its reaped children (gunicorn's worker is a live child: the
    master's figure counts its own process; see `tree_cpu_seconds`)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rpartition(")")[2].split()
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    children = [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    return cpu_seconds(pid) + sum(tree_cpu_seconds(c) for c in children if os.path.exists(f"/proc/{c}"))


def start_profiles(directory: str, pids: dict[str, int]) -> list[subprocess.Popen]:
    os.makedirs(directory, exist_ok=True)
    return [subprocess.Popen(["py-spy", "record", "-f", "raw", "--threads", "--gil", "--nonblocking", "--subprocesses",
                              "-r", "20", "-o", os.path.join(directory, f"{name}.txt"), "--pid", str(pid)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for name, pid in pids.items()]


def stop_profiles(profiles: list[subprocess.Popen]) -> None:
    for proc in profiles:
        proc.send_signal(2)  # py-spy writes its file on SIGINT
    for proc in profiles:
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()


def app_shards(cluster: Cluster) -> Counter:
    items, _ = cluster.client.list_all(APPLICATIONS, APPS_NS, transform=lambda o: {"metadata": {
        "labels": (o["metadata"].get("labels") or {})}})
    return Counter((a["metadata"]["labels"]).get(labels.SCHEDULED_SHARD_ID) for a in items)


def continuous_updates(cluster: Cluster, tracker: AppTracker, apps: int, share: float, minutes: int,
                       grace: float) -> dict:
    """Every minute, `share` of the apps get a new webservice image, evenly spread over the minute."""
    per_minute = max(1, int(apps * share))
    interval = 60.0 / per_minute
    conn = http.client.HTTPConnection(cluster.host, cluster.port, timeout=120)
    started, sent, errors_seen = time.monotonic(), 0, 0
    for n in range(per_minute * minutes):
        due = started + n * interval
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        index = n % apps
        body = {"spec": kubevela_app(index, version=2 + n // apps)["spec"]}
        payload = json.dumps(body).encode()
        t0 = time.monotonic()
        conn.request("PATCH", f"{APPS_PATH}/app-{index}", payload, {
            "Content-Type": "application/merge-patch+json", "Authorization": f"Bearer {cluster.token}"})
        resp = conn.getresponse()
        answer = resp.read()
        if resp.status != 200:
            errors_seen += 1
            continue
        sent += 1
        tracker.expect(f"app-{index}", json.loads(answer)["metadata"]["generation"], t0)
    tracker.wait(lambda: tracker.pending() == 0, grace)
    latencies = list(tracker.latencies.values())
    return {"updates_per_minute": per_minute, "minutes": minutes, "updates": sent, "update_errors": errors_seen,
            "seen_running": len(latencies), "not_seen_within_grace": tracker.pending(),
            "p50_seconds": round(percentile(latencies, 0.5), 3) if latencies else None,
            "p99_seconds": round(percentile(latencies, 0.99), 3) if latencies else None,
            "max_seconds": round(max(latencies), 3) if latencies else None}


WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
QUESTIONS = ("selfsubjectaccessreviews", "selfsubjectreviews", "subjectaccessreviews", "tokenreviews")


def restart_shards(cluster: Cluster, shards: list[str], settle: float, timeout: float) -> dict:
    """Kill every slave shard and start it again at once; seconds until each holds its Lease and has reconciled
    all its apps, and what every controller wrote meanwhile."""
    owned = app_shards(cluster)
    _, seq = audit_since(cluster, 1 << 62)
    killed = time.monotonic()
    for shard in shards:
        cluster.kill(shard)
        cluster.shard_pod(shard, False, terminated=True)
    for shard in shards:
        cluster.start(shard, "--enable-leader-election", shard=shard)  # Ready at once, as a standby
    back: dict[str, float] = {}
    while len(back) < len(shards) and time.monotonic() - killed < timeout:
        for shard in shards:
            ctl = cluster.controllers[shard]
            if shard not in back and ctl.metric("velashard_leader") == 1 \
                    and ctl.metric("velashard_applications_reconciled") >= owned.get(shard, 0):
                back[shard] = round(time.monotonic() - killed, 1)
        time.sleep(0.5)
    cpu = {shard: round(cpu_seconds(cluster.controllers[shard].proc.pid), 1) for shard in shards}
    time.sleep(settle)
    records, _ = audit_since(cluster, seq)
    writes = [r for r in records if r["verb"] in WRITE_VERBS and r.get("code", 0) < 400]
    other = Counter(f'{r["userAgent"].split("shard=")[1].rstrip(")")} {r["verb"]} {r["resource"]}'
                    f'{"/" + r["subresource"] if r.get("subresource") else ""}'
                    for r in writes if r["resource"] not in ("leases", "events") + QUESTIONS)
    moved = sum(n for shard, n in (owned - app_shards(cluster)).items() if shard is not None)
    return {"shards": len(shards), "apps": dict(owned), "seconds_until_reconciled": back,
            "seconds_until_all_reconciled": max(back.values()) if len(back) == len(shards) else None,
            "cpu_seconds_until_reconciled": cpu, "load_during": os.getloadavg(),
            "apps_moved": moved, "writes_other_than_leases_and_events": sum(other.values()),
            "writes_by_kind": dict(other.most_common()),
            "lease_writes": sum(r["resource"] == "leases" for r in writes),
            "event_writes": sum(r["resource"] == "events" for r in writes),
            "requests": len([r for r in records if r.get("resource")])}


def run_setup(args: argparse.Namespace, sharded: bool) -> dict:
    result: dict = {"setup": f"master + {args.shards} shards" if sharded else "one unsharded controller"}
    with Cluster() as cluster:
        if sharded:
            shards = [f"shard-{i}" for i in range(args.shards)]
            cluster.start_master()
            workers = [cluster.start(s, shard=s) for s in shards]
        else:
            workers = [cluster.start_unsharded() if args.unsharded_webhook else cluster.start("unsharded")]
        cluster.settle(5.0)
        tracker = AppTracker(cluster.client, APPS_NS).start()
        seq = audit_since(cluster, 1 << 62)[1]
        pids = {name: ctl.proc.pid for name, ctl in cluster.controllers.items()}
        pids["apiserver"] = cluster.server.proc.pid
        profiles = start_profiles(os.path.join(args.profile, "sharded" if sharded else "unsharded"), pids) \
            if args.profile else []
        cpu_before = {name: tree_cpu_seconds(pid) for name, pid in pids.items()}
        progress: list[tuple[float, int]] = []
        sampling = threading.Event()

        def sample() -> None:
            t0 = time.monotonic()
            while not sampling.wait(10.0):
                progress.append((round(time.monotonic() - t0), tracker.running()))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        first = create_apps(cluster, args.apps)
        created_after = time.monotonic() - first
        done = tracker.wait(lambda: tracker.running() >= args.apps, args.timeout)
        seconds = time.monotonic() - first
        sampling.set()
        result["cpu_seconds_until_all_running"] = {name: round(tree_cpu_seconds(pid) - cpu_before[name], 1)
                                                  for name, pid in pids.items()}
        stop_profiles(profiles)
        if not done:
            result["timed_out"] = True
        records, seq = audit_since(cluster, seq)
        reconciles = sum(c.metric("velashard_reconcile_total") for c in workers)
        result.update({
            "apps": args.apps, "creation_seconds": round(created_after, 1), "running": tracker.running(),
            "seconds_to_all_running": round(seconds, 1), "apps_per_second": round(tracker.running() / seconds, 2),
            "progress_running_every_10s": progress,
            "reconciles_per_app": round(reconciles / args.apps, 2),
            "api_requests_per_app": round(len([r for r in records if r.get("resource")]) / args.apps, 2),
            "api_requests_per_app_by_verb": by_verb(records, args.apps)})
        durations = merged(workers, "velashard_reconcile_duration_seconds")
        waits = merged(workers, "velashard_workqueue_queue_duration_seconds")
        result["reconcile_seconds"] = {"p50": quantile(durations, 0.5), "p99": quantile(durations, 0.99)}
        result["queue_wait_seconds"] = {"p50": quantile(waits, 0.5), "p99": quantile(waits, 0.99)}
        time.sleep(args.settle)
        counts = app_shards(cluster)
        memory: dict = {}
        for name, ctl in cluster.controllers.items():
            apps_here = args.apps if not sharded else counts.get(name, 0)
            rss = tree_rss_kib(ctl.proc.pid) if name == "master" else ctl.rss_kib()
            memory[name] = {"rss_kib": rss, "baseline_kib": ctl.baseline_kib, "apps": apps_here}
            if apps_here:
                memory[name]["kib_per_app"] = round((ctl.rss_kib() - ctl.baseline_kib) / apps_here, 2)
        result["memory"] = memory
        result["controllers_rss_mib"] = round(sum(m["rss_kib"] for m in memory.values()) / 1024, 1)
        result["fullest_worker_kib_per_app"] = max(memory[c.name].get("kib_per_app", 0) for c in workers)
        result["apiserver_rss_mib"] = round(rss_kib(cluster.server.proc.pid) / 1024, 1)
        if args.update_minutes:
            profiles = start_profiles(os.path.join(args.profile, ("sharded" if sharded else "unsharded") + "-updates"),
                                      pids) if args.profile else []
            cpu_before = {name: tree_cpu_seconds(pid) for name, pid in pids.items()}
            result["continuous_updates"] = continuous_updates(cluster, tracker, args.apps, args.update_share,
                                                              args.update_minutes, args.update_grace)
            result["continuous_updates"]["cpu_seconds"] = {name: round(tree_cpu_seconds(pid) - cpu_before[name], 1)
                                                           for name, pid in pids.items()}
            stop_profiles(profiles)
            after = {n: tree_rss_kib(c.proc.pid) if n == "master" else c.rss_kib()
                     for n, c in cluster.controllers.items()}
            result["continuous_updates"]["rss_kib_after"] = after
            result["controllers_rss_mib_after_updates"] = round(sum(after.values()) / 1024, 1)
        if sharded and args.restart:
            tracker.wait(lambda: tracker.pending() == 0, args.update_grace)
            result["restart"] = restart_shards(cluster, shards, args.settle, args.timeout)
        tracker.stop()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=3000)
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--setups", default="sharded,unsharded", help="which setups, in this order")
    parser.add_argument("--no-unsharded-webhook", dest="unsharded_webhook", action="store_false",
                        help="the unsharded controller without its webhooks (the chart runs it with them)")
    parser.add_argument("--update-share", type=float, default=0.1, help="share of the apps updated per minute")
    parser.add_argument("--update-minutes", type=int, default=5, help="0: no continuous updates")
    parser.add_argument("--update-grace", type=float, default=120.0,
                        help="seconds to wait after the last update for its app to run it")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds once all apps run before memory")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--profile", metavar="DIR", help="py-spy raw profiles of every process into DIR")
    parser.add_argument("--restart", action="store_true",
                        help="sharded: then kill every slave shard and start it again; seconds until each has "
                             "reconciled its apps, and the writes made")
    args = parser.parse_args()
    result: dict = {"benchmark": "kubevela-tiers", "cores": os.cpu_count(), "commit": _commit(), "apps": args.apps,
                    "kubevela_published": PUBLISHED.get(args.apps), "load_at_start": os.getloadavg()}
    for setup in args.setups.split(","):
        result[setup] = run_setup(args, setup == "sharded")
        print(json.dumps({setup: result[setup]}), file=sys.stderr, flush=True)  # kept if a later setup fails
    if "sharded" in result and "unsharded" in result:
        result["sharding_ratio"] = round(result["sharded"]["apps_per_second"]
                                         / max(result["unsharded"]["apps_per_second"], 1e-9), 3)
    sharded = result.get("sharded") or {}
    result["goals"] = {"seconds_to_all_running_max": 600, "controllers_rss_mib_max": 512,
                       "fullest_shard_kib_per_app_max": 30, "update_p99_seconds_max": 5, "sharding_ratio_min": 1.3}
    result["load_at_end"] = os.getloadavg()
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
