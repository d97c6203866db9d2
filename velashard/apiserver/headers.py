"""Heads of HTTP messages as the API server reads them: a request's (the request line's checks of http.server)
and an admission webhook's answer (http.client's response), with headers read without the email package.

http.server and http.client hand every head to email's feed parser (through http.client.parse_headers): some 90
microseconds for the ten headers a Kubernetes client sends, on each of the thousands of requests a second that
the API server serves, for folding rules and MIME structure that HTTP/1.1 headers do not use. Here ordinary
header lines are split at their colon; a head with anything unusual in it (a folded line, a line without a
colon) goes to http.client's parser as before, so odd requests are read exactly as they were.
"""

from __future__ import annotations

import http.client
import io
import re
from typing import Any, BinaryIO

MAX_LINE = 65536  # http.client's limits, so a request is refused where it was before
MAX_HEADERS = 100
_NAME = re.compile(rb"[\x21-\x39\x3b-\x7e]+")  # what email's parser takes for a header name


class Headers:
    """What the server and http.client read of email.message.Message: case-insensitive `get`, `[]`, `in`,
    `get_all` and `items`, the first of repeated headers for `get`, all of them in order for `get_all`."""

    __slots__ = ("_items", "_index")

    def __init__(self, items: list[tuple[str, str]]):
        self._items = items
        index: dict[str, list[str]] = {}
        for name, value in items:
            index.setdefault(name.lower(), []).append(value)
        self._index = index

    def get(self, name: str, failobj: Any = None) -> Any:
        values = self._index.get(name.lower())
        return values[0] if values else failobj

    def get_all(self, name: str, failobj: Any = None) -> Any:
        values = self._index.get(name.lower())
        return list(values) if values else failobj

    def __getitem__(self, name: str) -> str | None:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._index

    def items(self) -> list[tuple[str, str]]:
        return list(self._items)


def read_headers(rfile: BinaryIO) -> Any:
    """The headers up to the blank line that ends them: Headers, or http.client's message for a head out of the
    ordinary. Raises http.client.LineTooLong or HTTPException ("got more than 100 headers") as http.client does."""
    lines: list[bytes] = []
    while True:
        line = rfile.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise http.client.LineTooLong("header line")
        if line in (b"\r\n", b"\n", b""):
            break
        lines.append(line)
        if len(lines) > MAX_HEADERS:
            raise http.client.HTTPException(f"got more than {MAX_HEADERS} headers")
    items: list[tuple[str, str]] = []
    for line in lines:
        name, colon, value = line.partition(b":")
        if not colon or not _NAME.fullmatch(name):
            return http.client.parse_headers(io.BytesIO(b"".join(lines) + b"\r\n"))
        # As email's compat32 policy keeps a value: leading blanks and the line end removed, the rest as sent.
        items.append((name.decode("iso-8859-1"), value.decode("iso-8859-1").lstrip(" \t").rstrip("\r\n")))
    return Headers(items)


class Response(http.client.HTTPResponse):
    """http.client's response to a request the API server makes (an admission webhook's answer), with its
    headers read by read_headers: the status line, the framing and the keep-alive decision as http.client
    decides them."""

    def begin(self) -> None:
        if self.headers is not None:
            return
        version, status, reason = self._read_status()  # type: ignore[attr-defined]
        while status == http.client.CONTINUE:  # interim answers: their headers are read and dropped
            read_headers(self.fp)
            version, status, reason = self._read_status()  # type: ignore[attr-defined]
        self.code = self.status = status
        self.reason = reason.strip()
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise http.client.UnknownProtocol(version)
        self.headers = self.msg = read_headers(self.fp)
        self.chunked = (self.headers.get("transfer-encoding") or "").lower() == "chunked"
        self.chunk_left = None
        self.will_close = self._check_close()  # type: ignore[attr-defined]
        self.length = None
        length = self.headers.get("content-length")
        if length and not self.chunked:
            try:
                self.length = int(length)
            except ValueError:
                pass
            if self.length is not None and self.length < 0:
                self.length = None
        if status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED) or 100 <= status < 200 or \
                self._method == "HEAD":  # type: ignore[attr-defined]
            self.length = 0
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True  # the body ends when the connection does
