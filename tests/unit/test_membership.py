"""The membership rule (sharding/membership.py) and the write fence (kube/fence.py), with time as an argument."""

import pytest

from velashard.apis import labels
from velashard.kube import errors
from velashard.kube.fence import Fence
from velashard.sharding.membership import (AVAILABLE, DEAD, RESTARTING, SUSPECT, LeaseSeen, Member, membership,
                                           movable, observe)


def pod(shard: str, ready: bool = True, terminated: bool = False, deleting: bool = False) -> dict:
    meta = {"name": f"vela-{shard}", "labels": {labels.SHARD_ID: shard}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    state = {"terminated": {"exitCode": 137}} if terminated else {"running": {}}
    return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": str(ready)}],
                                         "containerStatuses": [{"name": "manager", "state": state}]}}


def lease(shard: str, renew: str = "t1", holder: str = "x", duration: int = 4) -> dict:
    return {"metadata": {"name": f"velashard-{shard}", "labels": {labels.SHARD_ID: shard}},
            "spec": {"holderIdentity": holder, "renewTime": renew, "leaseDurationSeconds": duration}}


def status(pods, leases, seen, now) -> dict[str, str]:
    return {s: m.status for s, m in membership(pods, leases, seen, now).items()}


def test_ready_pod_and_renewed_lease_is_available():
    leases = [lease("a")]
    seen = observe({}, leases, 100.0)
    assert status([pod("a")], leases, seen, 103.9) == {"a": AVAILABLE}


def test_lease_not_renewed_for_its_duration_makes_a_ready_shard_restarting():
    leases = [lease("a")]
    seen = observe({}, leases, 100.0)
    seen = observe(seen, leases, 103.0)  # same renewTime seen again: the observation keeps its first time
    assert seen["a"].observed_at == 100.0
    assert membership([pod("a")], leases, seen, 103.5)["a"].expires_in == pytest.approx(0.5)
    # A Ready pod whose lease expired: a process stands by for the lease its dead predecessor held.
    assert membership([pod("a")], leases, seen, 104.5) == {"a": Member(RESTARTING, True)}


def test_a_renewal_restarts_the_observed_time_whatever_the_renewtime_says():
    seen = observe({}, [lease("a", renew="2026-01-01T00:00:00Z")], 100.0)
    # The shard's clock runs an hour behind: only the change counts, not the value.
    leases = [lease("a", renew="2025-12-31T23:00:00Z")]
    seen = observe(seen, leases, 103.5)
    assert status([pod("a")], leases, seen, 107.0) == {"a": AVAILABLE}


def test_not_ready_while_renewing_is_suspect_and_not_movable():
    leases = [lease("a")]
    seen = observe({}, leases, 100.0)
    member = membership([pod("a", ready=False)], leases, seen, 101.0)["a"]
    assert member == Member(SUSPECT, False, expires_in=3.0)  # the observer looks again right then
    assert not movable(member, unavailable_for=1000.0, grace=0.0)


def test_a_suspect_whose_lease_expired_still_waits_out_the_grace_period():
    leases = [lease("a")]
    member = membership([pod("a", ready=False)], leases, observe({}, leases, 100.0), 105.0)["a"]
    assert member == Member(SUSPECT, True)
    assert not movable(member, unavailable_for=59.0, grace=60.0)
    assert movable(member, unavailable_for=60.0, grace=60.0)


def test_no_pod_or_terminated_containers_is_dead_and_moves_after_grace():
    leases = [lease("a"), lease("b")]
    seen = observe({}, leases, 100.0)
    members = membership([pod("b", ready=False, terminated=True)], leases, seen, 100.5)
    assert {s: m.status for s, m in members.items()} == {"a": DEAD, "b": DEAD}
    assert not movable(members["a"], unavailable_for=4.9, grace=5.0)
    assert movable(members["b"], unavailable_for=5.0, grace=5.0)


def test_a_deleting_pod_whose_process_may_still_run_is_suspect_not_dead():
    leases = [lease("a")]
    assert status([pod("a", deleting=True)], leases, observe({}, leases, 0.0), 1.0) == {"a": SUSPECT}


def test_released_or_missing_lease_counts_as_expired():
    members = membership([pod("a"), pod("b", ready=False)], [lease("a", holder="")], {}, 0.0)
    assert members["a"] == Member(RESTARTING, True)
    assert members["b"] == Member(SUSPECT, True)


def test_a_lease_not_yet_observed_is_not_expired():
    assert membership([pod("a", ready=False)], [lease("a")], {}, 1e9)["a"] == Member(SUSPECT, False)


def test_unknown_shard_moves_after_grace():
    assert movable(None, unavailable_for=60.0, grace=60.0) and not movable(None, unavailable_for=59.0, grace=60.0)


def restart(order: str, grace: float) -> list[tuple[float, str, bool]]:
    """A shard killed at t=1 and restarted as a kubelet does (terminated, then a new process, NotReady while it
    starts, Ready as a standby, then holding the lease under a new identity), its lease (duration 4 s, renewed
    every 0.5 s until the kill) observed by a master in `order`: "expiry-first" (the new process takes the
    lease after the master saw the old one expire) or "taken-first". Returns (time, status, movable) at each
    observation, with the unavailable time counted as the scheduler does."""
    seen: dict = {}
    since: float | None = None
    out = []
    taken_at = 5.5 if order == "expiry-first" else 4.8
    for step in range(0, 200):
        now = step * 0.1
        renew = f"r{min(step // 5, 2)}" if now < taken_at else f"n{step // 5}"
        holder = "old" if now < taken_at else "new"
        pods = [pod("a", ready=False, terminated=True)] if 1.0 <= now < 2.0 else \
            [pod("a", ready=now >= 2.5 or now < 1.0)]
        leases = [lease("a", renew=renew, holder=holder)]
        seen = observe(seen, leases, now)
        member = membership(pods, leases, seen, now)["a"]
        since = None if member.status == AVAILABLE else (now if since is None else since)
        out.append((round(now, 1), member.status, since is not None and movable(member, now - since, grace)))
    return out


@pytest.mark.parametrize("order", ["expiry-first", "taken-first"])
def test_a_restarted_shard_is_told_from_a_dead_one_and_keeps_its_apps_for_the_grace_period(order):
    timeline = restart(order, grace=10.0)
    statuses = [status for _, status, _ in timeline]
    assert not any(movable for _, _, movable in timeline)
    assert statuses[0] == AVAILABLE and statuses[-1] == AVAILABLE
    assert DEAD in statuses  # terminated: the old process is gone
    if order == "expiry-first":
        # A Ready standby whose lease expired is restarting, and was not movable at once (it was, before).
        assert RESTARTING in statuses
    # With a grace period shorter than the outage, the apps do move: a restart is told from a failure by time.
    assert any(movable for _, _, movable in restart(order, grace=0.5))


def test_observe_records_holder_changes():
    seen = {"a": LeaseSeen("x", "t1", 0.0)}
    assert observe(seen, [lease("a", holder="y")], 5.0)["a"] == LeaseSeen("y", "t1", 5.0)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_fence_is_closed_until_the_lease_is_held_and_reopened():
    clock = Clock()
    fence = Fence(2.5, clock)
    with pytest.raises(errors.Fenced):
        fence.allow_write("update", "/x")
    fence.renewed(0.0)
    assert fence.reopen()
    fence.allow_write("update", "/x")


def test_fence_trips_at_the_deadline_and_stays_closed_after_late_renewals():
    clock = Clock()
    fence = Fence(2.5, clock)
    trips = []
    fence.on_trip(trips.append)
    fence.renewed(0.0)
    fence.reopen()
    clock.now = 2.4
    assert fence.check()
    clock.now = 2.5  # the deadline: last renew + deadline must be > now
    with pytest.raises(errors.Fenced):
        fence.allow_write("patch", "/x")
    fence.renewed(2.6)  # renewing again does not reopen it: the manager re-lists first
    assert not fence.check() and len(trips) == 1
    assert fence.reopen() and fence.check()


def test_waking_from_a_pause_trips_on_the_late_renewal_before_any_write():
    clock = Clock()
    fence = Fence(2.5, clock)
    fence.renewed(0.0)
    fence.reopen()
    clock.now = 30.0
    fence.renewed(30.0)  # the renewal thread ran first after the pause
    assert not fence.check() and "renewed after the renew deadline" in fence.reason


def test_work_begun_before_the_fence_tripped_writes_nothing_after_it_reopens():
    from velashard.kube.fence import begin_work, end_work
    clock = Clock()
    fence = Fence(2.5, clock)
    fence.renewed(0.0)
    fence.reopen()
    clock.now = 1.0
    begin_work(clock)
    clock.now = 3.0
    assert not fence.check()
    fence.renewed(3.0)
    clock.now = 3.5
    assert fence.reopen()
    try:
        with pytest.raises(errors.Fenced, match="began before"):
            fence.allow_write("update", "/x")
        begin_work(clock)  # the next reconcile, after the reopen
        fence.allow_write("update", "/x")
    finally:
        end_work()


def test_a_container_waiting_to_restart_is_dead_and_one_without_a_reported_state_is_not():
    waiting = pod("a")
    waiting["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "CrashLoopBackOff"}}
    unknown = pod("b", ready=False)
    del unknown["status"]["containerStatuses"][0]["state"]
    statuses = status([waiting, unknown], [lease("a"), lease("b")], {}, 0.0)
    assert statuses == {"a": DEAD, "b": SUSPECT}
