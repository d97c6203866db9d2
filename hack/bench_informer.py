"""Benchmark of the controller runtime's informer, printing one JSON object.

- memory: resident-memory growth of this process per cached object, for 10,000 small ConfigMaps
  held by an informer (with the default transform), measured from the process's idle baseline,
  after the initial list and again after `--updates` of them have been replaced by watch events;
- throughput: events per second from API write to informer handler, with writes from a separate
  process (4 threads), and the p50/p99 write-to-handler latency.

    python hack/bench_informer.py [--objects 10000] [--updates 5000]
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import multiprocessing as mp
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hack.bench_apiserver import _commit, percentile, request, start_server  # noqa: E402


def rss_kib() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def create_objects(host: str, port: int, token: str, count: int) -> None:
    conn = http.client.HTTPConnection(host, port)
    request(conn, token, "POST", "/api/v1/namespaces", {"metadata": {"name": "informer-bench"}})
    for i in range(count):
        request(conn, token, "POST", "/api/v1/namespaces/informer-bench/configmaps",
                {"metadata": {"name": f"cm-{i}", "labels": {"app": f"a{i % 10}"}}, "data": {"k": "v" * 32}})


def update_objects(host: str, port: int, token: str, names: list[str], threads: int = 4) -> None:
    def worker(chunk: list[str]) -> None:
        conn = http.client.HTTPConnection(host, port)
        for name in chunk:
            body = json.dumps({"data": {"ts": repr(time.time())}}).encode()
            conn.request("PATCH", f"/api/v1/namespaces/informer-bench/configmaps/{name}", body,
                         {"Content-Type": "application/merge-patch+json", "Authorization": f"Bearer {token}"})
            conn.getresponse().read()

    workers = [threading.Thread(target=worker, args=(names[i::threads],)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--updates", type=int, default=5_000)
    args = parser.parse_args()

    from velashard.kube.client import KubeClient
    from velashard.kube.informer import EventHandler, Informer
    from velashard.kube.config import ClientConfig
    from velashard.kube.resources import CONFIGMAPS

    server = start_server()
    ctx = mp.get_context("spawn")
    try:
        creator = ctx.Process(target=create_objects, args=(server.host, server.port, server.token, args.objects))
        creator.start()
        creator.join()
        token = server.token
        client = KubeClient(ClientConfig(f"http://{server.host}:{server.port}", token=lambda: token),
                            shard_id="bench", qps=1000, burst=1000)
        gc.collect()
        baseline = rss_kib()

        latencies: list[float] = []
        seen = threading.Event()
        counter = {"n": 0, "last": 0.0}

        def on_update(old: dict, new: dict) -> None:
            ts = (new.get("data") or {}).get("ts")
            if ts:
                now = time.time()
                latencies.append((now - float(ts)) * 1000)
                counter["n"] += 1
                counter["last"] = now
                if counter["n"] >= args.updates:
                    seen.set()

        informer = Informer(client, CONFIGMAPS, "informer-bench")
        informer.add_handler(EventHandler(on_update=on_update))
        informer.start()
        informer.wait_for_sync(120)
        gc.collect()
        cached = len(informer.store)
        grown = rss_kib() - baseline

        names = [f"cm-{i}" for i in range(args.updates)]
        updater = ctx.Process(target=update_objects, args=(server.host, server.port, server.token, names))
        first = time.time()
        updater.start()
        seen.wait(300)
        updater.join()
        gc.collect()
        grown_after_updates = rss_kib() - baseline  # updated objects come from single watch events
        informer.stop()
        elapsed = counter["last"] - first
        result = {
            "benchmark": "informer", "cores": os.cpu_count(), "commit": _commit(),
            "cached_objects": cached, "rss_growth_kib": grown,
            "rss_bytes_per_cached_object": round(grown * 1024 / max(cached, 1)),
            "rss_bytes_per_cached_object_after_updates": round(grown_after_updates * 1024 / max(cached, 1)),
            "updates": args.updates, "events_handled": counter["n"],
            "events_per_second": round(counter["n"] / elapsed, 1) if elapsed > 0 else None,
            "write_to_handler_ms_p50": round(statistics.median(latencies), 2) if latencies else None,
            "write_to_handler_ms_p99": round(percentile(latencies, 0.99), 2) if latencies else None,
        }
        print(json.dumps(result, indent=2))
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
