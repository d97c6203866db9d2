"""Versions served by conversion: a request in such a version is converted to the storage version on the way
in, and what is stored is converted back on the way out, so one stored object is seen through every version
(and shares its resourceVersion, watch stream and RBAC resource)."""

from __future__ import annotations

from typing import Any, Callable

from velashard.apiserver.storage import hpa_versions
from velashard.apiserver.storage.resources import ResourceType
from velashard.kube import jsoncodec

_Convert = Callable[..., dict[str, Any]]
# (group, plural, served version) -> (to storage, from storage)
_CONVERTERS: dict[tuple[str, str, str], tuple[_Convert, _Convert]] = {
    ("autoscaling", "horizontalpodautoscalers", "v1"): (hpa_versions.v1_to_v2, hpa_versions.v2_to_v1),
}


def _converters(rt: ResourceType) -> tuple[_Convert, _Convert]:
    return _CONVERTERS[(rt.group, rt.plural, rt.version)]


def to_storage(rt: ResourceType, obj: dict[str, Any], partial: bool = False) -> dict[str, Any]:
    """`obj`, in `rt`'s version, as the storage version (`partial`: an apply configuration)."""
    return _converters(rt)[0](obj, partial=partial) if rt.storage_version else obj


def from_storage(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """A stored object in `rt`'s version; anything else (a Status) as it is."""
    if not rt.storage_version or obj.get("kind") != rt.kind:
        return obj
    return _converters(rt)[1](obj)


def watch_line(rt: ResourceType, line: bytes) -> bytes:
    """A watch event line of the storage version, in `rt`'s version."""
    if not rt.storage_version:
        return line
    event = jsoncodec.loads(line)
    if isinstance(event.get("object"), dict):
        event["object"] = from_storage(rt, event["object"])
    return jsoncodec.dumps(event) + b"\n"
