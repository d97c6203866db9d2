"""The scale subresource (autoscaling/v1 Scale) of Deployments, StatefulSets, ReplicaSets and
ReplicationControllers, as kube-apiserver's registries serve it: a Scale view of the object's
spec.replicas and status; writes change only spec.replicas of the parent."""

from __future__ import annotations

from typing import Any

from velashard.apiserver import errors
from velashard.apiserver.registry.rest import Request, RestAPI, Result
from velashard.apiserver.storage.resources import ResourceType
from velashard.apiserver.storage.validation import Cause
from velashard.patch import PatchError, apply_json_patch, json_merge_patch
from velashard.patch.copying import copy_json

_PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json",
                "application/strategic-merge-patch+json")


def selector_string(selector: Any) -> str:
    """A label selector as its string form (a map for ReplicationControllers, else a metav1.LabelSelector)."""
    if not isinstance(selector, dict):
        return ""
    if "matchLabels" not in selector and "matchExpressions" not in selector:
        return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    parts: list[tuple[str, str]] = [(k, f"{k}={v}") for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), sorted(expr.get("values") or [])
        text = {"In": f"{key} in ({','.join(values)})", "NotIn": f"{key} notin ({','.join(values)})",
                "Exists": key, "DoesNotExist": f"!{key}"}.get(op, key)
        parts.append((key, text))
    return ",".join(text for _, text in sorted(parts))


def to_scale(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    scale_meta = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                  if k in meta}
    return {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": scale_meta,
            "spec": {"replicas": spec.get("replicas", 1)},
            "status": {"replicas": status.get("replicas", 0), "selector": selector_string(spec.get("selector"))}}


def _check_scale(name: str, scale: Any) -> int:
    if not isinstance(scale, dict):
        raise errors.bad_request("the body of the request must be a JSON object describing a Scale")
    if scale.get("kind") not in (None, "Scale"):
        raise errors.bad_request(f"the kind in the data ({scale.get('kind')}) does not match the expected kind "
                                 "(Scale)")
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise errors.invalid("autoscaling", "Scale", name, [Cause(
            "spec.replicas", f"Invalid value: {replicas!r}: must be greater than or equal to 0")])
    return replicas


def get(api: RestAPI, rt: ResourceType, namespace: str, name: str) -> dict[str, Any]:
    return to_scale(api.get(rt, namespace, name))


def write(api: RestAPI, rt: ResourceType, namespace: str, name: str, req: Request, body: Any = None,
          patch: Any = None, content_type: str = "") -> Result:
    """PUT (`body`) or PATCH (`patch` of `content_type`) a Scale; answers the Scale after the write."""
    kind = content_type.split(";")[0].strip().lower()
    if patch is not None and kind not in _PATCH_TYPES:
        raise errors.unsupported_media_type(content_type)

    def make_new(old: dict[str, Any]) -> dict[str, Any]:
        scale = to_scale(old)
        if patch is None:
            wanted = body
        else:
            try:
                wanted = apply_json_patch(scale, patch) if kind == "application/json-patch+json" \
                    else json_merge_patch(scale, patch)
            except PatchError as err:
                raise errors.APIError(422, "Invalid", f"the server rejected our request due to an error in our "
                                      f"request: {err}")
        replicas = _check_scale(name, wanted)
        new = copy_json(old)
        rv = ((wanted or {}).get("metadata") or {}).get("resourceVersion")
        if rv:
            new["metadata"]["resourceVersion"] = rv
        new["spec"] = dict(new.get("spec") or {}, replicas=replicas)
        return new

    result = api.update_with(rt, namespace, name, make_new, req, "scale")
    return Result(to_scale(result.body), code=result.code)
