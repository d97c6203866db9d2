"""A request's head as the API server reads it: the request line's checks of http.server, and headers without
the email package.

http.server hands every request's headers to email's feed parser (through http.client.parse_headers): some 90
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
    """What the server reads of email.message.Message: case-insensitive `get`, `[]`, `in` and `get_all`,
    the first of repeated headers for `get`, all of them in order for `get_all`."""

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

    def keys(self) -> list[str]:
        return [name for name, _ in self._items]

    def __len__(self) -> int:
        return len(self._items)

    def __str__(self) -> str:
        return "".join(f"{name}: {value}\n" for name, value in self._items) + "\n"


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
