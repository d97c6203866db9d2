"""vela/kube: objects in the cluster: apply (tracked as the app's, like KubeVela's Dispatch), patch, read, list and
delete. Reads, lists and deletes go through the client that acts as the app's author; applies through core's
Delivery, which applies as that author too. A read, list or delete that fails says so in `$returns.err` (templates
branch on it); a refusal (403) and an apply or patch that fails fail the step."""

from __future__ import annotations

from typing import Any

from velashard.apis.labels import KUBECTL_LAST_APPLIED, LAST_APPLIED as VELASHARD_LAST_APPLIED
from velashard.apis.oam import APPLICATIONS
from velashard.kube import errors
from velashard.kube.resources import Resource
from velashard.patch import PatchError
from velashard.patch.trait_patch import apply_trait_patch
from velashard.workflow.delivery import DeliveryError
from velashard.workflow.providers.base import Provider, ProviderError, Runtime, local_only

LAST_APPLIED = (VELASHARD_LAST_APPLIED, KUBECTL_LAST_APPLIED, "workflow.oam.dev/last-applied-configuration")


def _object(params: dict[str, Any], key: str = "value") -> dict[str, Any]:
    value = params.get(key)
    if not isinstance(value, dict):
        raise ProviderError(f"{key} must be an object")
    return value


def _identity(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str) or not api_version or not kind:
        raise ProviderError("value needs apiVersion and kind")
    return api_version, kind, str(meta.get("name") or ""), str(meta.get("namespace") or "default")


def _resource(rt: Runtime, api_version: str, kind: str) -> Resource:
    try:
        return rt.components().resource(api_version, kind)
    except errors.NotFound:
        raise ProviderError(f"the server has no resource for {api_version} {kind}") from None


def _with_namespace(obj: dict[str, Any]) -> dict[str, Any]:
    meta = dict(obj.get("metadata") or {})
    if not meta.get("namespace"):
        meta["namespace"] = "default"  # KubeVela's kube provider puts an object without one in "default"
    return dict(obj, metadata=meta)


def dispatch(rt: Runtime, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for obj in objects:
        _identity(obj)
        if not (obj.get("metadata") or {}).get("name"):
            raise ProviderError(f'{obj["kind"]}: metadata.name is required')
    try:
        return rt.components().dispatch([_with_namespace(o) for o in objects])
    except DeliveryError as err:
        raise ProviderError(str(err)) from None


def _patched(params: dict[str, Any], rt: Runtime, base: dict[str, Any], tags: Any = None) -> dict[str, Any]:
    patch = params.get("patch")
    if patch is None:
        return base
    try:
        return apply_trait_patch(base, patch, tags)
    except PatchError as err:
        raise ProviderError(f"patch: {err}") from None


def apply(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    local_only(params.get("cluster"))
    value = _patched(params, rt, _object(params), rt.tags(("patch",)))
    return {"value": dispatch(rt, [value])[0]}


def apply_in_parallel(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    local_only(params.get("cluster"))
    values = params.get("value")
    if not isinstance(values, list) or not all(isinstance(v, dict) for v in values):
        raise ProviderError("value must be a list of objects")
    return {"value": dispatch(rt, values)}


def _get(rt: Runtime, obj: dict[str, Any]) -> dict[str, Any]:
    api_version, kind, name, namespace = _identity(obj)
    res = _resource(rt, api_version, kind)
    return rt.client().get(res, name, namespace if res.namespaced else None)


def read(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    local_only(params.get("cluster"))
    value = _object(params)
    try:
        return {"value": _get(rt, value)}
    except errors.Forbidden as err:
        raise ProviderError(err.message) from None  # a refusal fails the step, whatever the template does
    except (errors.KubeError, ProviderError) as err:
        return {"value": value, "err": _text(err)}


def patch(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    local_only(params.get("cluster"))
    try:
        live = _get(rt, _object(params))
    except errors.KubeError as err:
        raise ProviderError(f"patch: {err.message}") from None
    meta = live["metadata"]
    for key in ("managedFields", "resourceVersion", "uid", "creationTimestamp", "generation", "selfLink"):
        meta.pop(key, None)
    # what the last apply recorded is not part of the object to apply again (it would nest in itself)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in LAST_APPLIED}
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    live.pop("status", None)
    if _is_the_app(rt, live):
        return {"result": _patch_the_app(params, rt, live)}
    result = _patched(params, rt, live, rt.tags(("patch",)))
    return {"result": dispatch(rt, [result])[0]}


def _patch_the_app(params: dict[str, Any], rt: Runtime, live: dict[str, Any]) -> dict[str, Any]:
    """The app itself (restart-workflow writes its annotation) is patched as its author, never dispatched as one of
    its own objects: that would track it, and collect it once a later run stops patching it. Its metadata and
    spec are merged over what is live (as `kubectl annotate --overwrite` does, so a step that runs again with a
    later value does not conflict with its own earlier write), and the reconcile goes on with the app's new
    version, so that the status it writes next is not refused as stale."""
    patch = params.get("patch")
    if not isinstance(patch, dict):
        raise ProviderError("patch must be an object")
    body = {k: patch[k] for k in ("metadata", "spec") if isinstance(patch.get(k), dict)}
    meta = live["metadata"]
    written = rt.client().patch(APPLICATIONS, meta["name"], body, meta.get("namespace"))
    own = rt.app["metadata"]
    for key in ("resourceVersion", "annotations", "labels"):
        if key in written["metadata"]:
            own[key] = written["metadata"][key]
    return written


def _is_the_app(rt: Runtime, obj: dict[str, Any]) -> bool:
    api_version, kind, name, namespace = _identity(obj)
    own = rt.app["metadata"]
    return (api_version.split("/")[0], kind, name, namespace) == (APPLICATIONS.group, APPLICATIONS.kind,
                                                                   own.get("name"), own.get("namespace"))


def list_objects(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    local_only(params.get("cluster"))
    resource = params.get("resource") or {}
    filt = params.get("filter") or {}
    kind = f'{resource.get("kind", "")}List'
    try:
        res = _resource(rt, str(resource.get("apiVersion") or ""), str(resource.get("kind") or ""))
        selector = _selector(filt.get("matchingLabels"))
        items, _ = rt.client().list_all(res, (filt.get("namespace") or None) if res.namespaced else None, selector)
    except errors.Forbidden as err:
        raise ProviderError(err.message) from None
    except (errors.KubeError, ProviderError) as err:
        return {"values": {"apiVersion": resource.get("apiVersion", ""), "kind": kind, "items": []}, "err": _text(err)}
    return {"values": {"apiVersion": resource.get("apiVersion", ""), "kind": kind, "items": items}}


def delete(params: dict[str, Any], rt: Runtime) -> dict[str, Any] | None:
    local_only(params.get("cluster"))
    value = _object(params)
    filt = params.get("filter")
    try:
        api_version, kind, name, namespace = _identity(value)
        res = _resource(rt, api_version, kind)
        client = rt.client()
        if filt is not None:
            scope = (filt.get("namespace") or None) if res.namespaced else None
            client.request("deletecollection", "DELETE", res.path(scope),
                           {"labelSelector": _selector(filt.get("matchingLabels"))})
        else:
            if not name:
                raise ProviderError("delete: metadata.name or a filter is required")
            client.delete(res, name, namespace if res.namespaced else None)
    except errors.NotFound:
        return None
    except errors.Forbidden as err:
        raise ProviderError(f"delete: {err.message}") from None
    except (errors.KubeError, ProviderError) as err:
        return {"value": value, "err": _text(err)}
    return None


def _selector(labels: Any) -> str | None:
    if not labels:
        return None
    if not isinstance(labels, dict):
        raise ProviderError("matchingLabels must be an object")
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _text(err: Exception) -> str:
    return err.message if isinstance(err, errors.KubeError) else str(err)


HANDLERS = {"apply": apply, "apply-in-parallel": apply_in_parallel, "read": read, "patch": patch,
            "list": list_objects, "delete": delete}
PROVIDER = Provider("vela/kube", "kube", HANDLERS)
