"""The fleet page's model: a card per shard and the master, and the apps that need someone. Pure: membership
comes from sharding/membership.py (the master's own rule), evaluated by the caller with its clock."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable, Mapping

from velashard.apis import labels
from velashard.dashboard.rows import UNHEALTHY, AppRow, not_converged_for, parse_time
from velashard.sharding.membership import AVAILABLE, Member, pod_ready
from velashard.sharding.loads import lease_shard

UNKNOWN = "unknown"  # the user may not read pods and leases: membership cannot be judged


@dataclass
class Card:
    shard: str
    status: str  # available | suspect | dead | unknown
    pods: str  # "ready/total"
    leader: str
    lease_age: str  # seconds since the lease was renewed, as the lease says
    apps: int  # apps labelled for it that the user can see
    reported: str  # the app count the shard itself reports on its lease
    counts: dict[str, int] = field(default_factory=dict)  # healthy, unhealthy, failed, suspended
    last_move: str = ""


@dataclass(frozen=True)
class Attention:
    key: str
    shard: str
    why: str


def _age(stamp: str | None, now: datetime) -> str:
    then = parse_time(stamp)
    return f"{max(0, int((now - then).total_seconds()))}s" if then else "-"


def cards(rows: Iterable[AppRow], members: Mapping[str, Member] | None, pods: list[dict[str, Any]],
          leases: list[dict[str, Any]], last_moves: Mapping[str, str], now: datetime) -> list[Card]:
    """One card per shard known from pods, leases or apps, the master first. `members` None: not readable."""
    per_shard: dict[str, Counter] = {}
    for row in rows:
        count = per_shard.setdefault(row.shard, Counter())
        count["apps"] += 1
        if row.phase == "workflowFailed":
            count["failed"] += 1
        elif row.phase == "workflowSuspending":
            count["suspended"] += 1
        elif row.health == UNHEALTHY or row.phase == "unhealthy":
            count["unhealthy"] += 1
        elif row.phase == "running":
            count["healthy"] += 1
    pod_counts: dict[str, list[int]] = {}
    for pod in pods:
        shard = ((pod.get("metadata") or {}).get("labels") or {}).get(labels.SHARD_ID)
        if shard:
            ready_total = pod_counts.setdefault(shard, [0, 0])
            ready_total[0] += pod_ready(pod)
            ready_total[1] += 1
    by_lease = {s: lease for lease in leases if (s := lease_shard(lease))}
    shards = set(per_shard) - {""} | set(pod_counts) | set(by_lease) | set(members or {}) | {labels.MASTER_SHARD_ID}
    out = []
    for shard in sorted(shards, key=lambda s: (s != labels.MASTER_SHARD_ID, _natural(s))):
        lease = by_lease.get(shard) or {}
        spec, notes = lease.get("spec") or {}, (lease.get("metadata") or {}).get("annotations") or {}
        member = (members or {}).get(shard)
        count = per_shard.get(shard, Counter())
        ready, total = pod_counts.get(shard, [0, 0])
        out.append(Card(shard, member.status if member else (UNKNOWN if members is None else "dead"),
                        f"{ready}/{total}" if members is not None else "-", spec.get("holderIdentity") or "-",
                        _age(spec.get("renewTime"), now) if lease else "-", count["apps"],
                        notes.get(labels.APPS_ANNOTATION, "-"),
                        {k: count[k] for k in ("healthy", "unhealthy", "failed", "suspended")},
                        last_moves.get(shard, "")))
    return out


def _natural(name: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def attention(rows: Iterable[AppRow], members: Mapping[str, Member] | None, now: datetime, stuck_after: float,
              limit: int = 200) -> tuple[list[Attention], int]:
    """The apps that need someone, most urgent first, at most `limit`; and how many there are in all."""
    found: list[tuple[int, Attention]] = []
    for row in rows:
        why, rank = "", 9
        if not row.shard:
            why, rank = "unscheduled", 0
        elif not row.proven:
            why, rank = "shard assignment without the master's proof", 1
        elif members is not None and row.shard != labels.MASTER_SHARD_ID and \
                (members.get(row.shard) is None or members[row.shard].status != AVAILABLE):
            status = members[row.shard].status if row.shard in members else "gone"
            why, rank = f"on an unavailable shard ({status})", 0
        elif row.refused:
            why, rank = ", ".join(f"{t}=False" for t in row.refused) + (f": {row.message}" if row.message else ""), 2
        elif row.phase == "workflowFailed":
            why, rank = f"workflow failed{': ' + row.message if row.message else ''}", 2
        elif row.phase == "workflowSuspending":
            why, rank = "workflow suspended, waiting for approval", 3
        elif (stuck := not_converged_for(row, now)) > stuck_after:
            why, rank = f"not converged for {int(stuck // 60)}m{int(stuck % 60):02d}s ({row.phase or 'no status'})", 4
        if why:
            found.append((rank, Attention(row.key, row.shard or "-", why)))
    found.sort(key=lambda item: (item[0], item[1].key))
    return [a for _, a in found[:limit]], len(found)
