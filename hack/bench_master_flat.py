"""Master cost benchmark, printing one JSON object.

A master (webhooks, background scheduler, leader election, as production runs it) and 2 slave
shards; at 300 apps and again at 3,000 (same processes, apps added), once everything runs and
settles: the resident memory of the master (with its webhook server process) and the API requests
the master's processes make per minute, counted from the API server's audit log over a window
(default 60 s). Goal: both ratios (3,000 / 300) at most 1.10.

    python hack/bench_master_flat.py [--small 300] [--large 3000] [--window 60]
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
from hack.benchlib import Cluster, rss_kib  # noqa: E402


def tree_rss_kib(pid: int) -> int:
    """Resident memory of a process and all its descendants (the master's webhook server is a child)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    # The command name may hold spaces: the parent pid follows its closing parenthesis.
                    parents[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    family, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, ppid in parents.items() if ppid == parent and child not in family]
        family.update(children)
        frontier.extend(children)
    return sum(rss_kib(p) for p in family if os.path.exists(f"/proc/{p}"))


def audit_seq(cluster: Cluster, since: int) -> dict:
    req = urllib.request.Request(f"http://{cluster.host}:{cluster.port}/debug/audit?since={since}",
                                 headers={"Authorization": f"Bearer {cluster.token}"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def measure(cluster: Cluster, pid: int, window: float) -> dict:
    start = audit_seq(cluster, 1 << 62)["lastSeq"]
    time.sleep(window)
    records = [r for r in audit_seq(cluster, start)["items"] if "shard=master" in r.get("userAgent", "")]
    kinds = Counter(f'{r["verb"]} {r["resource"]}{"/" + r["subresource"] if r.get("subresource") else ""}'
                    for r in records)
    return {"rss_kib": tree_rss_kib(pid), "requests": len(records),
            "requests_per_minute": round(len(records) * 60 / window, 1), "by_verb_and_resource": dict(kinds)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=300)
    parser.add_argument("--large", type=int, default=3000)
    parser.add_argument("--window", type=float, default=60.0, help="seconds over which requests are counted")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds to wait once all apps run")
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()
    result: dict = {"benchmark": "master-flat", "cores": os.cpu_count(), "commit": _commit(),
                    "window_seconds": args.window}
    with Cluster() as cluster:
        master = cluster.start_master("--enable-leader-election")
        shards = {"shard-0", "shard-1"}
        for shard in sorted(shards):
            cluster.start(shard, shard=shard)
        done = 0
        for label, count in (("small", args.small), ("large", args.large)):
            cluster.create_apps(done, count)
            done = count
            cluster.wait_running(count, args.timeout, shards)
            time.sleep(args.settle)
            result[label] = {"apps": count, **measure(cluster, master.proc.pid, args.window)}
    small, large = result["small"], result["large"]
    result["rss_ratio"] = round(large["rss_kib"] / small["rss_kib"], 3)
    result["requests_ratio"] = round(large["requests_per_minute"] / max(small["requests_per_minute"], 1e-9), 3)
    result["goal"] = 1.10
    result["meets_goal"] = result["rss_ratio"] <= 1.10 and result["requests_ratio"] <= 1.10
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
