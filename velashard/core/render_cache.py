"""Rendered components and policies' objects, cached by what they depend on (definition generations, the
component or policy, the app's context) so that a re-sync evaluates nothing."""

from __future__ import annotations

import hashlib
import json
import threading
import zlib
from typing import Any, Callable

from cachetools import LRUCache

from velashard.core.rendered import Definitions, identity

_RENDERED: LRUCache = LRUCache(maxsize=4096)
_RENDERED_LOCK = threading.Lock()


def component_key(app: dict[str, Any], spec: dict[str, Any], defs: Definitions, revision: int) -> bytes:
    meta = app["metadata"]
    used = [defs.components.get(spec.get("type", ""))] + [defs.traits.get(t.get("type", "")) if isinstance(t, dict)
                                                          else None for t in spec.get("traits") or []]
    text = json.dumps([spec, (app.get("spec") or {}).get("components"), meta.get("name"), meta.get("namespace"),
                       meta.get("labels"), meta.get("annotations"), revision, defs.cluster_version,
                       [identity(d) if d else None for d in used]], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).digest()


def policy_key(app: dict[str, Any], policy: dict[str, Any], definition: dict[str, Any], defs: Definitions,
               revision: int) -> bytes:
    meta = app["metadata"]
    return hashlib.sha256(json.dumps(["policy", policy, meta.get("name"), meta.get("namespace"),
                                      meta.get("labels"), meta.get("annotations"), revision, defs.cluster_version,
                                      identity(definition)], sort_keys=True, default=str).encode()).digest()


def cached(key: bytes, render: Callable[[], Any]) -> Any:
    """The JSON data cached under key, rendered (outside the lock) when missing; every caller gets its own copy."""
    with _RENDERED_LOCK:
        entry = _RENDERED.get(key)
    if entry is None:
        entry = _pack(render())
        with _RENDERED_LOCK:
            _RENDERED[key] = entry
    return _unpack(entry)


def _pack(value: Any) -> bytes:
    """A cache entry: a shard holds one per app it serves, so compressed JSON (about a third of the JSON's
    size, some microseconds per re-sync to read), and every caller gets its own copy."""
    return zlib.compress(json.dumps(value, separators=(",", ":")).encode(), 1)


def _unpack(entry: bytes) -> Any:
    return json.loads(zlib.decompress(entry))


def rendered_cache_info() -> tuple[int, int]:
    return len(_RENDERED), _RENDERED.maxsize
