"""Scheduling strategies through placement: balance, agreement between replicas, movement on join, pinning."""

from __future__ import annotations

from collections import Counter

import pytest

from velashard.sharding.placement import PlacementState, place
from velashard.sharding.strategies import Ring, app_identity, pinned_shard


def apps(n: int) -> list[dict]:
    return [{"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
             "metadata": {"name": f"app-{i}", "namespace": f"ns-{i % 7}"}} for i in range(n)]


SHARDS = [f"shard-{i}" for i in range(5)]


class Scheduler:
    """A caller of placement that keeps its state, as the webhook and the background scheduler do."""

    def __init__(self, strategy: str, seed: int = 0):
        self.state = PlacementState(strategy, seed=seed)

    def pick(self, app: dict, shards: list[str], loads: dict | None = None, pinned: str | None = None) -> str | None:
        shard, self.state = place(app, shards, loads, pinned, self.state)
        return shard


def spread(scheduler: Scheduler, items: list[dict], shards=SHARDS, loads=None) -> Counter:
    return Counter(scheduler.pick(a, shards, loads) for a in items)


def test_round_robin_and_least_loaded_are_even():
    for strategy in ("round-robin", "least-loaded"):
        counts = spread(Scheduler(strategy), apps(1000), loads={} if strategy == "least-loaded" else None)
        assert max(counts.values()) / (1000 / 5) <= 1.05, (strategy, counts)


def test_least_loaded_fills_the_emptiest_shard():
    loads = {"shard-0": 10, "shard-1": 3, "shard-2": 10}
    assert Scheduler("least-loaded").pick(apps(1)[0], ["shard-0", "shard-1", "shard-2"], loads) == "shard-1"


def test_consistent_hash_agrees_across_replicas_and_moves_little():
    one, two = Scheduler("consistent-hash"), Scheduler("consistent-hash")
    items = apps(1000)
    before = {app_identity(a): one.pick(a, SHARDS) for a in items}
    assert before == {app_identity(a): two.pick(a, list(reversed(SHARDS))) for a in items}
    counts = Counter(before.values())
    assert max(counts.values()) / (1000 / 5) <= 1.15, counts
    after = {app_identity(a): one.pick(a, SHARDS + ["shard-5"]) for a in items}
    moved = sum(1 for k in before if before[k] != after[k])
    assert moved / 1000 <= 1.2 / 6
    assert all(after[k] == "shard-5" for k in before if before[k] != after[k])  # only onto the newcomer


def test_random_uses_only_available_shards_and_none_without_shards():
    sched = Scheduler("random", seed=1)
    assert set(spread(sched, apps(100), ["a", "b"])) == {"a", "b"}
    assert sched.pick(apps(1)[0], []) is None
    assert Ring([]).lookup("x") is None


def test_namespace_pinning_falls_back_while_its_shard_is_down():
    ns = {"metadata": {"name": "tenant", "labels": {"controller.core.oam.dev/shard-id": "shard-3"}}}
    sched = Scheduler("round-robin")
    assert sched.pick(apps(1)[0], SHARDS, pinned=pinned_shard(ns)) == "shard-3"
    assert sched.pick(apps(1)[0], ["shard-0"], pinned=pinned_shard(ns)) == "shard-0"
    assert pinned_shard({"metadata": {"name": "plain"}}) is None


def test_unknown_strategy_is_rejected():
    with pytest.raises(ValueError):
        Scheduler("fastest")
