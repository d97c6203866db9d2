"""Balance of the scheduling strategies on both placement paths, printing one JSON object.

For 1,000 apps over 5 shards that start equally loaded: max/mean apps per shard for each strategy,
measured side by side on the webhook path (one admission request per app through the mutating
webhook's HTTP handler, the published loads read afresh for every request and unchanged during the
burst, as between two load reports) and on the background scheduler's path (one pass placing every
app). And, when a sixth shard joins, the fraction of apps consistent-hash moves (the others reschedule
nothing on a join: they only place new and orphaned apps). Goals: round-robin and least-loaded
max/mean <= 1.05, consistent-hash and random <= 1.15 on both paths; moved <= 1.2/(n+1).

    python hack/bench_balance.py [--apps 1000] [--shards 5]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hack.bench_apiserver import _commit  # noqa: E402
from velashard.sharding.placement import PlacementState, place, place_all  # noqa: E402
from velashard.sharding.proof import Signer  # noqa: E402
from velashard.sharding.strategies import STRATEGIES, app_identity  # noqa: E402
from velashard.webhook.decisions import MutationContext, ValidationContext  # noqa: E402
from velashard.webhook.app import create_app, make_pick  # noqa: E402
from velashard.webhook.paths import MUTATING_PATH  # noqa: E402

GOALS = {"round-robin": 1.05, "least-loaded": 1.05, "consistent-hash": 1.15, "random": 1.15}


def webhook_counts(strategy: str, apps: list[dict], shards: list[str], loads: dict[str, int]) -> Counter:
    pick = make_pick(strategy, lambda: list(shards), lambda: dict(loads), lambda namespace: None)
    http = create_app(MutationContext(pick=pick, signer=Signer.generate()), ValidationContext()).test_client()
    counts: Counter = Counter()
    for app in apps:
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": app["metadata"]["name"], "operation": "CREATE", "object": app, "oldObject": None,
            "kind": {"group": "core.oam.dev", "version": "v1beta1", "kind": "Application"},
            "userInfo": {"username": "bench"}}}
        answer = http.post(MUTATING_PATH, data=json.dumps(review)).json["response"]
        patch = json.loads(base64.b64decode(answer["patch"]))
        counts[patch[-1]["value"]] += 1
    return counts


def scheduler_counts(strategy: str, apps: list[dict], shards: list[str], loads: dict[str, int]) -> Counter:
    placed, _ = place_all(apps, shards, loads, {}, PlacementState(strategy))
    return Counter(shard for _, shard in placed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=1000)
    parser.add_argument("--shards", type=int, default=5)
    args = parser.parse_args()
    apps = [{"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
             "metadata": {"name": f"app-{i}", "namespace": f"team-{i % 17}"}} for i in range(args.apps)]
    shards = [f"shard-{i}" for i in range(args.shards)]
    loads = {shard: 0 for shard in shards}
    mean = args.apps / args.shards
    result: dict = {"benchmark": "balance", "cores": os.cpu_count(), "commit": _commit(), "apps": args.apps,
                    "shards": args.shards, "max_over_mean": {"webhook": {}, "scheduler": {}}}
    for strategy in STRATEGIES:
        for path, counts in (("webhook", webhook_counts), ("scheduler", scheduler_counts)):
            result["max_over_mean"][path][strategy] = round(max(counts(strategy, apps, shards, loads).values()) / mean,
                                                            3)
    ring = PlacementState("consistent-hash")
    before = {app_identity(a): place(a, shards, None, None, ring)[0] for a in apps}
    after = {app_identity(a): place(a, shards + [f"shard-{args.shards}"], None, None, ring)[0] for a in apps}
    moved = sum(1 for k in before if before[k] != after[k]) / args.apps
    result["consistent_hash_moved_on_join"] = round(moved, 3)
    result["moved_goal"] = round(1.2 / (args.shards + 1), 3)
    result["goals"] = GOALS
    result["meets_goals"] = (all(result["max_over_mean"][path][s] <= goal for path in ("webhook", "scheduler")
                                 for s, goal in GOALS.items())
                             and moved <= 1.2 / (args.shards + 1))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
