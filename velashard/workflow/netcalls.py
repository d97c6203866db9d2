"""The requests steps send, through the egress policy (egress.py): a name is resolved once, every address it has
is checked, and the connection goes to the checked address (the Host header and TLS name stay the name's), so
DNS cannot answer differently between the check and the connection. Redirects are followed by hand, each hop
checked the same way. Every call has a connect timeout, a read timeout and an overall deadline, and a response
body larger than the cap fails the call."""

from __future__ import annotations

import ipaddress
import smtplib
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import urllib3

from velashard.workflow.egress import Address, EgressPolicy, Refused

CONNECT_TIMEOUT = 5.0
MAX_REDIRECTS = 10
_CHUNK = 64 << 10


class CallError(Exception):
    """No usable answer (refused by the policy, unreachable, timed out, too large); the message says which."""


@dataclass
class Answer:
    status: int
    headers: dict[str, list[str]]
    body: bytes


def resolve(policy: EgressPolicy, host: str, port: int) -> Address:
    """The address to connect to: every address the name resolves to must pass the policy."""
    policy.check_host(host)
    name = host.strip("[]")
    try:
        infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, ValueError) as err:
        raise CallError(f"cannot resolve {host}: {err}") from None
    addresses: list[Address] = []
    for info in infos:
        address = ipaddress.ip_address(info[4][0].split("%")[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise CallError(f"cannot resolve {host}")
    for address in addresses:
        policy.check(address, port, host)
    return addresses[0]


def request(policy: EgressPolicy, method: str, url: str, body: bytes | None, headers: dict[str, str],
            timeout: float, max_body: int, ssl_context: ssl.SSLContext | None = None) -> Answer:
    """Send a request, following redirects as Go's client does; CallError when there is no usable answer."""
    deadline = time.monotonic() + timeout
    for _ in range(MAX_REDIRECTS + 1):
        answer, location = _one(policy, method, url, body, headers, deadline, max_body, ssl_context)
        if location is None:
            return answer
        url = urljoin(url, location)
        if answer.status == 303 or (answer.status in (301, 302) and method not in ("GET", "HEAD")):
            method, body = "GET", None
    raise CallError(f"stopped after {MAX_REDIRECTS} redirects")


def _one(policy: EgressPolicy, method: str, url: str, body: bytes | None, headers: dict[str, str],
         deadline: float, max_body: int, context: ssl.SSLContext | None) -> tuple[Answer, str | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise CallError(f"{url}: only http:// and https:// addresses can be called")
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise CallError(f"{url}: the port is not a number from 1 to 65535") from None
    host = parts.hostname
    try:
        address = resolve(policy, host, port)
    except Refused as err:
        raise CallError(str(err)) from None
    left = deadline - time.monotonic()
    if left <= 0:
        raise CallError("timed out")
    timeout = urllib3.Timeout(connect=min(CONNECT_TIMEOUT, left), read=left)
    netloc_host = f"[{host}]" if ":" in host else host
    host_header = netloc_host if parts.port is None else f"{netloc_host}:{port}"
    if scheme == "https":
        pool: urllib3.HTTPConnectionPool = urllib3.HTTPSConnectionPool(
            str(address), port, timeout=timeout, retries=False, maxsize=1,
            ssl_context=context or ssl.create_default_context(), server_hostname=host, assert_hostname=host)
    else:
        pool = urllib3.HTTPConnectionPool(str(address), port, timeout=timeout, retries=False, maxsize=1)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    try:
        response = pool.urlopen(method, target, body=body, headers={**headers, "Host": host_header},
                                redirect=False, preload_content=False, assert_same_host=False)
        try:
            content = _read(response, deadline, max_body, url)
        finally:
            response.release_conn()
    except (urllib3.exceptions.HTTPError, OSError) as err:
        raise CallError(f"{method} {url}: {getattr(err, 'reason', None) or err}") from None
    finally:
        pool.close()
    answer = Answer(response.status, {k: list(response.headers.getlist(k)) for k in response.headers}, content)
    location = response.headers.get("Location") if response.status in (301, 302, 303, 307, 308) else None
    return answer, location


def _read(response: Any, deadline: float, max_body: int, url: str) -> bytes:
    chunks, size = [], 0
    while True:
        if time.monotonic() > deadline:
            raise CallError(f"{url}: timed out reading the response")
        chunk = response.read(_CHUNK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > max_body:
            raise CallError(f"{url}: the response is larger than {max_body} bytes (the limit)")
        chunks.append(chunk)


class _Pinned:
    """What SMTP and SMTP_SSL share: connect to the address the policy checked. smtplib opens its socket in
    `_get_socket` and offers no other seam for the address (tested with Python 3.11's smtplib)."""
    policy: EgressPolicy

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        try:
            address = resolve(self.policy, host, port)
        except Refused as err:
            raise CallError(str(err)) from None
        sock = socket.create_connection((str(address), port), min(timeout, CONNECT_TIMEOUT))
        sock.settimeout(timeout)
        return sock


class SMTP(_Pinned, smtplib.SMTP):
    def __init__(self, policy: EgressPolicy, timeout: float) -> None:
        self.policy = policy
        super().__init__(timeout=timeout)


class SMTPOverTLS(_Pinned, smtplib.SMTP_SSL):
    def __init__(self, policy: EgressPolicy, timeout: float, context: ssl.SSLContext) -> None:
        self.policy = policy
        super().__init__(timeout=timeout, context=context)

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        return self.context.wrap_socket(super()._get_socket(host, port, timeout), server_hostname=host)
