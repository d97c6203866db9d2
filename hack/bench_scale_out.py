"""Scale-out benchmark, printing one JSON object.

2,000 apps are created already labelled for their shards (round-robin, each with its proof signed with the
master's key, which this script makes and publishes as the master would), with no controller running;
then 1 slave shard (first run) or 2 (second run, fresh API server) are started and the wall time
until every app runs is measured. The figure is time with 1 shard / time with 2 shards. Every
process shares this machine's cores with the API server, which bounds the speed-up.

    python hack/bench_scale_out.py [--apps 2000] [--shards 2]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hack.bench_apiserver import _commit, request  # noqa: E402
from hack.benchlib import APPS_NS, RUNTIME_NS, Cluster, app_body  # noqa: E402
from velashard.apis import labels  # noqa: E402
from velashard.sharding.keys import SigningKey  # noqa: E402
from velashard.sharding.proof import with_proof  # noqa: E402


def create_labelled(cluster: Cluster, count: int, shards: list[str], threads: int = 4) -> None:
    signer = SigningKey(cluster.client, RUNTIME_NS).load()

    def worker(indices: range) -> None:
        conn = http.client.HTTPConnection(cluster.host, cluster.port, timeout=60)
        for i in indices:
            body = app_body(f"app-{i}")
            body["metadata"]["namespace"] = APPS_NS
            body["metadata"]["labels"] = {labels.SCHEDULED_SHARD_ID: shards[i % len(shards)]}
            body = with_proof(body, signer)
            code, answer = request(conn, cluster.token, "POST",
                                   f"/apis/core.oam.dev/v1beta1/namespaces/{APPS_NS}/applications", body)
            if code != 201:
                raise RuntimeError(f"creating app-{i} answered {code}: {answer[:200]!r}")

    workers = [threading.Thread(target=worker, args=(range(t, count, threads),)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def run(apps: int, count: int, timeout: float) -> dict:
    shards = [f"shard-{i}" for i in range(count)]
    with Cluster() as cluster:
        create_labelled(cluster, apps, shards)
        started = time.monotonic()
        for shard in shards:
            cluster.start(shard, shard=shard, wait=False)  # side by side, not one after the other's readiness
        cluster.wait_running(apps, timeout, set(shards))
        seconds = time.monotonic() - started
        reconciles = sum(c.metric("velashard_reconcile_total") for c in cluster.controllers.values())
    return {"shards": count, "seconds_to_all_running": round(seconds, 1), "apps_per_second": round(apps / seconds, 1),
            "reconciles": int(reconciles)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=2000)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()
    one = run(args.apps, 1, args.timeout)
    many = run(args.apps, args.shards, args.timeout)
    print(json.dumps({"benchmark": "scale-out", "cores": os.cpu_count(), "commit": _commit(), "apps": args.apps,
                      "one_shard": one, f"{args.shards}_shards": many,
                      "speed_up": round(one["seconds_to_all_running"] / many["seconds_to_all_running"], 2)},
                     indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
