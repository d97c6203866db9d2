"""Benchmark of the embedded API server, printing one JSON object.

Measures, against `velashard apiserver` running as its own process:
- sustained creates per second from 4 client threads while 8 watches stream;
- delivery latency from the moment a create is sent to the moment each watcher reads its event (p50, p99);
- the time of a label-selected list over 10,000 objects.

Goals (issue 2): >= 500 creates/s, p99 delivery <= 50 ms, label-selected list <= 200 ms.
Clients speak raw HTTP/1.1 keep-alive so that the figures measure the server, not a client library.

    python hack/bench_apiserver.py [--creates 6000] [--list-objects 10000]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from velashard.kube.kubeconfig import bearer_token, write_kubeconfig  # noqa: E402

CLIENT_THREADS = 4
WATCHERS = 8


@dataclass
class Server:
    """`velashard apiserver` as a process, and its admin token as read from the kubeconfig it wrote."""

    proc: subprocess.Popen
    host: str
    port: int
    kubeconfig: str
    token: str

    def http_kubeconfig(self, path: str) -> str:
        """A kubeconfig for plain HTTP on the same port with the same token (the benchmarks measure the server,
        not TLS), written 0600."""
        return write_kubeconfig(path, {
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": f"http://{self.host}:{self.port}"}}],
            "users": [{"name": "u", "user": {"token": self.token}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]})

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:  # a server holding millions of objects may take long to tear down
            self.proc.kill()
            self.proc.wait(10)
        shutil.rmtree(os.path.dirname(self.kubeconfig), ignore_errors=True)


def start_server(extra: list[str] | None = None) -> Server:
    kubeconfig = os.path.join(tempfile.mkdtemp(prefix="velashard-bench-"), "admin.kubeconfig")
    proc = subprocess.Popen([sys.executable, "-m", "velashard.cli.main", "apiserver", "--port", "0",
                             "--watch-history", "200000", "--kubeconfig-out", kubeconfig, *(extra or [])],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()  # "velashard apiserver listening on http://HOST:PORT"
    host, port = line.rsplit("//", 1)[1].split(":")
    # The server wrote the kubeconfig before announcing itself; its token is random, made by that server.
    return Server(proc, host, int(port), kubeconfig, bearer_token(kubeconfig))


def request(conn: http.client.HTTPConnection, token: str, method: str, path: str,
            body: dict | None = None) -> tuple[int, bytes]:
    payload = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, payload, {"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    resp = conn.getresponse()
    return resp.status, resp.read()


def watcher(host: str, port: int, token: str, rv: str, expected: int, ready: mp.Event, out: mp.Queue) -> None:
    """Stream configmap events in namespace bench and record when each arrives."""
    conn = http.client.HTTPConnection(host, port, timeout=120)
    conn.request("GET", f"/api/v1/namespaces/bench/configmaps?watch=true&resourceVersion={rv}",
                 headers={"Authorization": f"Bearer {token}"})
    resp = conn.getresponse()
    ready.set()
    arrivals: dict[str, float] = {}
    while len(arrivals) < expected:
        line = resp.readline()  # http.client undoes the chunked encoding
        if not line:
            break
        event = json.loads(line)
        if event["type"] == "ADDED":
            arrivals[event["object"]["metadata"]["name"]] = time.time()
    conn.close()
    out.put(arrivals)


def creator(server: Server, prefix: str, count: int, sent: dict[str, float], errors: list[int]) -> None:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=60)
    for i in range(count):
        name = f"{prefix}-{i}"
        sent[name] = time.time()
        code, _ = request(conn, server.token, "POST", "/api/v1/namespaces/bench/configmaps",
                          {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"i": str(i)}},
                           "data": {"k": "v" * 64}})
        if code != 201:
            errors.append(code)
    conn.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def bench_creates(server: Server, creates: int) -> dict:
    conn = http.client.HTTPConnection(server.host, server.port)
    request(conn, server.token, "POST", "/api/v1/namespaces", {"metadata": {"name": "bench"}})
    _, body = request(conn, server.token, "GET", "/api/v1/namespaces/bench/configmaps")
    rv = json.loads(body)["metadata"]["resourceVersion"]
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    readies = []
    procs = []
    for _ in range(WATCHERS):
        ready = ctx.Event()
        p = ctx.Process(target=watcher, args=(server.host, server.port, server.token, rv, creates, ready, out))
        p.start()
        procs.append(p)
        readies.append(ready)
    for ready in readies:
        ready.wait(30)
    sent: dict[str, float] = {}
    errors: list[int] = []
    per_thread = creates // CLIENT_THREADS
    threads = [threading.Thread(target=creator, args=(server, f"c{t}", per_thread, sent, errors))
               for t in range(CLIENT_THREADS)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    latencies = []
    for _ in procs:
        arrivals = out.get(timeout=120)
        latencies.extend((arrivals[n] - sent[n]) * 1000 for n in arrivals if n in sent)
    for p in procs:
        p.join(10)
    return {"creates": per_thread * CLIENT_THREADS, "client_threads": CLIENT_THREADS, "watchers": WATCHERS,
            "create_errors": len(errors), "creates_per_second": round(per_thread * CLIENT_THREADS / elapsed, 1),
            "delivered_events": len(latencies),
            "delivery_ms_p50": round(statistics.median(latencies), 2),
            "delivery_ms_p99": round(percentile(latencies, 0.99), 2)}


def bench_list(server: Server, objects: int) -> dict:
    conn = http.client.HTTPConnection(server.host, server.port)
    request(conn, server.token, "POST", "/api/v1/namespaces", {"metadata": {"name": "listbench"}})
    for i in range(objects):
        request(conn, server.token, "POST", "/api/v1/namespaces/listbench/configmaps",
                {"metadata": {"name": f"cm-{i}", "labels": {"app": f"a{i % 10}", "tier": "x"}}, "data": {"k": "v"}})
    timings = []
    matched = 0
    for _ in range(5):
        t0 = time.perf_counter()
        code, body = request(conn, server.token, "GET",
                             "/api/v1/namespaces/listbench/configmaps?labelSelector=app%3Da3")
        timings.append((time.perf_counter() - t0) * 1000)
        matched = len(json.loads(body)["items"])
    return {"list_objects": objects, "list_matched": matched, "label_list_ms_median": round(statistics.median(timings), 2),
            "label_list_ms_max": round(max(timings), 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--creates", type=int, default=6000)
    parser.add_argument("--list-objects", type=int, default=10_000)
    args = parser.parse_args()
    server = start_server()
    try:
        result = {"benchmark": "apiserver", "cores": os.cpu_count(), "commit": _commit()}
        result.update(bench_creates(server, args.creates))
        result.update(bench_list(server, args.list_objects))
        result["goals"] = {"creates_per_second_min": 500, "delivery_ms_p99_max": 50, "label_list_ms_max": 200}
        result["meets_goals"] = (result["creates_per_second"] >= 500 and result["delivery_ms_p99"] <= 50
                                 and result["label_list_ms_max"] <= 200)
        print(json.dumps(result, indent=2))
    finally:
        server.stop()
    return 0


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except OSError:
        return ""


if __name__ == "__main__":
    sys.exit(main())
