"""API errors of the embedded server, rendered as Kubernetes `Status` objects."""

from __future__ import annotations

from typing import Any

# metav1.StatusDetails and metav1.StatusCause in Go's field order: kube-apiserver's JSON follows it, and
# clients compare Status bodies as text (the official Python client's FailToCreateError prints the body).
_DETAILS_ORDER = ("name", "group", "kind", "uid", "causes", "retryAfterSeconds")
_CAUSE_ORDER = ("reason", "message", "field")


def _ordered(fields: dict[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    known = {key: fields[key] for key in order if key in fields}
    return known | {key: value for key, value in fields.items() if key not in known}


def status_details(details: dict[str, Any]) -> dict[str, Any]:
    """`details` (and its causes) with their keys in kube-apiserver's order."""
    ordered = _ordered(details, _DETAILS_ORDER)
    if isinstance(ordered.get("causes"), list):
        ordered["causes"] = [_ordered(c, _CAUSE_ORDER) if isinstance(c, dict) else c for c in ordered["causes"]]
    return ordered


def success_status(details: dict[str, Any]) -> dict[str, Any]:
    """The Status a delete answers when it returns no object."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": status_details(details)}


class APIError(Exception):
    """An error answered to the client as a metav1.Status with Kubernetes' code and reason."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        """The metav1.Status body, keys in Go's field order (details before code, as kube-apiserver writes it)."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details:
            body["details"] = status_details(self.details)
        body["code"] = self.code
        return body


def _details(group: str, plural: str, name: str | None) -> dict[str, Any]:
    details: dict[str, Any] = {"kind": plural}
    if group:
        details["group"] = group
    if name:
        details["name"] = name
    return details


def _qualified(group: str, plural: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(group: str, plural: str, name: str) -> APIError:
    return APIError(404, "NotFound", f'{_qualified(group, plural)} "{name}" not found', _details(group, plural, name))


def already_exists(group: str, plural: str, name: str) -> APIError:
    return APIError(409, "AlreadyExists", f'{_qualified(group, plural)} "{name}" already exists',
                    _details(group, plural, name))


def conflict(group: str, plural: str, name: str, why: str) -> APIError:
    return APIError(409, "Conflict", f'Operation cannot be fulfilled on {_qualified(group, plural)} "{name}": {why}',
                    _details(group, plural, name))


def invalid(group: str, kind: str, name: str, causes: list[Any]) -> APIError:
    """422 Invalid; `causes` are validation Causes (field, message, reason)."""
    parts = [f"{c.field}: {c.message}" for c in causes]
    summary = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    details = {"name": name, "kind": kind,
               "causes": [{"reason": c.reason, "message": c.message, "field": c.field} for c in causes]}
    if group:
        details["group"] = group
    return APIError(422, "Invalid", f'{kind}.{group or "core"} "{name}" is invalid: {summary}'
                    if group else f'{kind} "{name}" is invalid: {summary}', details)


def bad_request(message: str) -> APIError:
    return APIError(400, "BadRequest", message)


def method_not_allowed(message: str = "the server does not allow this method on the requested resource") -> APIError:
    return APIError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str) -> APIError:
    return APIError(415, "UnsupportedMediaType", f'the body of the request was in an unknown format - accepted media '
                    f'types include: application/json-patch+json, application/merge-patch+json, '
                    f'application/strategic-merge-patch+json (got "{content_type}")')


def expired(message: str) -> APIError:
    return APIError(410, "Expired", message)


def forbidden(message: str) -> APIError:
    return APIError(403, "Forbidden", message)


def internal(message: str) -> APIError:
    return APIError(500, "InternalError", f"Internal error occurred: {message}")
