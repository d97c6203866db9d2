"""The plain admission call, read and answered without gunicorn's request machinery (webhook/worker.py).

The API server calls the webhook over connections it keeps alive, each call an HTTP/1.1 POST of a review with a
Content-Length and a few ordinary headers. gunicorn reads such a request through its parser, header policy and
WSGI environ, and answers through its response object: some 0.2 ms of the webhook process's CPU per call, three
times what deciding it costs. A head that is plain (below) is answered here instead; any other head is left to
gunicorn, which reads it as it always does: another method or version, a path that is not an admission path, a
percent-escape in the path, a chunked body, Expect, Connection or Upgrade, a header repeated, folded, malformed
or with an underscore in its name (gunicorn's header_map may drop those), no Host, a line ended by LF alone, an
oversized head or body.
"""

from __future__ import annotations

import re
from http import HTTPStatus

from velashard.httpdate import http_date

MAX_HEAD = 8190  # bytes: gunicorn's limit for one header line, here for the whole head
_TARGET = re.compile(rb"/[\x21-\x24\x26-\x7e]*")  # an origin-form target without percent-escapes
_TOKEN = re.compile(rb"[!#$%&'*+.^`|~0-9A-Za-z-]+")  # a header name, without "_"
_VALUE = re.compile(rb"[\t\x20-\x7e\x80-\xff]*")
_LEFT_TO_GUNICORN = frozenset((b"transfer-encoding", b"expect", b"connection", b"upgrade"))


def plain_admission(head: bytes, paths: frozenset[str], max_body: int) -> tuple[str, int] | None:
    """(path, body length) when `head` (without its final blank line) is a plain POST to one of `paths` with a
    body of at most `max_body` bytes; None when gunicorn should read the request."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or parts[0] != b"POST" or parts[2] != b"HTTP/1.1" or not _TARGET.fullmatch(parts[1]):
        return None
    path = parts[1].partition(b"?")[0].decode("ascii")
    if path not in paths:
        return None
    seen: set[bytes] = set()
    length = None
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        value = value.strip(b" \t")
        if not colon or not _TOKEN.fullmatch(name) or not _VALUE.fullmatch(value):
            return None
        name = name.lower()
        if name in seen or name in _LEFT_TO_GUNICORN:
            return None
        seen.add(name)
        if name == b"content-length":
            if not value.isdigit() or len(value) > 12:
                return None
            length = int(value)
    if length is None or length > max_body or b"host" not in seen:
        return None
    return path, length


def has_bare_line_feed(data: bytes) -> bool:
    """Whether a line of `data` ends in LF without CR: such a head is gunicorn's to read (or refuse), and its end
    is not the CRLF blank line that a plain head ends with."""
    return b"\n" in data.replace(b"\r\n", b"")


def answer_head(code: int, headers: list[tuple[str, str]]) -> bytes:
    """The head gunicorn would write for this answer on a connection it keeps alive."""
    lines = [f"HTTP/1.1 {code} {HTTPStatus(code).phrase}", "Server: gunicorn", f"Date: {http_date()}",
             "Connection: keep-alive", *(f"{name}: {value}" for name, value in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

