"""Rendered components and policies' objects, cached by what they depend on (definition generations, the
component or policy, the app's context) so that a re-sync evaluates nothing.

One entry per component (and policy) of every app a shard serves (core/slotcache.py): a new revision replaces
its component's entry instead of leaving the old one to an LRU of fixed size, which a shard of thousands of
apps thrashed at every re-sync; an app that leaves the process takes its entries along (`forget`). Entries are
packed (compressed JSON against a preset dictionary).
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any, Callable

from velashard.core.definitions import Definitions, identity
from velashard.core.slotcache import SlotCache, digest

_RENDERED = SlotCache(packed=True)
_RENDERS = [0]  # components and policies evaluated (cache misses)
_RENDERS_LOCK = threading.Lock()


Where = tuple[str, bytes]  # the app's key (namespace/name), the part's slot


def owner(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def slot(app: dict[str, Any], kind: str, name: Any) -> Where:
    """Where an app's component or policy keeps its entry."""
    meta = app["metadata"]
    return owner(str(meta.get("namespace")), str(meta.get("name"))), digest(kind, str(name))


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


def cached(where: Where, key: bytes, render: Callable[[], Any]) -> Any:
    """The JSON data cached under key at `where`, rendered when missing; every caller gets its own copy."""
    entry = _RENDERED.get(*where, key)
    if entry is None:
        with _RENDERS_LOCK:
            _RENDERS[0] += 1
        entry = render()
        _RENDERED.put(*where, key, entry)
    return entry


def forget(key: str) -> None:
    """The app `key` (namespace/name) is gone from this process: so are its renderings."""
    _RENDERED.forget(key)


def cache() -> SlotCache:
    """The renderings themselves (for core/cachesnapshot.py)."""
    return _RENDERED


def render_count() -> int:
    """How many components and policies were evaluated so far (not served from the cache)."""
    with _RENDERS_LOCK:
        return _RENDERS[0]
