"""Placement: which shard an application belongs on, as pure functions over plain data.

The webhook, the background scheduler and the rebalancer all decide through these functions, so
every path honours namespace pins and counts its own picks. What a strategy remembers between
decisions (the round-robin position, the picks made since the loads were last read) travels in a
`PlacementState` that each caller keeps and passes back; time comes in as an argument.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Iterable, Mapping, Sequence

from velashard.apis import labels
from velashard.sharding.membership import Member, movable, moves_in
from velashard.sharding.strategies import STRATEGIES, Ring, app_identity

App = Mapping[str, Any]


@dataclass(frozen=True)
class PlacementState:
    """A strategy and what it remembers. `picks` are the apps placed since `loads_seen` was read: a burst of
    creates between two load reports spreads instead of piling onto the shard that looked emptiest."""

    strategy: str = "round-robin"
    seed: int = 0
    decisions: int = 0  # round-robin position, and random's draw counter
    loads_seen: tuple[tuple[str, int], ...] = ()
    picks: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.strategy!r}; choose one of {', '.join(STRATEGIES)}")


@lru_cache(maxsize=8)
def _ring(shards: tuple[str, ...]) -> Ring:
    return Ring(shards)


def place(app: App, shards: Sequence[str], loads: Mapping[str, int] | None, pin: str | None,
          state: PlacementState) -> tuple[str | None, PlacementState]:
    """The shard for `app` among the available `shards` (None when there is none), and the state after it.

    A namespace pin wins while its shard is available. Least-loaded adds the picks it made since these
    `loads` were read to the loads, so it spreads a burst; the picks start over when the loads change.
    """
    available = sorted(set(shards))
    if not available:
        return None, state
    snapshot = tuple(sorted((loads or {}).items()))
    picks = dict(state.picks) if snapshot == state.loads_seen else {}
    if pin and pin in available:
        choice = pin
    elif state.strategy == "consistent-hash":
        choice = _ring(tuple(available)).lookup(app_identity(app)) or available[0]
    elif state.strategy == "least-loaded":
        counts = loads or {}
        choice = min(available, key=lambda s: (counts.get(s, 0) + picks.get(s, 0), s))
    elif state.strategy == "random":
        choice = random.Random(f"{state.seed}:{state.decisions}").choice(available)
    else:
        choice = available[state.decisions % len(available)]
    picks[choice] = picks.get(choice, 0) + 1
    return choice, replace(state, decisions=state.decisions + 1, loads_seen=snapshot, picks=picks)


def place_all(apps: Iterable[App], shards: Sequence[str], loads: Mapping[str, int] | None,
              pins: Mapping[str, str], state: PlacementState) -> tuple[list[tuple[App, str | None]], PlacementState]:
    """`place` for each app in turn, as a scheduling pass does: each pick counts for the next."""
    placed = []
    for app in apps:
        shard, state = place(app, shards, loads, pin_of(app, pins), state)
        placed.append((app, shard))
    return placed, state


def shard_of(app: App) -> str | None:
    return ((app.get("metadata") or {}).get("labels") or {}).get(labels.SCHEDULED_SHARD_ID)


def pin_of(app: App, pins: Mapping[str, str]) -> str | None:
    """The shard the app's namespace is pinned to, if any."""
    return pins.get((app.get("metadata") or {}).get("namespace") or "")


def misplaced(apps: Iterable[App], shards: Sequence[str], pins: Mapping[str, str],
              state: PlacementState) -> list[tuple[App, str]]:
    """Apps that placement would now put on another available shard, with that shard: what a rebalance asks
    to drain. Only a deterministic strategy (consistent-hash) rebalances, and never an app whose namespace is
    pinned: a pin is the tenant's choice, honoured when its apps are placed, not a reason to move them."""
    if state.strategy != "consistent-hash":
        return []
    out = []
    for app in apps:
        current = shard_of(app)
        if pin_of(app, pins) is not None:
            continue
        target, _ = place(app, shards, None, None, state)
        if target is not None and target != current:
            out.append((app, target))
    return out


def track_unavailable(since: Mapping[str, float], unavailable: Iterable[str], now: float,
                      last_available: Mapping[str, float] | None = None) -> dict[str, float]:
    """Since when each shard that still holds apps has been unavailable: new ones from `now`, ones back or
    empty forgotten, and none from before it was `last_available` (when membership last found it available:
    a shard back for a moment between two looks at its apps starts its grace period again)."""
    last = last_available or {}
    return {shard: max(since.get(shard, now), last.get(shard, float("-inf"))) for shard in set(unavailable)}


def due_orphans(apps: Iterable[App], unavailable_since: Mapping[str, float], now: float, grace: float,
                members: Mapping[str, Member] | None = None) -> list[App]:
    """Apps whose shard has been unavailable long enough to move now, by the membership rule
    (sharding/membership.py `movable`): after `grace` seconds, and for a shard whose process may still run
    (restarting, suspect) once its lease has also expired as the master saw it. Apps of a shard not in
    `unavailable_since` stay."""
    members = members or {}
    return [app for app in apps
            if (shard := shard_of(app)) in unavailable_since
            and movable(members.get(shard), now - unavailable_since[shard], grace)]


def due_in(unavailable_since: Mapping[str, float], now: float, grace: float,
           members: Mapping[str, Member] | None = None) -> float | None:
    """Seconds until the next unavailable shard's apps may move by the membership rule (the end of its grace
    period, or its lease's expiry as observed if that comes later), or None when none will without a change
    of membership. Shards whose apps may move already are not waited for."""
    members = members or {}
    waits = [moves_in(members.get(shard), now - since, grace) for shard, since in unavailable_since.items()]
    return min((w for w in waits if w is not None and w > 0), default=None)


def versions(apps: Iterable[App]) -> dict[str, str]:
    """uid -> resourceVersion of each app."""
    return {meta.get("uid", ""): meta.get("resourceVersion", "") for meta in (a.get("metadata") or {} for a in apps)}


def acted_on(app: App, acted: Mapping[str, str]) -> bool:
    """Whether a move already started from the app's cached version: a cache shows the master's own writes one
    watch event later, and a second move from the same version would only conflict."""
    meta = app.get("metadata") or {}
    return acted.get(meta.get("uid", "")) == meta.get("resourceVersion")
