"""Benchmark of the Application controller in one process, printing one JSON object.

Runs `velashard apiserver --simulate-workloads` and one `velashard` controller manager as separate
processes, creates N single-component webservice apps (default 1,000) and measures:
- wall time until every app is running and healthy, and apps converged per second;
- reconciles per second (from the controller's own velashard_reconcile_total);
- the controller's resident-memory growth over its idle baseline, per application.

    python hack/bench_app_controller.py [--apps 1000]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hack.bench_apiserver import _commit, request, start_server  # noqa: E402


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int, metric: str) -> float:
    text = http.client.HTTPConnection("127.0.0.1", port)
    text.request("GET", "/metrics")
    body = text.getresponse().read().decode()
    return sum(float(m) for m in re.findall(rf"^{metric}{{[^}}]*}} ([0-9.e+]+)$", body, re.M))


def wait_ready(port: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("controller did not become ready")


def create_apps(host: str, port: int, count: int, threads: int = 4) -> None:
    def worker(indices: range) -> None:
        conn = http.client.HTTPConnection(host, port)
        for i in indices:
            request(conn, "POST", "/apis/core.oam.dev/v1beta1/namespaces/bench/applications", {
                "apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": {"name": f"app-{i}"},
                "spec": {"components": [{"name": f"web-{i}", "type": "webservice",
                                         "properties": {"image": "nginx:1.25", "ports": [{"port": 80}]}}]}})

    workers = [threading.Thread(target=worker, args=(range(t, count, threads),)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def count_running(host: str, port: int) -> int:
    conn = http.client.HTTPConnection(host, port)
    _, body = request(conn, "GET", "/apis/core.oam.dev/v1beta1/namespaces/bench/applications")
    return sum(1 for a in json.loads(body)["items"] if (a.get("status") or {}).get("status") == "running")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    server, host, port = start_server(["--simulate-workloads"])
    workdir = tempfile.mkdtemp(prefix="bench-app-")
    kubeconfig = os.path.join(workdir, "kubeconfig")
    with open(kubeconfig, "w") as fh:
        json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                   "clusters": [{"name": "c", "cluster": {"server": f"http://{host}:{port}"}}],
                   "users": [{"name": "u", "user": {"token": "admin"}}],
                   "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}, fh)
    controller = None
    try:
        subprocess.run([sys.executable, "-m", "velashard.cli.main", "install", "--kubeconfig", kubeconfig],
                       check=True, capture_output=True)
        conn = http.client.HTTPConnection(host, port)
        request(conn, "POST", "/api/v1/namespaces", {"metadata": {"name": "bench"}})
        metrics, health = free_port(), free_port()
        controller = subprocess.Popen([sys.executable, "-m", "velashard.cli.main", "--kubeconfig", kubeconfig,
                                       "--metrics-addr", f"127.0.0.1:{metrics}", "--health-addr",
                                       f"127.0.0.1:{health}", "--kube-api-qps", "1000", "--kube-api-burst", "2000",
                                       "--log-level", "warning"], stderr=subprocess.DEVNULL)
        wait_ready(health)
        time.sleep(1)
        baseline = rss_kib(controller.pid)
        reconciles_before = scrape(metrics, "velashard_reconcile_total")
        started = time.monotonic()
        create_apps(host, port, args.apps)
        running = 0
        while time.monotonic() - started < args.timeout:
            running = count_running(host, port)
            if running >= args.apps:
                break
            time.sleep(1)
        elapsed = time.monotonic() - started
        reconciles = scrape(metrics, "velashard_reconcile_total") - reconciles_before
        grown = rss_kib(controller.pid) - baseline
        print(json.dumps({
            "benchmark": "app-controller", "cores": os.cpu_count(), "commit": _commit(), "apps": args.apps,
            "apps_running": running, "seconds_to_all_running": round(elapsed, 1),
            "apps_converged_per_second": round(running / elapsed, 1),
            "reconciles": int(reconciles), "reconciles_per_second": round(reconciles / elapsed, 1),
            "controller_rss_baseline_kib": baseline, "controller_rss_growth_kib": grown,
            "rss_kib_per_app": round(grown / max(args.apps, 1), 2)}, indent=2))
    finally:
        if controller is not None:
            controller.terminate()
            controller.wait(15)
        server.terminate()
        server.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
