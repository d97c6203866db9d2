"""Metrics, health probes and structured logging for every velashard process."""

from __future__ import annotations

import gc
import json
import logging
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, TextIO

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

REGISTRY = CollectorRegistry()

RECONCILE_TOTAL = Counter("velashard_reconcile_total", "Reconciles by controller and result",
                          ["controller", "result"], registry=REGISTRY)
RECONCILE_DURATION = Histogram("velashard_reconcile_duration_seconds", "Time spent in one reconcile",
                               ["controller"], registry=REGISTRY,
                               buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
WORKQUEUE_DEPTH = Gauge("velashard_workqueue_depth", "Items waiting in a work queue", ["name"], registry=REGISTRY)
WORKQUEUE_QUEUE_DURATION = Histogram("velashard_workqueue_queue_duration_seconds",
                                     "Time an item waits in a work queue before it is processed", ["name"],
                                     registry=REGISTRY,
                                     buckets=(0.0001, 0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60))
WORKQUEUE_RETRIES = Counter("velashard_workqueue_retries_total", "Rate-limited re-adds to a work queue", ["name"],
                            registry=REGISTRY)
INFORMER_OBJECTS = Gauge("velashard_informer_objects", "Objects held in an informer's cache", ["resource"],
                         registry=REGISTRY)
KUBE_REQUESTS = Counter("velashard_kube_requests_total", "Requests to the Kubernetes API by verb and HTTP code",
                        ["verb", "code"], registry=REGISTRY)
SHARDS_AVAILABLE = Gauge("velashard_shards_available", "Shards the master may schedule applications to",
                         registry=REGISTRY)
SCHEDULE_TOTAL = Counter("velashard_schedule_total", "Scheduling decisions by strategy and result",
                         ["strategy", "result"], registry=REGISTRY)
RESCHEDULE_TOTAL = Counter("velashard_reschedule_total", "Applications moved between shards, by reason",
                           ["reason"], registry=REGISTRY)
ASSIGNMENTS_REJECTED = Counter("velashard_shard_assignments_rejected_total",
                               "Applications this shard handed back to the scheduler unrun because their shard "
                               "assignment had no valid proof, by reason (missing or invalid)", ["reason"],
                               registry=REGISTRY)
WEBHOOK_LATENCY = Histogram("velashard_webhook_duration_seconds", "Admission webhook handling time", ["webhook"],
                            registry=REGISTRY, buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.1, 0.5, 1))
APPS_RECONCILED = Gauge("velashard_applications_reconciled",
                        "Applications in this shard's cache reconciled at least once since they arrived in it",
                        registry=REGISTRY)
SETTLED_PASSES = Counter("velashard_application_settled_passes_total",
                         "Application reconciles answered by a remembered settled pass, none of whose reads changed "
                         "(nothing rendered, evaluated or sent)", registry=REGISTRY)
LEADER = Gauge("velashard_leader", "1 while this process holds its shard's lease", ["lease"], registry=REGISTRY)
FENCED_WRITES = Counter("velashard_fenced_writes_total", "Writes this process refused to send while fenced, by verb",
                        ["verb"], registry=REGISTRY)
FENCED = Gauge("velashard_fenced", "1 while this process is fenced (its lease not renewed within the deadline)",
               registry=REGISTRY)


GC_SECONDS = Counter("velashard_gc_seconds_total",
                     "Seconds Python's cyclic garbage collector held the interpreter, by generation (2: a full "
                     "collection, which walks every object the process holds)", ["generation"], registry=REGISTRY)


def _gc_timer() -> Callable[[str, dict[str, Any]], None]:
    started = [0.0]
    children = {generation: GC_SECONDS.labels(generation=str(generation)) for generation in (0, 1, 2)}

    def timed(phase: str, info: dict[str, Any]) -> None:
        # Collections hold the GIL and never nest: one start before each stop.
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            children[info["generation"]].inc(time.perf_counter() - started[0])
    return timed


_GC_TIMER = _gc_timer()


def time_garbage_collections() -> None:
    """Count the collector's pauses in velashard_gc_seconds_total (once per process; a collection runs in any
    thread that allocates, so its cost shows in profiles as whatever allocated)."""
    if _GC_TIMER not in gc.callbacks:
        gc.callbacks.append(_GC_TIMER)


def metrics_text() -> bytes:
    return generate_latest(REGISTRY)


def parse_addr(addr: str) -> tuple[str, int]:
    """':8080' -> ('0.0.0.0', 8080); 'HOST:PORT' as is; port 0 picks a free port."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"address {addr!r} must be HOST:PORT or :PORT")
    return host or "0.0.0.0", int(port)


class ProbeServer:
    """Serves /metrics, or /healthz and /readyz, from a background thread."""

    def __init__(self, addr: str, routes: dict[str, Callable[[], tuple[int, bytes, str]]]):
        outer_routes = routes

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                route = outer_routes.get(self.path.split("?")[0])
                code, body, ctype = route() if route else (404, b"not found\n", "text/plain")
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = ThreadingHTTPServer(parse_addr(addr), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name=f"probe-{self.port}", daemon=True)

    def start(self) -> "ProbeServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def metrics_server(addr: str) -> ProbeServer:
    return ProbeServer(addr, {"/metrics": lambda: (200, metrics_text(), CONTENT_TYPE_LATEST)})


Problems = Callable[[], list[str]]


def health_server(addr: str, healthy: Problems, ready: Problems) -> ProbeServer:
    """/healthz and /readyz answer 200 "ok" with no problems, else 503 with one problem per line."""
    def probe(check: Problems, failed: str) -> Callable[[], tuple[int, bytes, str]]:
        def answer() -> tuple[int, bytes, str]:
            problems = check()
            if not problems:
                return 200, b"ok\n", "text/plain"
            return 503, (f"{failed}: " + "\n".join(problems) + "\n").encode(), "text/plain"
        return answer
    return ProbeServer(addr, {"/healthz": probe(healthy, "unhealthy"), "/readyz": probe(ready, "not ready")})


# --- liveness --------------------------------------------------------------------------------------

def beat_problem(name: str, alive: bool, stopped: bool, busy_since: float | None, deadline: float,
                 now: float) -> str | None:
    """Why a thread counts as dead or stuck, or None: it ended while it should run, or it has been busy on one
    piece of work (a reconcile, a list, a scheduling pass) longer than its deadline. Idle waiting is fine."""
    if stopped:
        return None
    if not alive:
        return f"{name}: thread died"
    if busy_since is not None and now - busy_since > deadline:
        return f"{name}: stuck for {now - busy_since:.0f}s (deadline {deadline:.0f}s)"
    return None


class Heartbeat:
    """A long-running thread's sign of life, read by /healthz: the thread marks itself busy while it works."""

    def __init__(self, name: str, deadline: float, clock: Callable[[], float] = time.monotonic):
        self.name = name
        self.deadline = deadline
        self._clock = clock
        self.thread: threading.Thread | None = None
        self.busy_since: float | None = None
        self.stopped = False

    def attach(self, thread: threading.Thread | None = None) -> None:
        """The thread this heartbeat is about (default: the calling one)."""
        self.thread = thread or threading.current_thread()
        self.stopped = False

    @contextmanager
    def busy(self) -> Iterator[None]:
        self.busy_since = self._clock()
        try:
            yield
        finally:
            self.busy_since = None

    def stop(self) -> None:
        """The thread ends on purpose: it no longer counts."""
        self.stopped = True

    def problem(self, now: float | None = None) -> str | None:
        if self.thread is None or self.thread.ident is None:
            return None  # not started yet
        return beat_problem(self.name, self.thread.is_alive(), self.stopped, self.busy_since, self.deadline,
                            self._clock() if now is None else now)


def liveness_problems(heartbeats: Iterable[Heartbeat]) -> list[str]:
    return [p for p in (h.problem() for h in heartbeats) if p]


# --- logging ---------------------------------------------------------------------------------------

def fields(**values: Any) -> dict[str, Any]:
    """`log.info("msg", extra=fields(key=...))`: structured fields rendered by the formatter."""
    return {"fields": values}


class _ShardFilter(logging.Filter):
    def __init__(self, shard_id: str):
        super().__init__()
        self.shard_id = shard_id

    def filter(self, record: logging.LogRecord) -> bool:
        record.shard = self.shard_id
        return True


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(), "logger": record.name, "shard": getattr(record, "shard", ""),
            "msg": record.getMessage()}
        entry.update(getattr(record, "fields", {}) or {})
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        extra = " ".join(f"{k}={v}" for k, v in (getattr(record, "fields", {}) or {}).items())
        line = f"{ts} {record.levelname:<7} {record.name} shard={getattr(record, 'shard', '')} {record.getMessage()}"
        if extra:
            line += " " + extra
        if record.exc_info:
            line += " error=" + json.dumps(self.formatException(record.exc_info))
        return line


def setup_logging(shard_id: str, log_format: str = "text", level: str = "info", stream: TextIO | None = None) -> None:
    """One line per event on stderr (or `stream`), with the shard id on every line."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JSONFormatter() if log_format == "json" else TextFormatter())
    handler.addFilter(_ShardFilter(shard_id))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for noisy in ("urllib3", "kubernetes"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
