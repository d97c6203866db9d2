"""ref-objects components: read the objects they reference and finish them as templates with their traits."""

from __future__ import annotations

from typing import Any

from velashard.apis import labels
from velashard.core.definitions import Definitions
from velashard.core.rendered import RenderedApp, RenderError
from velashard.core.rendering import REF_OBJECTS, complete_ref_objects
from velashard.kube.client import KubeClient
from velashard.kube.discovery import Discovery


def resolve_ref_objects(client: KubeClient, discovery: Discovery, app: dict[str, Any], rendered: RenderedApp,
                        defs: Definitions, revision: int) -> None:
    """Replace each ref-objects component of `rendered` by copies of what it references. Raises RenderError
    for a reference that selects nothing or is malformed, KubeError when reading fails."""
    for i, comp in enumerate(rendered.components):
        spec = comp.workload.get(REF_OBJECTS)
        if spec is None:
            continue
        copies = []
        for ref in spec.get("objects") or []:
            copies.extend(_fetch(client, discovery, ref, app["metadata"]["namespace"], comp.name))
        if not copies:
            raise RenderError("InvalidParameter", "ref-objects selected no object", comp.name, field="objects")
        rendered.components[i] = complete_ref_objects(app, comp, copies, defs, revision)


def _fetch(client: KubeClient, discovery: Discovery, ref: dict[str, Any], namespace: str,
           component: str) -> list[dict[str, Any]]:
    if ref.get("resource"):
        res = discovery.for_resource(ref.get("group", ""), ref["resource"])
    elif ref.get("kind"):
        res = discovery.for_kind(ref.get("apiVersion", "v1"), ref["kind"])
    else:
        raise RenderError("InvalidParameter", "each object needs resource (and group) or apiVersion and kind",
                          component, field="objects")
    ns = ref.get("namespace") or namespace
    if ref.get("name"):
        found = [client.get(res, ref["name"], ns if res.namespaced else None)]
    else:
        selector = ",".join(f"{k}={v}" for k, v in sorted((ref.get("labelSelector") or {}).items()))
        found = client.list_all(res, ns if res.namespaced else None, label_selector=selector or None)[0]
    return [template_of(obj) for obj in found]


def template_of(obj: dict[str, Any]) -> dict[str, Any]:
    """A referenced object as a template: identity, server-set fields and status dropped."""
    meta = obj["metadata"]
    clean = {k: v for k, v in obj.items() if k not in ("status", "metadata")}
    clean["metadata"] = {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if k in meta}
    annotations = clean["metadata"].get("annotations") or {}
    annotations.pop(labels.LAST_APPLIED, None)
    annotations.pop(labels.KUBECTL_LAST_APPLIED, None)
    return clean
