"""One tenant's slow steps against another tenant's reconcile, printing one JSON object.

A controller process (one shard's worth: 4 workers) and the API server as processes. Tenant "noisy" runs
`--noisy-apps` apps (default 16), each a DAG of `--requests` (default 40) `request` steps to a server on
loopback that accepts connections and never answers (allowed by --workflow-http-allow). Tenant "quiet" creates
a plain app (one ConfigMap) `--samples` times: the seconds from its creation until its status says running,
first with no load (baseline), then while every noisy call is pending, side by side in one run; the goal is
under 2 s with the load, and the ratio shows what the load costs. Also the noisy apps' steps that were seen
waiting on their calls (running, not failed: no step holds a worker while it waits).

    python hack/bench_tenant_isolation.py [--noisy-apps 16] [--requests 40] [--samples 8] [--spacing 2]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hack.bench_apiserver import _commit  # noqa: E402
from hack.benchlib import Cluster  # noqa: E402
from velashard.apis.oam import APPLICATIONS  # noqa: E402
from velashard.kube.resources import NAMESPACES  # noqa: E402

GOAL_S = 2.0


class Silent:
    """A TCP server on loopback that accepts every connection and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def noisy_app(i: int, port: int, requests: int) -> dict:
    steps = [{"name": f"ask-{j}", "type": "request",
              "properties": {"url": f"http://127.0.0.1:{port}/never/{i}/{j}"}} for j in range(requests)]
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": f"noisy-{i}", "namespace": "noisy"},
            "spec": {"components": [], "workflow": {"mode": {"steps": "DAG"}, "steps": steps}}}


def quiet_app(name: str) -> dict:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
            "metadata": {"name": name, "namespace": "quiet"},
            "spec": {"components": [{"name": "settings", "type": "k8s-objects", "properties": {"objects": [
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}]}}]}}


def time_to_running(cluster: Cluster, name: str, timeout: float = 300) -> float:
    started = time.monotonic()
    cluster.client.create(APPLICATIONS, quiet_app(name), "quiet")
    while time.monotonic() - started < timeout:
        status = cluster.client.get(APPLICATIONS, name, "quiet").get("status") or {}
        if status.get("status") == "running":
            return time.monotonic() - started
        time.sleep(0.02)
    raise RuntimeError(f"{name} did not run within {timeout:.0f}s")


def waiting_steps(cluster: Cluster) -> tuple[int, int]:
    """(steps of the noisy apps seen running, steps in all)."""
    items, _ = cluster.client.list_all(APPLICATIONS, "noisy")
    steps = [s for a in items for s in ((a.get("status") or {}).get("workflow") or {}).get("steps") or []]
    return sum(1 for s in steps if s.get("phase") == "running"), len(steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--noisy-apps", type=int, default=16)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--spacing", type=float, default=2.0, help="seconds between two loaded samples")
    args = parser.parse_args()
    silent = Silent()
    with Cluster() as cluster:
        for ns in ("noisy", "quiet"):
            cluster.client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        cluster.start("shard", "--feature-gates=AuthenticateApplication=false", "--concurrent-reconciles=4",
                      f"--workflow-http-allow=127.0.0.1:{silent.port}")
        time_to_running(cluster, "warm-up")  # the first app compiles what every later one reuses
        baseline = [time_to_running(cluster, f"baseline-{i}") for i in range(args.samples)]
        for i in range(args.noisy_apps):
            cluster.client.create(APPLICATIONS, noisy_app(i, silent.port, args.requests), "noisy")
        want = args.noisy_apps * args.requests
        cluster.wait_for(lambda: waiting_steps(cluster)[1] >= want, 600, "every noisy step to have a status")
        loaded, seen_waiting = [], 0
        for i in range(args.samples):  # spread over the calls' timeouts, failures and retries
            seen_waiting = max(seen_waiting, waiting_steps(cluster)[0])
            loaded.append(time_to_running(cluster, f"loaded-{i}"))
            time.sleep(args.spacing)
        base, load = statistics.median(baseline), statistics.median(loaded)
        print(json.dumps({
            "commit": _commit(), "cores": os.cpu_count(), "noisy_apps": args.noisy_apps, "requests_per_app": args.requests,
            "noisy_connections_accepted": silent.accepted, "loaded_window_s": round(args.samples * args.spacing, 1),
            "noisy_steps_seen_waiting": seen_waiting, "noisy_steps": want,
            "baseline_seconds": [round(x, 3) for x in baseline], "loaded_seconds": [round(x, 3) for x in loaded],
            "baseline_median_s": round(base, 3), "loaded_median_s": round(load, 3),
            "loaded_max_s": round(max(loaded), 3), "ratio": round(load / base, 2) if base else None,
            "goal_s": GOAL_S, "goal_met": max(loaded) < GOAL_S}, indent=2))
    silent.close()


if __name__ == "__main__":
    main()
