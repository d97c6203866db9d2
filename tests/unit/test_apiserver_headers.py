"""The API server's reading of request heads and webhook answers against http.client's, which it replaces."""

from __future__ import annotations

import http.client
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from velashard.apiserver.headers import MAX_HEADERS, Headers, Response, read_headers

NAMES = ("Host", "Content-Type", "content-type", "Authorization", "Impersonate-Group", "X-Odd")


def both(raw: bytes):
    ours, theirs = read_headers(io.BytesIO(raw)), http.client.parse_headers(io.BytesIO(raw))
    for name in NAMES + ("Missing",):
        assert ours.get(name) == theirs.get(name), name
        assert ours.get_all(name) == theirs.get_all(name), name
        assert (name in ours) == (name in theirs), name
    return ours


def test_a_kubernetes_client_s_head():
    head = both(b"Host: 127.0.0.1:6443\r\nUser-Agent: velashard/0.1 shard=shard-0\r\nAuthorization: Bearer t\r\n"
                b"Impersonate-Group: a\r\nImpersonate-Group: b\r\nContent-Type:  application/json \r\n\r\nbody")
    assert isinstance(head, Headers)
    assert head.get_all("impersonate-group") == ["a", "b"]
    assert head["content-type"] == "application/json "  # leading blanks go, the rest stays as sent


@pytest.mark.parametrize("raw", [
    b"Host: a\r\n folded\r\nX-Odd: b\r\n\r\n",       # a folded line
    b"Bad Name: a\r\nHost: b\r\n\r\n",               # not a header name
    b"no colon\r\nHost: b\r\n\r\n",
    b"Host: a\n\n",                                  # bare line feeds
    b"\r\n",
])
def test_an_unusual_head_is_read_as_http_client_reads_it(raw):
    both(raw)


def test_limits_as_http_client():
    with pytest.raises(http.client.LineTooLong):
        read_headers(io.BytesIO(b"X-Odd: " + b"a" * 70000 + b"\r\n\r\n"))
    with pytest.raises(http.client.HTTPException, match="more than 100 headers"):
        read_headers(io.BytesIO(b"X-Odd: a\r\n" * (MAX_HEADERS + 1) + b"\r\n"))


line_text = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(NAMES + ("Bad Name", " Host", "")), line_text), max_size=6))
def test_any_head_reads_as_http_client_reads_it(pairs):
    both(b"".join(f"{name}:{value}\r\n".encode() for name, value in pairs) + b"\r\n")


class _Socket:
    def __init__(self, data: bytes):
        self._data = data

    def makefile(self, mode: str) -> io.BytesIO:
        return io.BytesIO(self._data)


ANSWERS = [
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\n\r\n{}",                                          # ends with the connection
    b"HTTP/1.1 100 Continue\r\nX-Odd: a\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n",
    b"HTTP/1.0 200 OK\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.0 200 OK\r\nContent-Length: -3\r\n\r\n{}",
    b"HTTP/1.1 500 Internal Server Error \r\nContent-Length: x\r\nConnection: close\r\n\r\noops",
    b"HTTP/1.1 200 OK\r\nX-Odd: a\r\n folded\r\nContent-Length: 2\r\n\r\n{}",
]


@pytest.mark.parametrize("answer", ANSWERS)
def test_a_webhook_answer_is_read_as_http_client_reads_it(answer):
    ours, theirs = Response(_Socket(answer), method="POST"), http.client.HTTPResponse(_Socket(answer), method="POST")
    ours.begin()
    theirs.begin()
    for attr in ("status", "reason", "version", "chunked", "length", "will_close"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    assert ours.getheader("content-length") == theirs.getheader("content-length")
    assert ours.getheader("x-odd") == theirs.getheader("x-odd")
    assert ours.read() == theirs.read()


def test_an_unknown_protocol_is_refused():
    with pytest.raises(http.client.UnknownProtocol):
        Response(_Socket(b"HTTP/2.0 200 OK\r\n\r\n"), method="POST").begin()
