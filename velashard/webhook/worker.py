"""The webhook server's gunicorn worker: gthread, except that a kept-alive connection stays with its thread
while it is busy, its plain admission calls are answered without gunicorn's parser, and a response goes out in
one write.

gunicorn's gthread worker hands every request of a kept-alive connection from its main thread to a pool thread
and back (the poller, the pool, a done-callback through a pipe, the poller again): three thread wake-ups per
request, each waiting for the GIL behind whatever else runs. The API server calls the webhook over a few
connections that it keeps alive and reuses back to back, so here a thread that served a request waits a moment
on its connection for the next one and serves it at once: one wake-up per request. It gives the connection back
to the poller (which keeps it alive for `keepalive` seconds) once it stays idle for LINGER seconds, or as soon as
another connection waits for a thread, so that no connection starves. The next request such a thread reads is
answered directly by the app's admission paths when its head is plain (webhook/plain_http.py), and by gunicorn
otherwise; a connection's first request, and any that comes through the poller, is always gunicorn's.

Why not gunicorn's public seams: its gthread worker, with its Python or its C parser (`http_parser`, gunicorn_h1c),
answered the same admission calls side by side at twice this worker's CPU per call and some 0.8 ms more at p50
(`hack/bench_webhook.py --compare-workers`, docs/benchmarks.md). What this reads of gunicorn is private
(TESTED_GUNICORN below): gunicorn 22 and 23 hang with it and 24 drops half the kept-alive calls, so setup.py pins
the range it was tested with, tests/unit/test_webhook_worker_pins.py fails when a name it reads goes away, and
outside that range the server runs gunicorn's own gthread worker instead (`worker_class`).
"""

from __future__ import annotations

import select
import threading
import time
from typing import Any

import gunicorn
from gunicorn.workers.gthread import ThreadWorker

from velashard.webhook.paths import MAX_REVIEW_BYTES
from velashard.webhook.plain_http import MAX_HEAD, answer_head, has_bare_line_feed, plain_admission

# The gunicorn releases whose private state this worker reads, as tested (setup.py pins the same range):
# gthread's enqueue_req(conn), finish_request(conn, fs), handle(conn), handle_request(req, conn), keepalived_conns and
# max_keepalived; TConn's sock, parser.unreader (buf, read, unread) and is_http2; the base worker's nr and
# max_requests.
TESTED_GUNICORN = ((25, 0, 3), (28, 0, 0))  # from, up to but not including
PUBLIC_WORKER = "gthread"


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:3] if part.isdigit())


def worker_class(version: str = gunicorn.__version__) -> str:
    """This worker for the gunicorn releases it was tested with, gunicorn's own gthread worker for any other."""
    low, high = TESTED_GUNICORN
    return "velashard.webhook.worker.StickyThreadWorker" if low <= _release(version) < high else PUBLIC_WORKER


LINGER = 1.0  # seconds a thread waits on its idle connection before handing it back to the poller
_SLICE = 0.05  # seconds between looks at whether another connection waits for a thread


def _readable_within(conn: Any, seconds: float) -> bool:
    """Whether the next request's bytes are there or arrive within `seconds`."""
    if conn.parser.unreader.buf.getvalue():
        return True
    sock = conn.sock
    pending = getattr(sock, "pending", None)
    if pending is not None and pending():  # TLS records already decrypted into the SSL object
        return True
    # poll: one system call per wait, where an epoll selector makes three more (create, register, close).
    poller = select.poll()
    try:
        poller.register(sock, select.POLLIN)
    except (OSError, ValueError):
        return False
    return bool(poller.poll(seconds * 1000))


class _OneWrite:
    """A connection's socket while one response is written. gunicorn sends a response's head and its body in two
    writes: two TLS records, which the API server reads in two calls, each giving up and taking back its GIL, and
    under load a thread waits for it. Held back, the head goes out with the body in one record. (gunicorn's
    sendfile, which would write around this, is never used over TLS.)"""

    def __init__(self, sock: Any):
        self._sock = sock
        self._head: bytes | None = None

    def sendall(self, data: bytes) -> None:
        if self._head is None:  # gunicorn's first write of a response is its head
            self._head = bytes(data)
            return
        if self._head:
            data, self._head = self._head + bytes(data), b""
        self._sock.sendall(data)

    def flush(self) -> None:
        """Send a head that no body followed."""
        if self._head:
            head, self._head = self._head, b""
            self._sock.sendall(head)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class StickyThreadWorker(ThreadWorker):
    """gthread whose threads keep serving the connection they were handed while it stays busy."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._assigned = 0  # connections handed to the pool and not finished: queued or being served

    def enqueue_req(self, conn: Any) -> None:
        with self._lock:
            self._assigned += 1
        super().enqueue_req(conn)

    def finish_request(self, conn: Any, fs: Any) -> None:
        with self._lock:
            self._assigned -= 1
        super().finish_request(conn, fs)

    def _others_waiting(self) -> bool:
        with self._lock:
            return self._assigned > self.cfg.threads

    def handle_request(self, req: Any, conn: Any) -> Any:
        sock = conn.sock
        conn.sock = writer = _OneWrite(sock)
        try:
            keepalive = super().handle_request(req, conn)
        finally:
            conn.sock = sock
        writer.flush()  # not after a failure: gunicorn has closed the connection then
        return keepalive

    def handle(self, conn: Any) -> Any:
        keepalive = super().handle(conn)
        idle_until = time.monotonic() + LINGER
        while keepalive is True and self.alive and not self._others_waiting():
            remaining = idle_until - time.monotonic()
            if remaining <= 0:
                break  # idle: the poller keeps it alive without holding a thread
            if _readable_within(conn, min(_SLICE, remaining)):
                keepalive = self._answer_plain(conn)
                if keepalive is None:
                    keepalive = super().handle(conn)
                idle_until = time.monotonic() + LINGER
        return keepalive

    def _answer_plain(self, conn: Any) -> bool | None:
        """Answer the connection's next request if it is a plain admission call: whether to keep the connection,
        or None, with what was read given back to the connection, for gunicorn to read the request."""
        paths = getattr(self.wsgi, "admission_paths", None)
        # gunicorn closes the connection after this request in these cases, and restarts the worker in the last.
        if paths is None or conn.is_http2 or not self.cfg.keepalive or \
                len(self.keepalived_conns) >= self.max_keepalived or self.nr + 1 >= self.max_requests:
            return None
        unreader = conn.parser.unreader
        try:
            data = b""
            end = -1
            while end < 0 and len(data) <= MAX_HEAD:
                chunk = unreader.read()
                if not chunk:
                    break  # the client closed the connection: gunicorn notices it as usual
                data += chunk
                end = data.find(b"\r\n\r\n")
                if end < 0 and has_bare_line_feed(data):
                    break  # lines ended by LF alone: the blank line looked for may never come
            call = plain_admission(data[:end], paths.paths, MAX_REVIEW_BYTES) if 0 <= end <= MAX_HEAD else None
            if call is None:
                unreader.unread(data)
                return None
            path, length = call
            body = data[end + 4:end + 4 + length]
            if len(data) > end + 4 + length:  # the next request, pipelined
                unreader.unread(data[end + 4 + length:])
            elif len(body) < length:
                rest = unreader.read(length - len(body))  # in one piece, whatever the size
                if len(rest) < length - len(body):
                    return False  # the client went away within the body
                body += rest
            self.nr += 1
            code, answer, headers = paths.answer(path, "POST", body)
            conn.sock.sendall(answer_head(code, headers) + answer)
            return True
        except OSError as err:  # ssl.SSLError and timeouts among them: the connection is done for
            self.log.debug("Closing connection after an error on it: %s", err)
            return False
