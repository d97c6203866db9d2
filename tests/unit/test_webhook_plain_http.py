"""Which heads the webhook worker answers itself (webhook/plain_http.py): a plain admission POST, and nothing
that gunicorn would read differently."""

from __future__ import annotations

import re

import pytest

from velashard.webhook.paths import MUTATING_PATH, VALIDATING_PATH
from velashard.webhook.plain_http import MAX_HEAD, answer_head, has_bare_line_feed, plain_admission

PATHS = frozenset({MUTATING_PATH, VALIDATING_PATH})
PLAIN = [f"POST {MUTATING_PATH} HTTP/1.1", "Host: 10.0.0.1:9443", "User-Agent: kube-apiserver-admission",
         "Content-Length: 1234", "Accept: application/json, */*", "Content-Type: application/json",
         "Accept-Encoding: gzip"]


def head(lines: list[str]) -> bytes:
    return "\r\n".join(lines).encode("latin-1")


def test_kube_apiservers_call_is_plain():
    assert plain_admission(head(PLAIN), PATHS, 4096) == (MUTATING_PATH, 1234)
    target = [f"POST {VALIDATING_PATH}?timeout=10s HTTP/1.1", *PLAIN[1:]]
    assert plain_admission(head(target), PATHS, 4096) == (VALIDATING_PATH, 1234)
    spaced = [*PLAIN[:3], "content-length:\t1234 ", *PLAIN[4:]]  # names in any case, optional whitespace
    assert plain_admission(head(spaced), PATHS, 4096) == (MUTATING_PATH, 1234)


@pytest.mark.parametrize("change", [
    lambda h: [h[0].replace("POST", "PUT"), *h[1:]],
    lambda h: [h[0].replace("HTTP/1.1", "HTTP/1.0"), *h[1:]],
    lambda h: [h[0].replace("HTTP/1.1", "HTTP/2"), *h[1:]],
    lambda h: [h[0].replace(MUTATING_PATH, "/metrics"), *h[1:]],
    lambda h: [h[0].replace(MUTATING_PATH, MUTATING_PATH + "/"), *h[1:]],
    lambda h: [h[0].replace(MUTATING_PATH, MUTATING_PATH.replace("-", "%2D", 1)), *h[1:]],
    lambda h: [h[0].replace(MUTATING_PATH, "http://10.0.0.1" + MUTATING_PATH), *h[1:]],
    lambda h: [h[0].replace(" HTTP", "  HTTP"), *h[1:]],
    lambda h: [h[0] + " ", *h[1:]],
    lambda h: [*h, "Transfer-Encoding: chunked"],
    lambda h: [*h, "Expect: 100-continue"],
    lambda h: [*h, "Connection: close"],
    lambda h: [*h, "Connection: keep-alive"],
    lambda h: [*h, "Upgrade: h2c"],
    lambda h: [*h, "content-length: 1234"],
    lambda h: [*h, "HOST: other"],
    lambda h: [*h, "X_Forwarded_Proto: https"],
    lambda h: [*h, " folded"],
    lambda h: [*h, "\tfolded"],
    lambda h: [*h, "No-Colon"],
    lambda h: [*h, "Space : before colon"],
    lambda h: [*h, "Bad\x00: value"],
    lambda h: [*h, "X-Bad: a\x00b"],
    lambda h: [*h, "X-Bad: a\nb"],
    lambda h: [*h, ""],
    lambda h: [h[0], *(line for line in h[1:] if not line.startswith("Host"))],
    lambda h: [h[0], *(line for line in h[1:] if not line.startswith("Content-Length"))],
    lambda h: [*(line if not line.startswith("Content-Length") else "Content-Length: +1234" for line in h)],
    lambda h: [*(line if not line.startswith("Content-Length") else "Content-Length: 12 34" for line in h)],
    lambda h: [*(line if not line.startswith("Content-Length") else "Content-Length: 4097" for line in h)],
    lambda h: [*(line if not line.startswith("Content-Length") else "Content-Length: 1" + "0" * 40 for line in h)],
    lambda h: ["", *h],
])
def test_anything_else_is_left_to_gunicorn(change):
    assert plain_admission(head(change(list(PLAIN))), PATHS, 4096) is None


def test_the_body_limit_is_inclusive():
    sized = [*(line if not line.startswith("Content-Length") else "Content-Length: 4096" for line in PLAIN)]
    assert plain_admission(head(sized), PATHS, 4096) == (MUTATING_PATH, 4096)


def test_the_answer_head_is_gunicorns_for_a_kept_alive_connection():
    written = answer_head(200, [("Content-Type", "application/json"), ("Content-Length", "42")]).decode()
    assert re.fullmatch(r"HTTP/1\.1 200 OK\r\nServer: gunicorn\r\nDate: \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT\r\n"
                        r"Connection: keep-alive\r\nContent-Type: application/json\r\nContent-Length: 42\r\n\r\n",
                        written)
    assert answer_head(413, []).startswith(b"HTTP/1.1 413 Request Entity Too Large\r\n")


def test_max_head_is_no_larger_than_gunicorns_line_limit():
    from gunicorn.config import Config
    assert MAX_HEAD <= Config().limit_request_field_size


def test_a_line_ended_by_lf_alone_is_found():
    assert has_bare_line_feed(b"POST / HTTP/1.1\nHost: h")
    assert has_bare_line_feed(b"POST / HTTP/1.1\r\nHost: h\n")
    assert not has_bare_line_feed(b"POST / HTTP/1.1\r\nHost: h\r\n")
    assert not has_bare_line_feed(b"POST / HTTP/1.1\r\nHost: h\r")  # the rest of its CRLF may follow
