"""Balance of the scheduling strategies, printing one JSON object.

For 1,000 apps over 5 shards: max/mean apps per shard for each strategy, and, when a sixth shard
joins, the fraction of apps consistent-hash moves (the others reschedule nothing on a join: they
only place new and orphaned apps). Goals: round-robin and least-loaded max/mean <= 1.05,
consistent-hash <= 1.15; moved <= 1.2/(n+1).

    python hack/bench_balance.py [--apps 1000] [--shards 5]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hack.bench_apiserver import _commit  # noqa: E402
from velashard.sharding.strategies import STRATEGIES, Scheduler, app_identity  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=1000)
    parser.add_argument("--shards", type=int, default=5)
    args = parser.parse_args()
    apps = [{"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
             "metadata": {"name": f"app-{i}", "namespace": f"team-{i % 17}"}} for i in range(args.apps)]
    shards = [f"shard-{i}" for i in range(args.shards)]
    mean = args.apps / args.shards
    result: dict = {"benchmark": "balance", "cores": os.cpu_count(), "commit": _commit(), "apps": args.apps,
                    "shards": args.shards, "max_over_mean": {}}
    for strategy in STRATEGIES:
        scheduler = Scheduler(strategy, seed=7)
        loads: dict[str, int] = {}
        counts = Counter(scheduler.pick(a, shards, loads if strategy == "least-loaded" else None) for a in apps)
        result["max_over_mean"][strategy] = round(max(counts.values()) / mean, 3)
    ring = Scheduler("consistent-hash")
    before = {app_identity(a): ring.pick(a, shards) for a in apps}
    after = {app_identity(a): ring.pick(a, shards + [f"shard-{args.shards}"]) for a in apps}
    moved = sum(1 for k in before if before[k] != after[k]) / args.apps
    result["consistent_hash_moved_on_join"] = round(moved, 3)
    result["moved_goal"] = round(1.2 / (args.shards + 1), 3)
    result["meets_goals"] = (result["max_over_mean"]["round-robin"] <= 1.05
                             and result["max_over_mean"]["least-loaded"] <= 1.05
                             and result["max_over_mean"]["consistent-hash"] <= 1.15
                             and moved <= 1.2 / (args.shards + 1))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
