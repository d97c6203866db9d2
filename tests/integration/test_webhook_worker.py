"""The webhook worker's quick path for plain admission calls, in process over a socket pair with gunicorn's own
connection, parser and logger: it answers what gunicorn would answer, gives back every request it does not take,
and leaves the connection as gunicorn reads it."""

from __future__ import annotations

import json
import os
import socket
import threading
import uuid
from typing import BinaryIO, Iterator

import pytest
from gunicorn.config import Config
from gunicorn.glogging import Logger
from gunicorn.workers.gthread import TConn

from velashard.sharding.proof import Signer
from velashard.webhook.app import create_app
from velashard.webhook.decisions import MutationContext, ValidationContext
from velashard.webhook.paths import MUTATING_PATH
from velashard.webhook.worker import StickyThreadWorker


def review(name: str) -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, name)), "operation": "CREATE", "namespace": "default",
        "kind": {"group": "core.oam.dev", "version": "v1beta1", "kind": "Application"},
        "userInfo": {"username": "someone"},
        "object": {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
                   "metadata": {"name": name, "namespace": "default"}, "spec": {"components": []}}}}).encode()


def post(body: bytes, path: str = MUTATING_PATH, extra: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:9443\r\nContent-Type: application/json\r\n"
            f"Accept: application/json\r\n{extra}Content-Length: {len(body)}\r\n\r\n").encode() + body


@pytest.fixture
def served() -> Iterator[tuple[StickyThreadWorker, TConn, socket.socket]]:
    """A worker with the webhook's app, and one connection to it: (worker, its side, the client's side)."""
    cfg = Config()
    cfg.set("threads", 1)
    cfg.set("keepalive", 75)
    worker = StickyThreadWorker(0, os.getpid(), [], None, 30, cfg, Logger(cfg))
    worker.wsgi = create_app(MutationContext(pick=lambda app: "shard-0", signer=Signer.generate()),
                             ValidationContext())
    server_side, client = socket.socketpair()
    client.settimeout(5)
    conn = TConn(cfg, server_side, ("127.0.0.1", 50000), ("127.0.0.1", 9443))
    conn.init()
    try:
        yield worker, conn, client
    finally:
        worker.tmp.close()
        server_side.close()
        client.close()


def read_response(client: socket.socket, reader: BinaryIO | None = None) -> tuple[list[str], bytes]:
    """(head lines, body) of the next response, which has a Content-Length; `reader` when several answers may
    arrive in one read."""
    reader = reader or client.makefile("rb")
    lines = []
    while (line := reader.readline()) != b"\r\n":
        lines.append(line.decode("latin-1").rstrip("\r\n"))
    length = next(int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:"))
    return lines, reader.read(length)


def by_gunicorn(worker: StickyThreadWorker, conn: TConn) -> bool:
    return worker.handle_request(next(conn.parser), conn)


def without_date(lines: list[str]) -> list[str]:
    return [line for line in lines if not line.startswith("Date: ")]


def test_a_plain_call_is_answered_as_gunicorn_answers_it(served):
    worker, conn, client = served
    client.sendall(post(review("same")))
    assert by_gunicorn(worker, conn)
    gunicorn_head, gunicorn_body = read_response(client)
    client.sendall(post(review("same")))
    assert worker._answer_plain(conn) is True
    quick_head, quick_body = read_response(client)
    assert without_date(quick_head) == without_date(gunicorn_head)
    assert any(line.startswith("Date: ") for line in quick_head)
    assert json.loads(quick_body) == json.loads(gunicorn_body)
    assert json.loads(quick_body)["response"]["patch"]  # the shard was assigned: the decision ran
    assert worker.nr == 2  # both count toward max_requests


@pytest.mark.parametrize("request_bytes", [
    post(review("chunked"), extra="Transfer-Encoding: chunked\r\n"),
    post(review("continue"), extra="Expect: 100-continue\r\n"),
    post(review("close"), extra="Connection: close\r\n"),
    post(review("twice"), extra="Host: elsewhere\r\n"),
    post(review("underscore"), extra="X_Forwarded_For: 10.0.0.1\r\n"),
    post(review("elsewhere"), path="/metrics"),
    post(review("escaped"), path="/mutating-core-oam-dev-v1beta1-applicatio%6Es"),
    b"GET " + MUTATING_PATH.encode() + b" HTTP/1.1\r\nHost: h\r\n\r\n",
    post(review("http10")).replace(b"HTTP/1.1", b"HTTP/1.0", 1),
    post(review("folded"), extra="X-Note: one\r\n  two\r\n"),
])
def test_what_is_not_plain_is_given_back_to_gunicorn_unread(served, request_bytes):
    worker, conn, client = served
    client.sendall(request_bytes)
    assert worker._answer_plain(conn) is None
    assert worker.nr == 0
    assert conn.parser.unreader.read(len(request_bytes)) == request_bytes  # every byte, in order


def test_the_query_kube_apiserver_adds_keeps_the_call_plain(served):
    worker, conn, client = served
    client.sendall(post(review("timeout"), path=MUTATING_PATH + "?timeout=10s"))
    assert worker._answer_plain(conn) is True
    lines, body = read_response(client)
    assert lines[0] == "HTTP/1.1 200 OK" and json.loads(body)["response"]["allowed"]


def test_pipelined_calls_are_answered_in_order(served):
    worker, conn, client = served
    client.sendall(post(review("first")) + post(review("second")))
    assert worker._answer_plain(conn) is True
    assert worker._answer_plain(conn) is True  # from what the first read took ahead
    reader = client.makefile("rb")
    uids = [json.loads(read_response(client, reader)[1])["response"]["uid"] for _ in range(2)]
    assert uids == [str(uuid.uuid5(uuid.NAMESPACE_URL, name)) for name in ("first", "second")]


def test_a_malformed_review_is_answered_400_like_gunicorns(served):
    worker, conn, client = served
    client.sendall(post(b"{not json"))
    assert by_gunicorn(worker, conn)
    gunicorn_head, gunicorn_body = read_response(client)
    client.sendall(post(b"{not json"))
    assert worker._answer_plain(conn) is True
    quick_head, quick_body = read_response(client)
    assert quick_head[0] == "HTTP/1.1 400 Bad Request"
    assert without_date(quick_head) == without_date(gunicorn_head) and quick_body == gunicorn_body


def test_a_client_gone_within_the_body_ends_the_connection(served):
    worker, conn, client = served
    client.sendall(post(review("cut"))[:-10])
    client.shutdown(socket.SHUT_WR)
    assert worker._answer_plain(conn) is False
    assert worker.nr == 0


def test_a_closed_connection_is_left_to_gunicorn(served):
    worker, conn, client = served
    client.shutdown(socket.SHUT_WR)
    assert worker._answer_plain(conn) is None
    with pytest.raises(StopIteration):  # gunicorn's parser ends the connection as usual
        next(conn.parser)


def test_the_last_request_before_a_restart_is_gunicorns(served):
    worker, conn, client = served
    worker.max_requests = 1  # gunicorn closes the connection and restarts the worker after it
    client.sendall(post(review("last")))
    assert worker._answer_plain(conn) is None


def test_a_large_review_arriving_in_pieces_is_read_whole(served):
    worker, conn, client = served
    big = review("big").replace(b'"components": []', b'"components": [' + b", ".join(
        b'{"name": "c%d", "type": "worker", "properties": {"image": "x"}}' % i for i in range(20000)) + b"]")
    assert len(big) > 1_000_000
    request = post(big)
    sender = threading.Thread(target=lambda: [client.sendall(request[i:i + 65536])
                                              for i in range(0, len(request), 65536)])
    sender.start()
    assert worker._answer_plain(conn) is True
    sender.join()
    lines, body = read_response(client)
    assert lines[0] == "HTTP/1.1 200 OK" and json.loads(body)["response"]["allowed"]


def test_a_head_with_bare_line_feeds_is_given_back_at_once(served):
    """Such a head never holds the blank line the quick path looks for: it must not wait for one."""
    worker, conn, client = served
    conn.sock.settimeout(2)  # waiting would end in a timeout, and the connection with it
    body = review("lf")
    request = (f"POST {MUTATING_PATH} HTTP/1.1\nHost: h\nContent-Length: {len(body)}\n\n").encode() + body
    client.sendall(request)
    assert worker._answer_plain(conn) is None
    assert conn.parser.unreader.read(len(request)) == request
