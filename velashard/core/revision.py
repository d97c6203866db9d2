"""Application revisions: the hash that says something changed, and which revisions to keep."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def app_hash(spec: dict[str, Any], definitions_fingerprint: str) -> str:
    """Hash of what determines the rendered output: the app's spec and the definitions it was rendered with."""
    payload = json.dumps({"spec": spec, "definitions": definitions_fingerprint}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def revision_name(app_name: str, revision: int) -> str:
    return f"{app_name}-v{revision}"


def revisions_to_prune(revisions: list[dict[str, Any]], limit: int, keep: str) -> list[str]:
    """Names of the oldest revisions beyond `limit`, never the one named `keep` (the live one)."""
    ordered = sorted(revisions, key=lambda r: (r.get("spec") or {}).get("revision", 0))
    excess = len(ordered) - limit
    return [r["metadata"]["name"] for r in ordered if r["metadata"]["name"] != keep][:max(0, excess)]
