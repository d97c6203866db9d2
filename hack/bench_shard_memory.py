"""Shard memory benchmark, printing one JSON object.

N apps (default 3,000) reconciled by one unsharded controller, then, on a fresh API server, by a
master and 3 slave shards (apps placed by the master's webhook). For every process: resident-memory
growth over its idle baseline once all apps run. The figure is max slave growth / unsharded growth
(goal <= 0.40, ideal 1/3).

Both sides cache the resources apps manage (each shard only its own apps', selected by their shard
label). The ratio against an unsharded controller that caches nothing (--no-cache-managed-resources) is
printed too, for comparison with older runs.

    python hack/bench_shard_memory.py [--apps 3000] [--shards 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hack.bench_apiserver import _commit  # noqa: E402
from hack.benchlib import Cluster  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=3000)
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()
    result: dict = {"benchmark": "shard-memory", "cores": os.cpu_count(), "commit": _commit(), "apps": args.apps,
                    "shards": args.shards}

    for label, flags in (("unsharded_no_cache", ("--no-cache-managed-resources",)), ("unsharded_default", ())):
        with Cluster() as cluster:
            ctl = cluster.start("unsharded", *flags)
            cluster.settle()
            cluster.create_apps(0, args.apps)
            seconds = cluster.wait_running(args.apps, args.timeout)
            grown = ctl.rss_kib() - ctl.baseline_kib
            result[label] = {"baseline_kib": ctl.baseline_kib, "growth_kib": grown,
                             "kib_per_app": round(grown / args.apps, 2), "seconds_to_all_running": round(seconds, 1)}

    with Cluster() as cluster:
        shards = [f"shard-{i}" for i in range(args.shards)]
        master = cluster.start_master()
        slaves = [cluster.start(s, shard=s) for s in shards]
        cluster.settle()
        cluster.create_apps(0, args.apps)
        seconds = cluster.wait_running(args.apps, args.timeout, set(shards))
        per_shard = {}
        for ctl in slaves:
            grown = ctl.rss_kib() - ctl.baseline_kib
            per_shard[ctl.name] = {"baseline_kib": ctl.baseline_kib, "growth_kib": grown,
                                   "apps": int(ctl.metric("velashard_applications_reconciled"))}
        result["sharded"] = {"seconds_to_all_running": round(seconds, 1), "shards": per_shard,
                             "master": {"baseline_kib": master.baseline_kib,
                                        "growth_kib": master.rss_kib() - master.baseline_kib}}

    worst = max(s["growth_kib"] for s in result["sharded"]["shards"].values())
    result["max_shard_growth_kib"] = worst
    result["kib_per_app_sharded"] = round(worst / (args.apps / args.shards), 2)
    result["ratio"] = round(worst / max(result["unsharded_default"]["growth_kib"], 1), 3)
    result["ratio_against_unsharded_no_cache"] = round(worst / max(result["unsharded_no_cache"]["growth_kib"], 1), 3)
    result["ideal"] = round(1 / args.shards, 3)
    result["goal"] = 0.40
    result["meets_goal"] = result["ratio"] <= 0.40
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
