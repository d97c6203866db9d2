"""Every send passes the write fence, a resend too: no library sends a write again on its own (kube/transport.py),
and the client resends only what cannot act twice (kube/client.py `resend_after`), through the fence.

The failures are real: a proxy in front of the embedded API server that forwards a request and then stalls its
answer past the client's read timeout, and a port nothing listens on. What reached the API server is read from
its audit log."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import urlsplit

import pytest

from tests.integration.helpers import eventually
from velashard.kube import errors
from velashard.kube.client import MAX_RESENDS, KubeClient, resend_after
from velashard.kube.config import ClientConfig
from velashard.kube.fence import Fence
from velashard.kube.resources import CONFIGMAPS


class StallingProxy:
    """Forwards each request to `upstream` and answers with what it said, but holds the answer for `stall`
    seconds when `stalls(method, path)`; records what it received."""

    def __init__(self, upstream: str, stalls: Callable[[str, str], bool], stall: float):
        self.received: list[tuple[str, str]] = []
        self.answered: list[tuple[str, str]] = []
        target = urlsplit(upstream)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: object) -> None:
                return

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.received.append((self.command, self.path))
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
                conn.request(self.command, self.path, body or None,
                             {k: v for k, v in self.headers.items() if k.lower() != "host"})
                answer = conn.getresponse()
                payload = answer.read()
                conn.close()
                if stalls(self.command, self.path):
                    time.sleep(stall)
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Type", answer.getheader("Content-Type") or "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up waiting
                outer.answered.append((self.command, self.path))

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _forward

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(make_apiserver):
    return make_apiserver()


def fenced_client(url: str, token: str, renew_deadline: float) -> tuple[KubeClient, Fence]:
    """A client whose writes pass a fence that is open now and trips `renew_deadline` seconds from now."""
    kube = KubeClient(ClientConfig(url, token=lambda: token), shard_id="fenced")
    fence = Fence(renew_deadline)
    fence.renewed(time.monotonic())
    assert fence.reopen()
    kube.set_fence(fence, "vela-system", "velashard-fenced")
    return kube, fence


def sends(server, verb: str, name: str) -> list[dict]:
    return [r for r in server.audit.since(0)["items"]
            if r["verb"] == verb and r["resource"] == "configmaps" and r["name"] == name]


def test_a_put_whose_answer_times_out_is_never_sent_again_while_the_fence_trips(server):
    admin = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test")
    admin.create(CONFIGMAPS, {"metadata": {"name": "fenced", "namespace": "default"}, "data": {"n": "0"}})
    path = CONFIGMAPS.path("default", "fenced")
    proxy = StallingProxy(server.url, lambda method, p: method == "PUT" and p == path, stall=3.0)
    try:
        kube, fence = fenced_client(proxy.url, server.admin_token, renew_deadline=0.5)
        current = kube.get(CONFIGMAPS, "fenced", "default")
        current["data"] = {"n": "1"}
        with pytest.raises(errors.TransportError, match="timed out"):
            kube.request("update", "PUT", path, body=current, timeout=(5.0, 1.0))
        # The fence tripped while the answer was awaited: a resend would have been a write past it.
        assert not fence.check()
        eventually(lambda: ("PUT", path) in proxy.answered, timeout=10)
        time.sleep(0.5)
        assert proxy.received.count(("PUT", path)) == 1
        assert len(sends(server, "update", "fenced")) == 1  # the server got it once, and applied it
        assert admin.get(CONFIGMAPS, "fenced", "default")["data"] == {"n": "1"}
        with pytest.raises(errors.Fenced):  # the next write is refused before it leaves
            kube.update(CONFIGMAPS, current)
        assert proxy.received.count(("PUT", path)) == 1
    finally:
        proxy.close()


def test_a_read_whose_answer_times_out_is_sent_again(server):
    admin = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test")
    admin.create(CONFIGMAPS, {"metadata": {"name": "read", "namespace": "default"}})
    path = CONFIGMAPS.path("default", "read")
    stalled: list[str] = []

    def first_get(method: str, p: str) -> bool:
        if method == "GET" and p == path and not stalled:
            stalled.append(p)
            return True
        return False

    proxy = StallingProxy(server.url, first_get, stall=2.0)
    try:
        kube, _ = fenced_client(proxy.url, server.admin_token, renew_deadline=60.0)
        waits: list[float] = []
        kube.sleep = waits.append
        got = kube.request("get", "GET", path, timeout=(5.0, 0.5))
        assert got["metadata"]["name"] == "read" and proxy.received.count(("GET", path)) == 2 and len(waits) == 1
    finally:
        proxy.close()


def test_a_write_that_could_not_connect_is_sent_again_only_through_the_fence():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens once closed: the request never leaves
    kube, fence = fenced_client(f"http://127.0.0.1:{port}", "token-never-used-here", renew_deadline=60.0)
    waits: list[float] = []
    kube.sleep = waits.append
    with pytest.raises(errors.TransportError):
        kube.create(CONFIGMAPS, {"metadata": {"name": "x", "namespace": "default"}})
    assert len(waits) == MAX_RESENDS  # resent while the fence is open
    waits.clear()
    kube.sleep = lambda seconds: (waits.append(seconds), fence.trip("test: the lease was lost meanwhile"))
    with pytest.raises(errors.Fenced):
        kube.create(CONFIGMAPS, {"metadata": {"name": "x", "namespace": "default"}})
    assert len(waits) == 1


def test_what_is_sent_again_after_no_answer():
    import urllib3.exceptions as u

    refused = u.NewConnectionError(None, "refused")
    timed_out = u.ReadTimeoutError(None, "/x", "read timed out")
    reset = u.ProtocolError("Connection aborted.", ConnectionResetError())
    for method in ("GET", "HEAD"):
        assert resend_after(method, timed_out, 0) == resend_after(method, reset, 0) == 0.2
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        assert resend_after(method, timed_out, 0) is None and resend_after(method, reset, 0) is None
        assert resend_after(method, refused, 1) == 0.4
    assert resend_after("GET", refused, MAX_RESENDS) is None
