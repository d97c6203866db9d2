"""Placement as pure functions: every strategy's balance on the webhook path (one decision per admission
request, loads read afresh each time) and the scheduler path (a pass over many apps), pins, drains, orphans."""

from __future__ import annotations

import base64
import json
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from velashard.apis import labels
from velashard.sharding.placement import (PlacementState, acted_on, due_in, due_orphans, misplaced, place,
                                          place_all, track_unavailable)
from velashard.sharding.proof import Signer
from velashard.sharding.strategies import STRATEGIES
from velashard.webhook.decisions import MutationContext, ValidationContext
from velashard.webhook.app import create_app, make_pick
from velashard.webhook.paths import MUTATING_PATH

SHARDS = ["shard-0", "shard-1", "shard-2"]


def app(i: int, namespace: str = "", shard: str | None = None) -> dict:
    meta: dict = {"name": f"app-{i}", "namespace": namespace or f"team-{i % 17}"}
    if shard:
        meta["labels"] = {labels.SCHEDULED_SHARD_ID: shard}
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": meta}


def webhook_path(strategy: str, apps: list[dict], shards: list[str], loads: dict[str, int],
                 pins: dict[str, str] | None = None) -> Counter:
    """Creates through the mutating webhook's HTTP handler, the loads read afresh for every request."""
    pick = make_pick(strategy, lambda: list(shards), lambda: dict(loads), lambda ns: (pins or {}).get(ns))
    http = create_app(MutationContext(pick=pick, signer=Signer.generate()), ValidationContext()).test_client()
    counts: Counter = Counter()
    for obj in apps:
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": obj["metadata"]["name"], "operation": "CREATE", "object": obj, "oldObject": None,
            "kind": {"group": "core.oam.dev", "version": "v1beta1", "kind": "Application"},
            "userInfo": {"username": "alice"}}}
        answer = http.post(MUTATING_PATH, data=json.dumps(review)).json["response"]
        patch = json.loads(base64.b64decode(answer["patch"]))
        counts[patch[-1]["value"]] += 1
    return counts


def scheduler_path(strategy: str, apps: list[dict], shards: list[str], loads: dict[str, int],
                   pins: dict[str, str] | None = None) -> Counter:
    placed, _ = place_all(apps, shards, dict(loads), pins or {}, PlacementState(strategy, seed=7))
    return Counter(shard for _, shard in placed)


PATHS = [webhook_path, scheduler_path]


@pytest.mark.parametrize("path", PATHS)
def test_least_loaded_splits_thirty_creates_over_three_equal_shards_ten_each(path):
    assert path("least-loaded", [app(i) for i in range(30)], SHARDS, {s: 5 for s in SHARDS}) == \
        {"shard-0": 10, "shard-1": 10, "shard-2": 10}


@pytest.mark.parametrize("path", PATHS)
def test_least_loaded_fills_the_emptiest_shards_first(path):
    counts = path("least-loaded", [app(i) for i in range(9)], SHARDS, {"shard-0": 6, "shard-1": 3, "shard-2": 0})
    assert counts == {"shard-1": 3, "shard-2": 6}


def test_picks_start_over_when_fresh_loads_arrive():
    state = PlacementState("least-loaded")
    for i in range(3):
        _, state = place(app(i), SHARDS, {"shard-0": 0, "shard-1": 0, "shard-2": 0}, None, state)
    assert state.picks == {"shard-0": 1, "shard-1": 1, "shard-2": 1}
    shard, state = place(app(9), SHARDS, {"shard-0": 1, "shard-1": 1, "shard-2": 0}, None, state)
    assert shard == "shard-2" and state.picks == {"shard-2": 1}  # the new report already counts the old picks


@settings(max_examples=60, deadline=None)
@given(strategy=st.sampled_from(["round-robin", "least-loaded"]), n=st.integers(1, 60),
       shards=st.integers(1, 6), base=st.integers(0, 50), via_webhook=st.booleans())
def test_balanced_strategies_never_differ_by_more_than_one_app(strategy, n, shards, base, via_webhook):
    names = [f"s{i}" for i in range(shards)]
    counts = (webhook_path if via_webhook else scheduler_path)(strategy, [app(i) for i in range(n)], names,
                                                               {s: base for s in names})
    assert sum(counts.values()) == n
    assert max(counts.get(s, 0) for s in names) - min(counts.get(s, 0) for s in names) <= 1


@settings(max_examples=40, deadline=None)
@given(loads=st.lists(st.integers(0, 30), min_size=2, max_size=5), n=st.integers(1, 80))
def test_least_loaded_only_ever_picks_a_least_loaded_shard(loads, n):
    names = [f"s{i}" for i in range(len(loads))]
    state, current = PlacementState("least-loaded"), dict(zip(names, loads))
    total = dict(current)
    for i in range(n):
        shard, state = place(app(i), names, current, None, state)
        assert total[shard] == min(total.values())
        total[shard] += 1


@pytest.mark.parametrize("strategy,bound", [("round-robin", 1.0), ("least-loaded", 1.0), ("random", 1.15),
                                            ("consistent-hash", 1.15)])
@pytest.mark.parametrize("path", PATHS)
def test_every_strategy_keeps_its_balance_bound_on_both_paths(path, strategy, bound):
    names = [f"shard-{i}" for i in range(5)]
    counts = path(strategy, [app(i) for i in range(1000)], names, {s: 0 for s in names})
    assert max(counts.values()) / 200 <= bound, counts


@settings(max_examples=40, deadline=None)
@given(strategy=st.sampled_from(STRATEGIES), n=st.integers(1, 30), via_webhook=st.booleans(),
       pinned=st.sampled_from(SHARDS + ["gone"]))
def test_a_pin_wins_while_its_shard_is_available(strategy, n, via_webhook, pinned):
    apps = [app(i, namespace="tenant") for i in range(n)]
    counts = (webhook_path if via_webhook else scheduler_path)(strategy, apps, SHARDS, {s: 0 for s in SHARDS},
                                                               {"tenant": pinned})
    if pinned in SHARDS:
        assert counts == {pinned: n}
    else:
        assert set(counts) <= set(SHARDS) and sum(counts.values()) == n


def test_no_shard_no_place():
    state = PlacementState("round-robin")
    assert place(app(1), [], {}, "shard-0", state) == (None, state)


def test_unknown_strategy_is_refused():
    with pytest.raises(ValueError, match="unknown strategy 'fastest'"):
        PlacementState("fastest")


@settings(max_examples=50, deadline=None)
@given(n=st.integers(1, 40), pinned_ns=st.integers(0, 6), pin_index=st.integers(0, 3), join=st.booleans())
def test_a_rebalance_never_drains_a_pinned_app(n, pinned_ns, pin_index, join):
    shards = ["shard-0", "shard-1", "shard-2"] + (["shard-3"] if join else [])
    pin = shards[pin_index % len(shards)]
    pins = {f"team-{pinned_ns}": pin}
    state = PlacementState("consistent-hash")
    placed, _ = place_all([app(i) for i in range(n)], shards[:3], None, pins, state)
    apps = [app(i, shard=shard) for i, (_, shard) in enumerate(placed)]
    drained = misplaced(apps, shards, pins, state)
    assert not any(a["metadata"]["namespace"] in pins for a, _ in drained)
    for a, target in drained:  # and every drain is one placement agrees with
        assert target == place(a, shards, None, None, state)[0] != a["metadata"]["labels"][labels.SCHEDULED_SHARD_ID]
    if not join:
        assert drained == []  # nothing changed, nothing moves


def test_twenty_pinned_apps_are_not_drained_on_a_join():
    pins = {"tenant": "shard-0"}
    apps = [app(i, namespace="tenant", shard="shard-0") for i in range(20)]
    assert misplaced(apps, SHARDS + ["shard-3"], pins, PlacementState("consistent-hash")) == []
    assert len(misplaced(apps, SHARDS + ["shard-3"], {}, PlacementState("consistent-hash"))) > 0


def test_only_consistent_hash_rebalances():
    apps = [app(i, shard="shard-0") for i in range(10)]
    for strategy in ("round-robin", "random", "least-loaded"):
        assert misplaced(apps, SHARDS, {}, PlacementState(strategy)) == []


def test_orphans_move_once_their_shard_has_been_gone_for_the_grace_period():
    apps = [app(1, shard="a"), app(2, shard="b"), app(3, shard="c")]
    since = track_unavailable({}, ["a", "b"], now=100.0)
    assert since == {"a": 100.0, "b": 100.0}
    since = track_unavailable(since, ["b", "c"], now=150.0)  # a came back; c is new
    assert since == {"b": 100.0, "c": 150.0}
    assert [x["metadata"]["name"] for x in due_orphans(apps, since, now=159.9, grace=60)] == []
    assert [x["metadata"]["name"] for x in due_orphans(apps, since, now=160.0, grace=60)] == ["app-2"]
    assert [x["metadata"]["name"] for x in due_orphans(apps, since, now=210.0, grace=60)] == ["app-2", "app-3"]


def test_a_shard_back_for_a_moment_between_two_looks_starts_its_grace_period_again():
    since = track_unavailable({}, ["a"], now=100.0)
    # Membership found it available at 130 (a restart done), and it left again (the next restart) before the
    # scheduler looked at its apps: its grace period runs from 130, not 100.
    since = track_unavailable(since, ["a"], now=140.0, last_available={"a": 130.0, "b": 135.0})
    assert since == {"a": 130.0}
    assert due_orphans([app(1, shard="a")], since, now=185.0, grace=60) == []
    assert track_unavailable(since, ["a"], now=150.0, last_available={"a": 90.0}) == {"a": 130.0}


def test_the_scheduler_wakes_when_the_next_orphans_become_due():
    from velashard.sharding.membership import DEAD, RESTARTING, SUSPECT, Member
    since = {"dead": 100.0, "unknown": 130.0, "suspect": 100.0}
    members = {"dead": Member(DEAD, True), "suspect": Member(SUSPECT, False, expires_in=4.0)}
    assert due_in(since, now=110.0, grace=60, members=members) == 50.0  # the grace period, not the lease, decides
    # With a short grace period, a suspect's lease expiry as observed comes later and decides.
    assert due_in({"suspect": 100.0}, now=101.0, grace=2, members=members) == 4.0
    # Apps due already were moved in this pass; nothing left to wait for but the unknown shard.
    assert due_in(since, now=170.0, grace=60, members={"dead": Member(DEAD, True)}) == 20.0
    # A restarting or suspect shard whose lease expired waits out the grace period like a dead one.
    for status in (SUSPECT, RESTARTING):
        assert due_in({"s": 100.0}, now=110.0, grace=60, members={"s": Member(status, True)}) == 50.0
    # A suspect whose lease was not timed yet (first seen just now) waits for a change.
    assert due_in({"s": 100.0}, now=110.0, grace=60, members={"s": Member(SUSPECT, False)}) is None
    assert due_in({}, now=0.0, grace=60) is None


def test_a_move_is_not_started_twice_from_the_same_cached_version():
    moved = {"metadata": {"uid": "u1", "resourceVersion": "5"}}
    assert acted_on(moved, {"u1": "5"})
    assert not acted_on({"metadata": {"uid": "u1", "resourceVersion": "6"}}, {"u1": "5"})  # changed since: again
    assert not acted_on(moved, {})
