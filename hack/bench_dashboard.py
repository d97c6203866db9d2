"""The dashboard at scale, printing one JSON object.

`--apps` of KubeVela's load-test apps (hack/bench_kubevela_tiers.py's: two components, five objects each) run
under a master and `--shards` shards against `velashard apiserver --simulate-workloads`; then `velashard
dashboard` runs as its own process with the admin's kubeconfig, and this script measures:

- how long the dashboard takes to list everything and serve (its /healthz);
- page latency, p50/p99 ms over `--requests` requests each: the fleet page, the apps page (every filter in turn,
  and pages deep in the list), and an app's page for a different app each time (each reads its tracker, its
  objects and its revisions as the user; goal: apps and app pages p99 <= 200 ms);
- the dashboard process's resident memory (goal < 150 MiB);
- every request it sends to the API server (the audit log, its User-Agent carries shard=dashboard) over
  `--window` seconds of steady state while no page is open: goal none but its watches (no request per app).

    nice -n 19 python hack/bench_dashboard.py --apps 12000 [--shards 2] [--window 60] [--requests 200]
                                              [--running-timeout 3600] [--quiet]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hack.apptracker import AppTracker  # noqa: E402
from hack.bench_apiserver import _commit, percentile  # noqa: E402
from hack.bench_kubevela_tiers import audit_since, create_apps  # noqa: E402
from hack.benchlib import APPS_NS, RUNTIME_NS, Cluster, free_port, rss_kib  # noqa: E402


def dashboard_requests(cluster: Cluster, since: int) -> tuple[list[dict], int]:
    req = urllib.request.Request(f"http://{cluster.host}:{cluster.port}/debug/audit?since={since}",
                                 headers={"Authorization": f"Bearer {cluster.token}"})
    with urllib.request.urlopen(req, timeout=300) as resp:
        body = json.loads(resp.read())
    return [r for r in body["items"] if "shard=dashboard" in r.get("userAgent", "")], body["lastSeq"]


def timed(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as resp:
        resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{url} answered {resp.status}")
    return (time.perf_counter() - started) * 1000


def latency(urls: list[str]) -> dict:
    times = [timed(u) for u in urls]
    return {"requests": len(times), "p50_ms": round(percentile(times, 0.5), 1), "p99_ms": round(percentile(times, 0.99), 1),
            "max_ms": round(max(times), 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=12000)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--window", type=float, default=60.0, help="seconds of steady state to audit")
    parser.add_argument("--requests", type=int, default=200, help="requests per page kind")
    parser.add_argument("--running-timeout", type=float, default=3600.0,
                        help="seconds to wait for every app to run before measuring (on a machine too busy for all "
                             "to run soon, a short one measures the dashboard among apps still converging, whose "
                             "status writes it follows meanwhile)")
    parser.add_argument("--quiet", action="store_true",
                        help="stop the controllers before the dashboard starts: nothing changes while it is measured "
                             "(a settled fleet's steady state, where the apps could not all run in time)")
    args = parser.parse_args()
    result: dict = {"commit": _commit(), "apps": args.apps, "shards": args.shards}
    with Cluster() as cluster:
        cluster.start_master()
        for i in range(args.shards):
            cluster.start(f"shard-{i}", shard=f"shard-{i}")
        tracker = AppTracker(cluster.client, APPS_NS).start()
        first = create_apps(cluster, args.apps)
        result["seconds_to_create"] = round(time.monotonic() - first, 1)
        if tracker.wait(lambda: tracker.running() >= args.apps, args.running_timeout):
            result["seconds_to_all_running"] = round(time.monotonic() - first, 1)
        result["running_when_the_dashboard_started"] = tracker.running()
        if args.quiet:
            for name in list(cluster.controllers):  # no status churn: the steady state of a settled fleet
                cluster.kill(name, signal.SIGTERM)
            result["controllers_stopped_before_measuring"] = True
        port = free_port()
        seq = dashboard_requests(cluster, 1 << 62)[1]
        started = time.monotonic()
        dash = subprocess.Popen([sys.executable, "-m", "velashard.cli.main", "dashboard", "--kubeconfig",
                                 cluster.kubeconfig, "--port", str(port), "--controller-namespace", RUNTIME_NS],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            base = dash.stdout.readline().split()[-1]
            cluster.wait_for(lambda: _ok(base + "healthz"), 600, "the dashboard to sync")
            result["dashboard_seconds_to_serve"] = round(time.monotonic() - started, 1)
            startup, seq = dashboard_requests(cluster, seq)
            result["dashboard_requests_at_start"] = dict(Counter(f'{r["verb"]} {r["resource"]}' for r in startup))
            time.sleep(5)  # the first watches' events settle
            seq = dashboard_requests(cluster, seq)[1]
            time.sleep(args.window)
            steady, seq = dashboard_requests(cluster, seq)
            result["steady_state"] = {"window_seconds": args.window, "requests": len(steady),
                                      "by_verb": dict(Counter(f'{r["verb"]} {r["resource"]}' for r in steady)),
                                      "other_than_watches": len([r for r in steady if r["verb"] != "watch"])}
            rng = random.Random(7)
            names = [f"app-{rng.randrange(args.apps)}" for _ in range(args.requests)]
            filters = ["", "shard=shard-0", f"namespace={APPS_NS}", "phase=running", "health=healthy", "q=app-11",
                       "shard=shard-1&health=healthy&page=40", "page=200", "q=nothing-matches"]
            timed(base)  # the first request of each kind loads its templates
            timed(base + "apps")
            timed(f"{base}app/{APPS_NS}/app-0")
            result["fleet_page"] = latency([base] * max(20, args.requests // 4))
            result["apps_page"] = latency([f"{base}apps?{filters[i % len(filters)]}" for i in range(args.requests)])
            result["app_page"] = latency([f"{base}app/{APPS_NS}/{n}" for n in names])
            result["moves_page"] = latency([base + "moves"] * max(20, args.requests // 4))
            pages, seq = dashboard_requests(cluster, seq)
            result["requests_per_app_page_view"] = round(len(pages) / args.requests, 2)
            result["dashboard_rss_mib"] = round(rss_kib(dash.pid) / 1024, 1)
            result["running_when_measured"] = tracker.running()
        finally:
            tracker.stop()
            dash.terminate()
            dash.wait(30)
    result["goals"] = {"apps_and_app_page_p99_ms_at_most_200": max(result["apps_page"]["p99_ms"],
                                                                   result["app_page"]["p99_ms"]) <= 200,
                       "rss_under_150_mib": result["dashboard_rss_mib"] < 150,
                       "no_request_but_watches_at_steady_state": result["steady_state"]["other_than_watches"] == 0}
    print(json.dumps(result, indent=2))
    return 0


def _ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status == 200
    except OSError:
        return False


if __name__ == "__main__":
    sys.exit(main())
