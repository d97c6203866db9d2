"""Kubernetes API errors as exceptions, mapped from the Status objects the API server answers with."""

from __future__ import annotations

import json
from typing import Any


class KubeError(Exception):
    """An API request failed; `code`, `reason` and `message` come from the server's Status."""

    def __init__(self, code: int, reason: str, message: str, status: dict[str, Any] | None = None):
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.status = status or {}


class BadRequest(KubeError):
    pass


class Unauthorized(KubeError):
    """401: no or bad credentials (an expired token, a kubeconfig for another cluster)."""


class Forbidden(KubeError):
    """403: authenticated but not allowed (RBAC), or refused by admission."""


class NotFound(KubeError):
    pass


class Conflict(KubeError):
    """A write lost an optimistic-concurrency race (stale resourceVersion)."""


class AlreadyExists(KubeError):
    pass


class Expired(KubeError):
    """410 Gone: the requested resourceVersion is too old; relist."""


class Invalid(KubeError):
    """422: the object failed validation; `causes` lists the fields."""

    @property
    def causes(self) -> list[dict[str, Any]]:
        return list((self.status.get("details") or {}).get("causes") or [])


class TooManyRequests(KubeError):
    pass


class ServerError(KubeError):
    pass


class TransportError(KubeError):
    """The request never got an answer (connection refused, reset, timeout)."""

    def __init__(self, message: str):
        super().__init__(0, "TransportError", message)


def error_from_response(code: int, body: bytes | str) -> KubeError:
    try:
        status = json.loads(body) if body else {}
    except ValueError:
        status = {}
    if not isinstance(status, dict):
        status = {}
    reason = status.get("reason") or ""
    message = status.get("message") or (body.decode(errors="replace") if isinstance(body, bytes) else str(body))[:500]
    if code == 409:
        cls: type[KubeError] = AlreadyExists if reason == "AlreadyExists" else Conflict
    else:
        cls = {400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 410: Expired, 422: Invalid,
               429: TooManyRequests}.get(code, ServerError if code >= 500 else KubeError)
    return cls(code, reason or cls.__name__, message, status)


class Fenced(KubeError):
    """A write refused by this process itself: it has not renewed its shard's Lease within the renew deadline,
    so another process may own its work by now. Nothing was sent."""

    def __init__(self, message: str):
        super().__init__(0, "Fenced", message)
