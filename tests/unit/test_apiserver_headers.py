"""The API server's header reading against http.client's, which it replaces for ordinary heads."""

from __future__ import annotations

import http.client
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from velashard.apiserver.http.headers import MAX_HEADERS, Headers, read_headers

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
