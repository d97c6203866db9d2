"""What the admission webhooks answer: pure functions from an AdmissionReview request to a response."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Callable

from velashard.apis import labels


class ReviewError(ValueError):
    """A malformed AdmissionReview: answered with 400 and this message."""


def parse_review(body: bytes) -> dict[str, Any]:
    """The `request` of an admission.k8s.io/v1 AdmissionReview, checked for what the decisions read."""
    try:
        review = json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise ReviewError(f"the body is not JSON: {err}")
    if not isinstance(review, dict):
        raise ReviewError("the body must be a JSON object (an AdmissionReview)")
    if review.get("kind") != "AdmissionReview" or review.get("apiVersion") != "admission.k8s.io/v1":
        raise ReviewError(f'expected kind AdmissionReview in admission.k8s.io/v1, got kind {review.get("kind")!r} '
                          f'in {review.get("apiVersion")!r}')
    request = review.get("request")
    if not isinstance(request, dict):
        raise ReviewError("request is missing or not an object")
    if not isinstance(request.get("uid"), str) or not request["uid"]:
        raise ReviewError("request.uid is missing")
    if request.get("operation") not in ("CREATE", "UPDATE", "DELETE", "CONNECT"):
        raise ReviewError(f'request.operation {request.get("operation")!r} is not an admission operation')
    for key in ("object", "oldObject"):
        if request.get(key) is not None and not isinstance(request[key], dict):
            raise ReviewError(f"request.{key} must be an object or null")
    user = request.get("userInfo")
    if user is not None and not isinstance(user, dict):
        raise ReviewError("request.userInfo must be an object")
    return request


def review_response(uid: str, allowed: bool = True, patch: list[dict[str, Any]] | None = None,
                    code: int | None = None, message: str = "") -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    if not allowed:
        response["status"] = {"code": code or 403, "message": message,
                              "reason": "Forbidden" if (code or 403) == 403 else "Invalid"}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def _labels(obj: Any) -> dict[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    found = meta.get("labels") if isinstance(meta, dict) else None
    return found if isinstance(found, dict) else {}


def _is_application(request: dict[str, Any]) -> bool:
    kind = request.get("kind") or {}
    return isinstance(kind, dict) and kind.get("group") == "core.oam.dev" and kind.get("kind") == "Application"


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


@dataclass
class MutationContext:
    """What the mutating webhook needs besides the request: how to pick a shard, and the gates."""

    pick: Callable[[dict[str, Any]], str | None]
    auto_schedule: bool = True


def mutate(request: dict[str, Any], ctx: MutationContext) -> dict[str, Any]:
    uid = request["uid"]
    obj = request.get("object")
    if not _is_application(request) or request.get("operation") not in ("CREATE", "UPDATE") or not isinstance(obj, dict):
        return review_response(uid)
    patch: list[dict[str, Any]] = []
    current = _labels(obj)
    if not current.get(labels.SCHEDULED_SHARD_ID):
        old_labels = _labels(request.get("oldObject")) if request["operation"] == "UPDATE" else {}
        if labels.DRAIN in old_labels:
            # A shard acknowledging a drain: the background scheduler moves the app with its dependents.
            return review_response(uid)
        shard = old_labels.get(labels.SCHEDULED_SHARD_ID)
        if not shard and ctx.auto_schedule:
            shard = ctx.pick(obj)
        if shard:
            if not isinstance((obj.get("metadata") or {}).get("labels"), dict):
                patch.append({"op": "add", "path": "/metadata/labels", "value": {}})
            patch.append({"op": "add", "path": f"/metadata/labels/{_escape(labels.SCHEDULED_SHARD_ID)}",
                          "value": shard})
    steps = ((obj.get("spec") or {}).get("workflow") or {}).get("steps") if isinstance(obj.get("spec"), dict) else None
    if isinstance(steps, list):
        for i, step in enumerate(steps):
            if isinstance(step, dict) and not step.get("name"):
                patch.append({"op": "add", "path": f"/spec/workflow/steps/{i}/name",
                              "value": f'{step.get("type", "step")}-{i + 1}'})
    return review_response(uid, patch=patch)


@dataclass
class ValidationContext:
    """Who may move apps between shards, and an optional check of components and traits."""

    privileged_users: set[str] = field(default_factory=set)
    check_components: Callable[[dict[str, Any]], str | None] | None = None


def validate(request: dict[str, Any], ctx: ValidationContext) -> dict[str, Any]:
    uid = request["uid"]
    if not _is_application(request) or request.get("operation") not in ("CREATE", "UPDATE"):
        return review_response(uid)
    obj = request.get("object") or {}
    old_shard = _labels(request.get("oldObject")).get(labels.SCHEDULED_SHARD_ID)
    new_shard = _labels(obj).get(labels.SCHEDULED_SHARD_ID)
    user = (request.get("userInfo") or {}).get("username", "")
    if request["operation"] == "UPDATE" and old_shard and new_shard and new_shard != old_shard \
            and user not in ctx.privileged_users:
        meta = obj.get("metadata") or {}
        return review_response(uid, False, code=403, message=(
            f'user "{user}" may not change label {labels.SCHEDULED_SHARD_ID} from "{old_shard}" to "{new_shard}": '
            f"moving an application between shards must also move its revisions and trackers; use "
            f"`velashard reschedule {meta.get('name', 'APP')} -n {meta.get('namespace', 'NS')} "
            f"--shard-id {new_shard}` as a shard admin"))
    if ctx.check_components is not None:
        problem = ctx.check_components(obj)
        if problem:
            return review_response(uid, False, code=422, message=problem)
    return review_response(uid)
