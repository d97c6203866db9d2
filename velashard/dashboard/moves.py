"""The moves page's model, from the Events the master records (sharding/move.py): each shard failure as an
episode (lost at t0, the apps moved, when every one was reconciled on its new shard: the failover time), and the
other reschedules and drains. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable, Mapping

from velashard.apis import labels
from velashard.dashboard.rows import parse_time

MOVE_REASONS = ("Scheduled", "Rescheduled", "Draining")


@dataclass(frozen=True, slots=True)
class Move:
    at: str  # the Event's time (RFC 3339)
    key: str  # namespace/name of the app
    event: str  # Scheduled | Rescheduled | Draining
    source: str  # the shard it left ("" when placed)
    target: str
    why: str  # admission | unscheduled | orphaned | manual | rebalance
    lost_at: str  # orphaned: when the master first saw the source unavailable
    message: str


def move_of(event: dict[str, Any]) -> Move | None:
    """A placement, move or drain from its Event; None for any other Event."""
    if event.get("reason") not in MOVE_REASONS:
        return None
    notes = (event.get("metadata") or {}).get("annotations") or {}
    involved = event.get("involvedObject") or {}
    return Move(event.get("lastTimestamp") or event.get("eventTime") or (event.get("metadata") or {}).get(
        "creationTimestamp") or "", f'{involved.get("namespace", "")}/{involved.get("name", "")}', event["reason"],
        notes.get(labels.EVENT_FROM_SHARD, ""), notes.get(labels.EVENT_TO_SHARD, ""),
        notes.get(labels.EVENT_MOVE_REASON, ""), notes.get(labels.EVENT_SHARD_LOST_AT, ""),
        event.get("message") or "")


@dataclass
class Episode:
    shard: str
    lost_at: str
    moves: list[Move] = field(default_factory=list)
    moved_at: str = ""  # the last move's time
    reconciled_at: str = ""  # when every target shard reported all its apps reconciled; "" not yet (or not seen)
    failover: float | None = None  # seconds from lost_at to reconciled_at

    @property
    def key(self) -> tuple[str, str]:
        return (self.shard, self.lost_at)

    @property
    def targets(self) -> list[str]:
        return sorted({m.target for m in self.moves})

    @property
    def moved_in(self) -> float | None:
        lost, moved = parse_time(self.lost_at), parse_time(self.moved_at)
        return (moved - lost).total_seconds() if lost and moved else None


def episodes(moves: Iterable[Move], reconciled: Mapping[tuple[str, str], str]) -> list[Episode]:
    """Shard failures, newest first: the orphaned apps' moves grouped by the shard left and when it was lost.
    `reconciled`: episode key -> when its targets were seen to have reconciled every app (the caller's watch)."""
    found: dict[tuple[str, str], Episode] = {}
    for move in moves:
        if move.event == "Rescheduled" and move.why == "orphaned":
            episode = found.setdefault((move.source, move.lost_at), Episode(move.source, move.lost_at))
            episode.moves.append(move)
    for episode in found.values():
        episode.moves.sort(key=lambda m: (m.at, m.key))
        episode.moved_at = episode.moves[-1].at
        episode.reconciled_at = reconciled.get(episode.key, "")
        lost, done = parse_time(episode.lost_at), parse_time(episode.reconciled_at)
        episode.failover = (done - lost).total_seconds() if lost and done else None
    return sorted(found.values(), key=lambda e: e.lost_at, reverse=True)


def others(moves: Iterable[Move], limit: int = 200) -> list[Move]:
    """Reschedules by hand or after a drain, drains and scheduler placements (not admission ones), newest first."""
    kept = [m for m in moves if m.event == "Draining" or (m.event == "Rescheduled" and m.why != "orphaned")
            or (m.event == "Scheduled" and m.why != "admission")]
    return sorted(kept, key=lambda m: m.at, reverse=True)[:limit]


def last_moves(moves: Iterable[Move]) -> dict[str, str]:
    """shard -> a line on its latest move in or out."""
    latest: dict[str, Move] = {}
    for move in moves:
        if move.event != "Rescheduled":
            continue
        for shard in (move.source, move.target):
            if shard and (shard not in latest or move.at >= latest[shard].at):
                latest[shard] = move
    return {shard: f"{m.at} {m.key} {m.source} → {m.target}" for shard, m in latest.items()}


def history(moves: Iterable[Move], key: str, current: str) -> list[tuple[str, str]]:
    """(shard, since) for each shard an app has been on, oldest first, from its placement and move Events."""
    out: list[tuple[str, str]] = []
    for move in sorted((m for m in moves if m.key == key and m.event != "Draining"), key=lambda m: m.at):
        if not out or out[-1][0] != move.target:
            out.append((move.target, move.at))
    if current and (not out or out[-1][0] != current):
        out.append((current, ""))
    return out


def is_done(episode_targets: Iterable[str], moved_at: datetime, reports: Mapping[str, tuple[datetime, int, int]],
            visible: Mapping[str, int]) -> datetime | None:
    """When an episode's reconciliation is complete: each target's latest lease report, renewed after the last
    move, counts at least the apps the user sees on it and has reconciled them all. None: not yet."""
    times = []
    for shard in episode_targets:
        report = reports.get(shard)
        if report is None:
            return None
        renewed, apps, reconciled = report
        if renewed < moved_at or apps < visible.get(shard, 0) or reconciled < apps:
            return None
        times.append(renewed)
    return max(times) if times else None
