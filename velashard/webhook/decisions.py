"""What the admission webhooks answer: pure functions from an AdmissionReview request to a response."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Callable

from velashard.apis import labels
from velashard.core.authors import SERVICE_ACCOUNT_REFUSED, AuthConfig, author_annotations
from velashard.core.defcheck import definition_problem
from velashard.sharding.proof import Signer, subject
from velashard.workflow.runs import step_names


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


def _kind(request: dict[str, Any]) -> str:
    kind = request.get("kind") or {}
    return str(kind.get("kind") or "") if isinstance(kind, dict) and kind.get("group") == "core.oam.dev" else ""


def _is_application(request: dict[str, Any]) -> bool:
    return _kind(request) == "Application"


def _is_scheduled(request: dict[str, Any]) -> bool:
    """What shards run, placed and authored alike: Applications and WorkflowRuns."""
    return _kind(request) in ("Application", "WorkflowRun")


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


@dataclass
class MutationContext:
    """What the mutating webhook needs besides the request: how to pick a shard and the master's key that proves
    its assignments (sharding/proof.py; both None without sharding), the gates, and how authors are recorded
    (None: they are not) with the controllers whose own writes never change an app's author."""

    pick: Callable[[dict[str, Any]], str | None] | None
    signer: Signer | None
    auto_schedule: bool = True
    auth: AuthConfig | None = None
    controllers: tuple[str, ...] = ()


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _author_changes(request: dict[str, Any], obj: dict[str, Any], ctx: MutationContext) -> dict[str, str | None]:
    """The author annotations to write (None: remove), as KubeVela's AuthenticateApplication records them: the
    requester, on a create and on an update that changes the spec or touches the author annotations; other
    writes (status, labels, finalizers, moves) and the controllers' own keep the recorded author."""
    if ctx.auth is None or not ctx.auth.enabled:
        return {}
    user = request.get("userInfo") if isinstance(request.get("userInfo"), dict) else {}
    if user.get("username") in ctx.controllers:
        return {}
    old = request.get("oldObject")
    if request["operation"] == "UPDATE" and isinstance(old, dict) and old.get("spec") == obj.get("spec") and \
            _author(old) == _author(obj):
        return {}
    return author_annotations(user, ctx.auth)


def _author(obj: dict[str, Any]) -> tuple[Any, Any]:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    annotations = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
    return annotations.get(labels.APP_USERNAME), annotations.get(labels.APP_GROUP)


def mutate(request: dict[str, Any], ctx: MutationContext) -> dict[str, Any]:
    """Record the app's author, schedule an unscheduled app (or give back the shard a user removed) and name
    unnamed workflow steps.

    Every shard set here comes with a proof (annotation controller.core.oam.dev/shard-assignment-proof), which
    the owning shard verifies before it runs the app. A shard this webhook picks is also written to an
    annotation, which the shard-label guard (a ValidatingAdmissionPolicy, run after this webhook) reads to tell
    the webhook's choice from the user's; the same annotation sent by a user is removed.

    Left unscheduled, for the background scheduler to place with the app's dependents: a drain
    acknowledgement, an assignment handed back for want of a valid proof, and an app without a name yet
    (generateName: its proof must name it).
    """
    uid = request["uid"]
    obj = request.get("object")
    if not _is_scheduled(request) or request.get("operation") not in ("CREATE", "UPDATE") or not isinstance(obj, dict):
        return review_response(uid)
    kind = _kind(request)
    patch: list[dict[str, Any]] = []
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    annotations = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else None
    if annotations and labels.ASSIGNED_BY_WEBHOOK in annotations:
        patch.append({"op": "remove", "path": f"/metadata/annotations/{_escape(labels.ASSIGNED_BY_WEBHOOK)}"})

    def annotate(key: str, value: str) -> None:
        nonlocal annotations
        if annotations is None:
            patch.append({"op": "add", "path": "/metadata/annotations", "value": {}})
            annotations = {}
        patch.append({"op": "add", "path": f"/metadata/annotations/{_escape(key)}", "value": value})

    if ctx.auth is not None and ctx.auth.enabled and annotations and labels.APP_SERVICE_ACCOUNT in annotations and \
            (request.get("userInfo") or {}).get("username") not in ctx.controllers:
        return review_response(uid, False, code=400, message=SERVICE_ACCOUNT_REFUSED)
    for key, value in _author_changes(request, obj, ctx).items():
        if value is not None:
            annotate(key, value)
        elif annotations and key in annotations:
            patch.append({"op": "remove", "path": f"/metadata/annotations/{_escape(key)}"})
    current = _labels(obj)
    if ctx.signer is not None and not current.get(labels.SCHEDULED_SHARD_ID):
        old = request.get("oldObject") if request["operation"] == "UPDATE" else None
        old_labels = _labels(old)
        if labels.DRAIN in old_labels:
            # A shard acknowledging a drain: the background scheduler moves the app with its dependents.
            return review_response(uid, patch=patch)
        namespace = _text(meta.get("namespace")) or _text(request.get("namespace"))
        name = _text(meta.get("name")) or _text(request.get("name"))
        shard = old_labels.get(labels.SCHEDULED_SHARD_ID)
        if shard:
            old_meta = old.get("metadata") if isinstance(old, dict) and isinstance(old.get("metadata"), dict) else {}
            old_annotations = old_meta.get("annotations") if isinstance(old_meta.get("annotations"), dict) else {}
            if not ctx.signer.proves(namespace, subject(kind, name), shard,
                                     _text(old_annotations.get(labels.ASSIGNMENT_PROOF))):
                return review_response(uid, patch=patch)  # handed back by its shard: the same, for the scheduler
        picked = False
        if not shard and ctx.auto_schedule and name and ctx.pick is not None:
            shard, picked = ctx.pick(obj), True
        if shard:
            if not isinstance(meta.get("labels"), dict):
                patch.append({"op": "add", "path": "/metadata/labels", "value": {}})
            patch.append({"op": "add", "path": f"/metadata/labels/{_escape(labels.SCHEDULED_SHARD_ID)}",
                          "value": shard})
            annotate(labels.ASSIGNMENT_PROOF, ctx.signer.sign(namespace, subject(kind, name), shard))
            if picked:
                annotate(labels.ASSIGNED_BY_WEBHOOK, shard)
    if kind == "WorkflowRun":
        patch.extend(_run_step_names(obj))
        return review_response(uid, patch=patch)
    steps = ((obj.get("spec") or {}).get("workflow") or {}).get("steps") if isinstance(obj.get("spec"), dict) else None
    if isinstance(steps, list):
        for i, step in enumerate(steps):
            if isinstance(step, dict) and not step.get("name"):
                patch.append({"op": "add", "path": f"/spec/workflow/steps/{i}/name",
                              "value": f'{step.get("type", "step")}-{i + 1}'})
    return review_response(uid, patch=patch)


def _run_step_names(run: dict[str, Any]) -> list[dict[str, Any]]:
    """kubevela/workflow's webhook names a run's unnamed steps step-<i> and sub-steps step-<i>-<j>."""
    spec = run.get("spec") if isinstance(run.get("spec"), dict) else {}
    workflow = spec.get("workflowSpec") if isinstance(spec.get("workflowSpec"), dict) else {}
    return [{"op": "add", "path": "/spec/workflowSpec/steps" + pointer, "value": name}
            for pointer, name in step_names(workflow.get("steps"))]


@dataclass
class ValidationContext:
    """The check of components and traits (feature gate ValidateComponentWhenSharding).

    The shard-label guard is not here: it is a ValidatingAdmissionPolicy (velashard.sharding.guard), so
    that users' writes do not depend on the master being up.
    """

    check_components: Callable[[dict[str, Any]], str | None] | None = None


def validate(request: dict[str, Any], ctx: ValidationContext) -> dict[str, Any]:
    uid = request["uid"]
    if not _is_application(request) or request.get("operation") not in ("CREATE", "UPDATE"):
        return review_response(uid)
    if ctx.check_components is not None:
        obj = request.get("object") if isinstance(request.get("object"), dict) else {}
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        if not meta.get("namespace") and request.get("namespace"):  # its definitions resolve in its namespace
            obj = {**obj, "metadata": {**meta, "namespace": request["namespace"]}}
        problem = ctx.check_components(obj)
        if problem:
            return review_response(uid, False, code=422, message=problem)
    return review_response(uid)


DEFINITION_KINDS = ("ComponentDefinition", "TraitDefinition", "PolicyDefinition", "WorkflowStepDefinition")


def validate_definition(request: dict[str, Any]) -> dict[str, Any]:
    """Refuse a definition whose CUE does not compile (the message names line and column); a workflow step's
    template is compiled with the providers' packages (vela/op, vela/kube, ...) it may import."""
    uid = request["uid"]
    kind = request.get("kind") or {}
    if (not isinstance(kind, dict) or kind.get("group") != "core.oam.dev" or kind.get("kind") not in DEFINITION_KINDS
            or request.get("operation") not in ("CREATE", "UPDATE")):
        return review_response(uid)
    obj = request.get("object")
    if not isinstance(obj, dict):
        return review_response(uid)
    problem = definition_problem({**obj, "kind": kind["kind"]})
    if problem:
        name = (obj.get("metadata") or {}).get("name", "")
        return review_response(uid, False, code=422, message=f'{kind["kind"]} "{name}": {problem[1]}')
    return review_response(uid)
