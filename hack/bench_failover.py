"""Failover benchmark, printing one JSON object.

A master (orphan grace period 0 for the run) and 3 slave shards reconcile 1,000 apps. Then, per mode:

- crash: one shard is killed (SIGKILL) and its container reported terminated at the same moment, as
  the kubelet reports it. Goal: every app moved and reconciled within 10 s.
- pause: one shard is frozen (SIGSTOP) and its pod turns NotReady: the process may still run, so its
  apps move only once its Lease expired as the master sees it. Goal: within lease duration + 5 s.

Measured from that moment: until no app is labelled for the failed shard any more, and until the
surviving shards have reconciled every app (the sum of their velashard_applications_reconciled reaches
the app count).

    python hack/bench_failover.py [--apps 1000] [--shards 3] [--mode crash|pause|both] [--lease-duration 4s]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hack.bench_apiserver import _commit  # noqa: E402
from hack.benchlib import APPS_NS, Cluster  # noqa: E402
from velashard.apis import labels  # noqa: E402
from velashard.apis.oam import APPLICATIONS  # noqa: E402
from velashard.cli.manager import duration  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=1000)
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--mode", choices=["crash", "pause", "both"], default="both")
    parser.add_argument("--lease-duration", default="4s", help="shard lease timings for the run (Go durations)")
    parser.add_argument("--renew-deadline", default="2.5s")
    parser.add_argument("--retry-period", default="0.5s")
    parser.add_argument("--reschedule-workers", type=int, default=None,
                        help="the master's --reschedule-workers (default: the controller's default)")
    args = parser.parse_args()
    result: dict = {"benchmark": "failover", "cores": os.cpu_count(), "commit": _commit(), "apps": args.apps,
                    "shards": args.shards, "lease_duration": args.lease_duration}
    for mode in (["crash", "pause"] if args.mode == "both" else [args.mode]):
        result[mode] = run(args, mode)
    print(json.dumps(result, indent=2))
    return 0


def run(args: argparse.Namespace, mode: str) -> dict:
    lease = ["--leader-election-lease-duration", args.lease_duration, "--leader-election-renew-deadline",
             args.renew_deadline, "--leader-election-retry-period", args.retry_period]
    goal = 10.0 if mode == "crash" else duration(args.lease_duration) + 5.0
    with Cluster() as cluster:
        workers = ["--reschedule-workers", str(args.reschedule_workers)] if args.reschedule_workers else []
        cluster.start_master("--orphan-grace-period", "0", "--reschedule-period", "1", *lease, *workers)
        shards = [f"shard-{i}" for i in range(args.shards)]
        for shard in shards:
            cluster.start(shard, *lease, shard=shard)
        cluster.create_apps(0, args.apps)
        cluster.wait_running(args.apps, args.timeout, set(shards))
        time.sleep(3)
        victim, survivors = shards[0], [cluster.controllers[s] for s in shards[1:]]
        stranded = len(cluster.client.list(APPLICATIONS, APPS_NS,
                                           label_selector=f"{labels.SCHEDULED_SHARD_ID}={victim}")["items"])
        started = time.monotonic()
        if mode == "crash":
            cluster.kill(victim, signal.SIGKILL)
            cluster.shard_pod(victim, False, terminated=True)
        else:
            cluster.controllers[victim].proc.send_signal(signal.SIGSTOP)
            cluster.shard_pod(victim, False)
        moved_at = reconciled_at = None
        while time.monotonic() - started < args.timeout and reconciled_at is None:
            now = time.monotonic() - started
            if moved_at is None and not cluster.client.list(
                    APPLICATIONS, APPS_NS, label_selector=f"{labels.SCHEDULED_SHARD_ID}={victim}")["items"]:
                moved_at = now
            if moved_at is not None and sum(c.metric("velashard_applications_reconciled")
                                            for c in survivors) >= args.apps:
                reconciled_at = time.monotonic() - started
            time.sleep(0.1)
        running = sum(1 for a in cluster.apps() if (a.get("status") or {}).get("status") == "running")
        if mode == "pause":
            cluster.controllers[victim].proc.send_signal(signal.SIGCONT)  # so that it stops cleanly
    return {"apps_on_failed_shard": stranded, "seconds_until_all_moved": _round(moved_at),
            "seconds_until_all_reconciled": _round(reconciled_at), "apps_running_after": running,
            "goal_seconds": goal,
            "meets_goal": reconciled_at is not None and reconciled_at <= goal and running == args.apps}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


if __name__ == "__main__":
    sys.exit(main())
