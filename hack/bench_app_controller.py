"""Benchmark of the Application controller in one process, printing one JSON object.

Runs `velashard apiserver --simulate-workloads` and one `velashard` controller manager as separate
processes, creates N single-component webservice apps (default 1,000) and measures:
- wall time until every app is running and healthy, and apps converged per second;
- reconciles per second (from the controller's own velashard_reconcile_total);
- the controller's resident-memory growth over its idle baseline, per application.

    python hack/bench_app_controller.py [--apps 1000] [--traits]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hack.bench_apiserver import _commit  # noqa: E402
from hack.benchlib import TWO_TRAITS, Cluster  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--traits", action="store_true", help="give every app two traits (scaler and labels)")
    args = parser.parse_args()
    with Cluster() as cluster:
        controller = cluster.start("controller")
        cluster.settle(1)
        reconciles_before = controller.metric("velashard_reconcile_total")
        started = time.monotonic()
        cluster.create_apps(0, args.apps, traits=TWO_TRAITS if args.traits else None)
        cluster.wait_running(args.apps, args.timeout)
        elapsed = time.monotonic() - started
        reconciles = controller.metric("velashard_reconcile_total") - reconciles_before
        grown = controller.rss_kib() - controller.baseline_kib
        print(json.dumps({
            "benchmark": "app-controller", "cores": os.cpu_count(), "commit": _commit(), "apps": args.apps,
            "seconds_to_all_running": round(elapsed, 1), "apps_converged_per_second": round(args.apps / elapsed, 1),
            "reconciles": int(reconciles), "reconciles_per_second": round(reconciles / elapsed, 1),
            "controller_rss_baseline_kib": controller.baseline_kib, "controller_rss_growth_kib": grown,
            "rss_kib_per_app": round(grown / max(args.apps, 1), 2)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
