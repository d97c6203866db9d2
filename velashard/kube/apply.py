"""Create-or-update for objects velashard owns outright (CRDs, definitions, webhook configurations)."""

from __future__ import annotations

import time
from typing import Any

from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.resources import Resource


def upsert(client: KubeClient, res: Resource, obj: dict[str, Any], retries: int = 5) -> str:
    """Create `obj`, or replace the stored spec-level content with it; returns created/updated/unchanged.

    Labels and annotations are merged so that what others added survives an upgrade.
    """
    meta = obj["metadata"]
    for _ in range(retries):
        try:
            client.create(res, obj)
            return "created"
        except errors.AlreadyExists:
            pass
        current = client.get(res, meta["name"], meta.get("namespace"))
        desired = {k: v for k, v in obj.items() if k != "status"}
        merged_meta = dict(current["metadata"])
        for key in ("labels", "annotations"):
            if meta.get(key):
                merged_meta[key] = {**(current["metadata"].get(key) or {}), **meta[key]}
        desired["metadata"] = merged_meta
        if all(current.get(k) == v for k, v in desired.items() if k != "metadata") and \
                merged_meta == current["metadata"]:
            return "unchanged"
        if "status" in current:
            desired["status"] = current["status"]
        try:
            client.update(res, desired)
            return "updated"
        except (errors.Conflict, errors.NotFound):
            time.sleep(0.05)
    raise errors.Conflict(409, "Conflict", f"could not apply {res} {meta['name']} after {retries} attempts")
