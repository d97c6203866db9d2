"""Settled passes, remembered: a reconcile of a settled app that sent no request (it read only cached objects
and wrote nothing) is a function of what it read. What it read is kept per app with each object's
resourceVersion: the app, the definitions it renders with (by the hash its revision records), its tracker and
every object it applied. The next pass whose reads all still have those versions (a re-sync, or the first pass
after a restart with --cache-dir, which keeps these too) returns the same answer without rendering, evaluating
health or merging: for a shard of 40,000 settled apps, a version check per object instead of a reconcile.

Anything else a pass depends on is either in those versions or excluded: time (a pass whose answer is not the
plain settled re-sync is not remembered: a restart or deadline due, a workflow waiting), reads past the caches
(ref-objects, a kind not cached: they send requests), the author's permissions (a pass that writes nothing asks
for none), the process's code (a snapshot is tied to it) and its settings and the API server's version (part
of the key: a restart with other flags, or against an upgraded server, runs every pass again).
"""

from __future__ import annotations

from typing import Any

from velashard.core.apply import Applier
from velashard.core.slotcache import SlotCache, digest
from velashard.core.tracker import Trackers
from velashard.kube import errors

Read = tuple[str, str, str, str, str]  # apiVersion, kind, namespace ("" if none), name, resourceVersion
# the objects read, the tracker's version, the requeue seconds (lists where they come back unpacked)
Remembered = tuple[tuple[Read, ...], str, float]

_PASS = digest("settled-pass")
# owner: app key; inputs: the app's resourceVersion and the pass's basis. Packed: as tuples of strings a
# load-test app's pass would keep about a kilobyte, 40 MB at 40,000 apps.
_PASSES = SlotCache(packed=True)
# A pass that wrote and left its app settled is followed this soon by one that writes nothing, so that a restart or
# re-sync within the re-sync period finds that pass remembered (a restart after an upgrade or a fleet-wide change
# would otherwise run every changed app's pass in full).
CONFIRM_AFTER = 1.0
_CONFIRMING: set[str] = set()  # apps whose confirming pass is due (a set's add and discard are atomic)


def passes() -> SlotCache:
    """The remembered passes (for core/cachesnapshot.py)."""
    return _PASSES


def forget(key: str) -> None:
    """The app `key` is gone from this process: so is its pass."""
    _PASSES.forget(key)
    _CONFIRMING.discard(key)


def confirm_soon(key: str) -> bool:
    """Whether a pass that wrote and left the app `key` settled is to be followed by a confirming pass in
    CONFIRM_AFTER seconds: once; not again after a confirming pass that wrote too (no loop of writing passes)."""
    if key in _CONFIRMING:
        _CONFIRMING.discard(key)
        return False
    _CONFIRMING.add(key)
    return True


def _inputs(app: dict[str, Any], basis: str) -> bytes:
    return digest(str(app["metadata"].get("resourceVersion")), basis)


def reads_of(objects: list[dict[str, Any]], absent: set[tuple[str, str, str, str]]) -> tuple[Read, ...]:
    """The objects a pass read (ReconcileContext.objects' values) and those it found absent (version ""), as
    versioned references."""
    found = [(o.get("apiVersion", ""), o.get("kind", ""), o["metadata"].get("namespace") or "", o["metadata"]["name"],
              str(o["metadata"].get("resourceVersion") or "")) for o in objects]
    return tuple(sorted(found + [(*ref, "") for ref in absent]))


def remember(app: dict[str, Any], basis: str, reads: tuple[Read, ...], tracker_version: str,
             requeue: float) -> None:
    """Keep a settled pass: `basis` is what it depended on besides the app and what it read (the hash of its spec
    and definitions, the process's settings)."""
    key = f'{app["metadata"]["namespace"]}/{app["metadata"]["name"]}'
    _CONFIRMING.discard(key)
    _PASSES.put(key, _PASS, _inputs(app, basis), (reads, tracker_version, requeue))


def unchanged(app: dict[str, Any], basis: str, trackers: Trackers, applier: Applier) -> float | None:
    """The requeue seconds of the app's remembered pass when everything it read still has the version it read,
    else None. The kinds it applied stay cached, as its pass would have kept them; a kind not cached (or no
    longer served) cannot be checked, so the pass runs."""
    key = f'{app["metadata"]["namespace"]}/{app["metadata"]["name"]}'
    found: Remembered | None = _PASSES.get(key, _PASS, _inputs(app, basis))
    if found is None:
        return None
    reads, tracker, requeue = found
    if trackers.version(app) != tracker:
        return None
    try:
        applier.use_kinds_of(key, {applier.kind(api_version, kind) for api_version, kind, *_ in reads})
    except errors.NotFound:
        return None
    for api_version, kind, namespace, name, version in reads:
        informer = applier.cached(api_version, kind)
        if informer is None:
            return None
        if (informer.store.version_by(namespace or None, name) or "") != version:  # absent: ""
            return None
    return requeue
