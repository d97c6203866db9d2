"""Shard load reports: each shard publishes how many apps it caches as an annotation on its shard Lease."""

from __future__ import annotations

from typing import Any

from velashard.apis import labels
from velashard.apis.labels import APPS_ANNOTATION, RECONCILED_ANNOTATION

# Shard Leases (one per shard, the master's included) carry the shard id in this label.
LEASE_LABEL = labels.SHARD_ID


def load_annotations(apps: int, reconciled: int | None = None) -> dict[str, str]:
    out = {APPS_ANNOTATION: str(apps)}
    if reconciled is not None:
        out[RECONCILED_ANNOTATION] = str(reconciled)
    return out


def lease_shard(lease: dict[str, Any]) -> str | None:
    return ((lease.get("metadata") or {}).get("labels") or {}).get(LEASE_LABEL)


def parse_loads(leases: list[dict[str, Any]]) -> dict[str, int]:
    """shard id -> app count from shard leases (missing or malformed counts are ignored)."""
    out: dict[str, int] = {}
    for lease in leases:
        shard = lease_shard(lease)
        try:
            out[shard] = int(((lease.get("metadata") or {}).get("annotations") or {}).get(APPS_ANNOTATION, ""))
        except ValueError:
            continue
    return out
