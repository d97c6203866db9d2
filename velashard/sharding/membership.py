"""Shard membership: available, suspect or dead, as one pure function of pods, leases and the observer's clock.

The rule (time is the observer's monotonic clock; a lease's renewTime is never compared with it, only
whether it changed, as client-go's leader election does, so clock skew between machines does not matter):

- dead: the shard has no pod left, or no container of its pods runs (each is terminated, or waiting
  to be restarted, as the kubelet reports it). The process cannot act any more; its apps may move
  after the grace period.
- available: a pod is Ready and the shard's Lease is held and was seen renewed within its duration.
  Only available shards get new apps.
- restarting: a pod is Ready but the Lease was released or has expired as seen by the observer
  (unrenewed for a full lease duration since the observer last saw its renewTime change). The process
  that held it is gone or cut off, and a Ready one stands by to take it: a restarted container, or a
  rollout's new pod (a holder that cannot renew answers its readiness probe with "fenced", or not at all).
- suspect: anything else (NotReady, or the Lease not renewed yet) while a process may still run.

Only available shards get new apps. A shard that is not available keeps its apps for the grace period
(counted by the caller from when it stopped being available), whatever it is: a restart is not a failure,
and the master cannot tell a restart from a failure before the new process takes the Lease, nor know in
which order it will see the old Lease expire and the new one taken. A shard whose process may still run
(restarting, suspect) keeps them also until its Lease has expired as observed: by then the shard's own
fence (kube/fence.py) has closed, so it writes nothing more. A suspect that keeps renewing keeps its
apps however long it is NotReady.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from velashard.apis import labels
from velashard.sharding.loads import lease_shard

AVAILABLE, RESTARTING, SUSPECT, DEAD = "available", "restarting", "suspect", "dead"


@dataclass(frozen=True)
class LeaseSeen:
    """The observer saw this (holder, renewTime) first at `observed_at` (its monotonic clock)."""

    holder: str
    renew_time: str
    observed_at: float


@dataclass(frozen=True)
class Member:
    status: str  # available | restarting | suspect | dead
    lease_expired: bool  # as observed (or released): the shard's fence has closed
    expires_in: float | None = None  # seconds until the lease expires as observed; None: expired or unknown


def observe(seen: Mapping[str, LeaseSeen], leases: Iterable[dict[str, Any]], now: float) -> dict[str, LeaseSeen]:
    """The observations after seeing `leases` at `now`: a shard's entry changes only when its lease did."""
    out: dict[str, LeaseSeen] = {}
    for lease in leases:
        shard = lease_shard(lease)
        if not shard:
            continue
        spec = lease.get("spec") or {}
        holder, renew = spec.get("holderIdentity") or "", spec.get("renewTime") or ""
        before = seen.get(shard)
        out[shard] = before if before is not None and (before.holder, before.renew_time) == (holder, renew) \
            else LeaseSeen(holder, renew, now)
    return out


def pod_ready(pod: dict[str, Any]) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def terminated(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") in ("Failed", "Succeeded"):
        return True
    containers = status.get("containerStatuses") or []
    # A state is reported and none runs (terminated, or waiting after a crash): the process is gone.
    return bool(containers) and all(c.get("state") and "running" not in c["state"] for c in containers)


def lease_expired(lease: dict[str, Any] | None, seen: LeaseSeen | None, now: float) -> bool:
    if lease is None:
        return True
    spec = lease.get("spec") or {}
    if not spec.get("holderIdentity"):
        return True  # released on a clean shutdown
    if seen is None:
        return False  # not observed yet: a full duration from the first sight
    return now - seen.observed_at > float(spec.get("leaseDurationSeconds") or 0)


def lease_expires_in(lease: dict[str, Any] | None, seen: LeaseSeen | None, now: float) -> float | None:
    """Seconds until `lease_expired` turns true without a renewal; None when it is true or not yet timed."""
    if lease is None or seen is None or lease_expired(lease, seen, now):
        return None
    return seen.observed_at + float((lease.get("spec") or {}).get("leaseDurationSeconds") or 0) - now


def membership(pods: Iterable[dict[str, Any]], leases: Iterable[dict[str, Any]], seen: Mapping[str, LeaseSeen],
               now: float) -> dict[str, Member]:
    """shard id -> Member for every shard with a pod or a lease (the master included)."""
    pods_by_shard: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        shard = ((pod.get("metadata") or {}).get("labels") or {}).get(labels.SHARD_ID)
        if shard:
            pods_by_shard.setdefault(shard, []).append(pod)
    lease_by_shard = {s: lease for lease in leases if (s := lease_shard(lease))}
    out: dict[str, Member] = {}
    for shard in set(pods_by_shard) | set(lease_by_shard):
        shard_pods = [p for p in pods_by_shard.get(shard, []) if not terminated(p)]
        lease, observed = lease_by_shard.get(shard), seen.get(shard)
        expired, expires_in = lease_expired(lease, observed, now), lease_expires_in(lease, observed, now)
        ready = any(pod_ready(p) for p in shard_pods)
        if not shard_pods:
            out[shard] = Member(DEAD, expired, expires_in)
        elif ready:
            out[shard] = Member(RESTARTING if expired else AVAILABLE, expired, expires_in)
        else:
            out[shard] = Member(SUSPECT, expired, expires_in)
    return out


def movable(member: Member | None, unavailable_for: float, grace: float) -> bool:
    """May apps leave this shard, unavailable for `unavailable_for` seconds? Never an available one's; an
    unknown or dead one's after the grace period; a restarting or suspect one's after the grace period once
    its lease has expired as observed."""
    if member is not None and member.status == AVAILABLE:
        return False
    if member is not None and member.status != DEAD and not member.lease_expired:
        return False
    return unavailable_for >= grace


def moves_in(member: Member | None, unavailable_for: float, grace: float) -> float | None:
    """Seconds until `movable` turns true without a change of membership: None when it never will (a suspect
    whose lease has not been timed yet, an available shard)."""
    if member is not None and member.status == AVAILABLE:
        return None
    wait = grace - unavailable_for
    if member is not None and member.status != DEAD and not member.lease_expired:
        if member.expires_in is None:
            return None
        wait = max(wait, member.expires_in)
    return wait
