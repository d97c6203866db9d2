"""What the webhook's worker reads of gunicorn's private state (velashard/webhook/worker.py), pinned: the installed
gunicorn is one it was tested with, setup.py allows no other, and each name it reads is still there with the
shape it expects. When one fails, a gunicorn release changed what the quick path relies on: test the new release
(tests/integration/test_webhook_worker.py, test_webhook_server.py, hack/bench_webhook.py --compare-workers) before
widening the pin, or drop the quick path for gunicorn's public gthread worker."""

from __future__ import annotations

import inspect
import io
import os
import re
import socket

import gunicorn
from gunicorn.config import Config
from gunicorn.glogging import Logger
from gunicorn.workers.base import Worker
from gunicorn.workers.gthread import TConn, ThreadWorker

from velashard.webhook.worker import PUBLIC_WORKER, TESTED_GUNICORN, StickyThreadWorker, worker_class

SETUP = os.path.join(os.path.dirname(__file__), "..", "..", "setup.py")


def release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def test_setup_pins_the_gunicorn_releases_the_worker_was_tested_with():
    with open(SETUP) as fh:
        pin = re.search(r'"gunicorn>=([0-9.]+),<([0-9.]+)"', fh.read())
    assert pin, "setup.py must pin gunicorn to the range webhook/worker.py was tested with"
    low, high = TESTED_GUNICORN
    assert (release(pin.group(1)), release(pin.group(2)) + (0,) * (3 - len(release(pin.group(2))))) == (low, high)
    assert low <= release(gunicorn.__version__) < high, f"gunicorn {gunicorn.__version__} is outside {TESTED_GUNICORN}"


def test_outside_the_tested_releases_the_server_runs_gunicorns_own_worker():
    assert worker_class("27.0.1").endswith("StickyThreadWorker") and worker_class("25.0.3").endswith(
        "StickyThreadWorker")
    assert worker_class("24.1.1") == worker_class("22.0.0") == worker_class("28.0.0") == PUBLIC_WORKER


def test_the_gthread_methods_it_overrides_keep_their_shape():
    params = {name: list(inspect.signature(getattr(ThreadWorker, name)).parameters)
              for name in ("enqueue_req", "finish_request", "handle", "handle_request")}
    assert params == {"enqueue_req": ["self", "conn"], "finish_request": ["self", "conn", "fs"],
                      "handle": ["self", "conn"], "handle_request": ["self", "req", "conn"]}
    assert all(getattr(StickyThreadWorker, name) is not getattr(ThreadWorker, name) for name in params)


def test_the_state_it_reads_is_where_it_reads_it():
    cfg = Config()
    cfg.set("threads", 2)
    worker = StickyThreadWorker(0, os.getppid(), [], None, 30, cfg, Logger(cfg))
    for name in ("keepalived_conns", "max_keepalived", "nr", "max_requests", "alive", "cfg", "log"):
        assert hasattr(worker, name), f"gunicorn's worker has no {name} any more"
    assert isinstance(worker.nr, int) and isinstance(worker.max_keepalived, int)
    assert "self.wsgi = " in inspect.getsource(Worker.load_wsgi)  # the app, as the worker loaded it
    server, client = socket.socketpair()
    try:
        conn = TConn(cfg, server, ("127.0.0.1", 1), ("127.0.0.1", 2))
        conn.init()
        assert conn.sock is server and isinstance(conn.is_http2, bool)
        unreader = conn.parser.unreader
        assert isinstance(unreader.buf, io.BytesIO)
        client.sendall(b"abc")
        assert unreader.read() == b"abc"
        unreader.unread(b"abc")
        assert unreader.buf.getvalue() == b"abc" and unreader.read(2) == b"ab"
    finally:
        server.close()
        client.close()
