"""The client honours Retry-After as client-go does: 429 for every verb, 5xx only for reads, bounded."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

from velashard.kube import errors
from velashard.kube.client import MAX_RETRIES, KubeClient, retry_after
from velashard.kube.config import ClientConfig
from velashard.kube.resources import CONFIGMAPS


class Scripted:
    """An HTTP server answering each request with the next scripted (status, Retry-After) and then 200."""

    def __init__(self) -> None:
        self.script: list[tuple[int, str | None]] = []
        self.requests: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: object) -> None:
                return

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                outer.requests.append(self.command)
                status, after = outer.script.pop(0) if outer.script else (200, None)
                body = json.dumps({"kind": "ConfigMap", "metadata": {"name": "a"}} if status == 200 else {
                    "kind": "Status", "code": status, "reason": "TooManyRequests", "message": "slow down"}).encode()
                self.send_response(status)
                if after is not None:
                    self.send_header("Retry-After", after)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def client(self, waits: list[float]) -> KubeClient:
        kube = KubeClient(ClientConfig(f"http://127.0.0.1:{self.httpd.server_address[1]}"), shard_id="retry")
        kube.sleep = waits.append
        return kube


@pytest.fixture
def server() -> Iterator[Scripted]:
    scripted = Scripted()
    yield scripted
    scripted.httpd.shutdown()
    scripted.httpd.server_close()


def test_429_is_retried_after_what_the_server_asks_for_any_verb(server):
    waits: list[float] = []
    kube = server.client(waits)
    server.script = [(429, "2"), (429, "0")]
    assert kube.get(CONFIGMAPS, "a", "default")["metadata"]["name"] == "a"
    server.script = [(429, "1")]
    kube.create(CONFIGMAPS, {"metadata": {"name": "a", "namespace": "default"}})
    assert waits == [2.0, 0.0, 1.0]
    assert server.requests == ["GET", "GET", "GET", "POST", "POST"]


def test_a_5xx_with_retry_after_is_retried_for_reads_only(server):
    waits: list[float] = []
    kube = server.client(waits)
    server.script = [(503, "1")]
    kube.get(CONFIGMAPS, "a", "default")
    server.script = [(503, "1")]
    with pytest.raises(errors.KubeError):
        kube.create(CONFIGMAPS, {"metadata": {"name": "a", "namespace": "default"}})
    assert waits == [1.0] and server.requests == ["GET", "GET", "POST"]


def test_retries_are_bounded_and_the_last_answer_is_the_error(server):
    waits: list[float] = []
    kube = server.client(waits)
    server.script = [(429, "1")] * (MAX_RETRIES + 5)
    with pytest.raises(errors.KubeError, match="slow down"):
        kube.get(CONFIGMAPS, "a", "default")
    assert len(server.requests) == MAX_RETRIES + 1 and len(waits) == MAX_RETRIES


def test_retry_after_decision():
    assert retry_after(429, "POST", "3", 0) == 3.0
    assert retry_after(429, "GET", None, 0) is None  # no header: not asked to retry
    assert retry_after(429, "GET", "Wed, 21 Oct 2015 07:28:00 GMT", 0) == 1.0
    assert retry_after(429, "GET", "3600", 0) == 10.0  # capped
    assert retry_after(500, "GET", "1", 0) == 1.0 and retry_after(500, "PATCH", "1", 0) is None
    assert retry_after(409, "GET", "1", 0) is None and retry_after(429, "GET", "1", MAX_RETRIES) is None
