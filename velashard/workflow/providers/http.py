"""vela/http: one HTTP request per action (HTTPDo, and HTTPGet/Post/Put/Delete that fix the method), with a
timeout (at most a minute), a rate limit, headers from Secrets, and TLS from a Secret holding `ca.crt` (the
server's CA) and optionally `client.crt`/`client.key` (mutual TLS). Secrets are read as the app's author; the
request is sent apart from the reconcile workers (calls.py) to where the egress policy allows (netcalls.py)."""

from __future__ import annotations

import base64
import binascii
import os
import ssl
import tempfile
import threading
import time
from collections import deque
from typing import Any

from velashard.durations import go_duration
from velashard.kube import errors
from velashard.kube.resources import SECRETS
from velashard.workflow import netcalls
from velashard.workflow.providers.base import Provider, ProviderError, Runtime
from velashard.workflow.providers.calls import outside

DEFAULT_TIMEOUT = 3.0
MAX_TIMEOUT = 60.0  # a template's request.timeout: how long one call may hold an outbound thread
MAX_BODY = 1 << 20  # the response body a step may read (it may go on into the run's context)


class _RateLimiter:
    def __init__(self) -> None:
        self._sent: dict[str, deque] = {}
        self._lock = threading.Lock()

    def allow(self, key: str, limit: int, period: float, now: float) -> bool:
        with self._lock:
            sent = self._sent.setdefault(key, deque())
            while sent and sent[0] <= now - period:
                sent.popleft()
            if len(sent) >= limit:
                return False
            sent.append(now)
            return True


_LIMITER = _RateLimiter()


def _secret_data(rt: Runtime, name: str, namespace: str) -> dict[str, bytes]:
    try:
        secret = rt.client().get(SECRETS, name, namespace)
    except errors.KubeError as err:
        raise ProviderError(f"secret {namespace}/{name}: {err.message}") from None
    out = {}
    for key, value in (secret.get("data") or {}).items():
        try:
            out[key] = base64.b64decode(value)
        except (binascii.Error, ValueError):
            raise ProviderError(f"secret {namespace}/{name}: {key} is not base64") from None
    return out


def _pem(value: bytes) -> bytes:
    """PEM as stored, or base64 of PEM (KubeVela's own format encodes it once more)."""
    if b"-----BEGIN" in value:
        return value
    try:
        decoded = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return value
    return decoded if b"-----BEGIN" in decoded else value


def _tls_context(rt: Runtime, config: dict[str, Any]) -> ssl.SSLContext:
    name = str(config.get("secret") or "")
    namespace = str(config.get("namespace") or rt.namespace)
    if "/" in name:
        namespace, name = name.split("/", 1)
    if not name:
        raise ProviderError("tls_config.secret is required")
    data = _secret_data(rt, name, namespace)
    context = ssl.create_default_context()
    context.set_alpn_protocols(["http/1.1"])
    try:
        if data.get("ca.crt"):
            context.load_verify_locations(cadata=_pem(data["ca.crt"]).decode("ascii", "replace"))
        if data.get("client.crt") and data.get("client.key"):
            _load_client_pair(context, _pem(data["client.crt"]), _pem(data["client.key"]))
    except ssl.SSLError as err:
        raise ProviderError(f"tls_config: secret {namespace}/{name}: {err}") from None
    return context


def _load_client_pair(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    # the ssl module loads a key pair from files only: a private directory for the moment it takes
    with tempfile.TemporaryDirectory(prefix="velashard-tls-") as folder:
        paths = []
        for name, content in (("client.crt", cert), ("client.key", key)):
            path = os.path.join(folder, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(content)
            paths.append(path)
        context.load_cert_chain(paths[0], paths[1])


def _headers(rt: Runtime, request: dict[str, Any]) -> dict[str, str]:
    headers = {str(k): str(v) for k, v in (request.get("header") or {}).items()}
    if not headers:
        headers["Content-Type"] = "application/json"
    for item in request.get("headersFromSecret") or []:
        data = _secret_data(rt, str(item.get("secret", "")), rt.namespace)
        key = str(item.get("key", ""))
        if key not in data:
            raise ProviderError(f'secret {item.get("secret")} has no key {key} for header {item.get("header")}')
        headers[str(item.get("header", ""))] = data[key].decode("utf-8", "replace")
    return headers


def do(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    method = str(params.get("method") or "GET")
    url = params.get("url")
    if not isinstance(url, str) or not url:
        raise ProviderError("url is required")
    request = params.get("request") or {}
    timeout = DEFAULT_TIMEOUT
    if request.get("timeout"):
        try:
            timeout = go_duration(request["timeout"])
        except ValueError:
            raise ProviderError(f'request.timeout "{request["timeout"]}" is not a duration like 5s') from None
        if not 0 < timeout <= MAX_TIMEOUT:
            raise ProviderError(f'request.timeout "{request["timeout"]}": at most {MAX_TIMEOUT:g}s')
    limit = request.get("ratelimiter")
    period = _period(limit) if isinstance(limit, dict) else 0.0

    def admit() -> None:  # counted when the request is sent, not when its answer is taken
        if isinstance(limit, dict) and not _LIMITER.allow(f'{method}-{url.split("?")[0]}',
                                                          int(limit.get("limit") or 0), period, time.monotonic()):
            raise ProviderError("request exceeds the rate limiter")
    headers = _headers(rt, request) if request else {"Content-Type": "application/json"}
    context = _tls_context(rt, params["tls_config"]) if params.get("tls_config") else None
    body = request.get("body")
    payload = body.encode() if isinstance(body, str) else None
    policy = rt.egress

    def send() -> dict[str, Any]:
        answer = netcalls.request(policy, method, url, payload, headers, timeout, MAX_BODY, context)
        return {"body": answer.body.decode("utf-8", "replace"), "header": answer.headers,
                "statusCode": answer.status}

    return outside(rt, f"{method} {url}", params, send, admit)


def _period(limit: dict[str, Any]) -> float:
    try:
        return go_duration(limit.get("period"))
    except ValueError:
        raise ProviderError(f'ratelimiter.period "{limit.get("period")}" is not a duration') from None


HANDLERS = {"do": do}
PROVIDER = Provider("vela/http", "http", HANDLERS)
