"""Leader election between candidates in one process, on a real Lease in the embedded API server."""

from __future__ import annotations

import threading
import time
from typing import Iterator

import pytest

from velashard.kube.client import KubeClient
from velashard.kube.leaderelection import LeaderElector, micro_time
from velashard.kube.resources import LEASES
from tests.integration.helpers import eventually

LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 2.0, 1.5, 0.2


class Candidates:
    """Electors sharing one lease; records who leads and checks that two never lead at once."""

    def __init__(self, kube: KubeClient, namespace: str):
        self.kube = kube
        self.namespace = namespace
        self.electors: dict[str, LeaderElector] = {}
        self.leading: set[str] = set()
        self.overlaps: list[set[str]] = []
        self.stopped: list[str] = []
        self._lock = threading.Lock()

    def start(self, identity: str) -> LeaderElector:
        def started() -> None:
            with self._lock:
                self.leading.add(identity)
                if len(self.leading) > 1:
                    self.overlaps.append(set(self.leading))

        def stopped() -> None:
            with self._lock:
                self.leading.discard(identity)
                self.stopped.append(identity)

        elector = LeaderElector(self.kube, "velashard-shard-t", self.namespace, identity, started, stopped,
                                LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD)
        self.electors[identity] = elector
        elector.start()
        return elector

    def holder(self) -> str | None:
        return (self.kube.get(LEASES, "velashard-shard-t", self.namespace).get("spec") or {}).get("holderIdentity")


@pytest.fixture
def candidates(apiserver, namespace) -> Iterator[Candidates]:
    c = Candidates(KubeClient.from_kubeconfig(apiserver.kubeconfig, shard_id="shard-t"), namespace)
    yield c
    for elector in c.electors.values():
        elector.stop()
    assert c.overlaps == []


def test_one_leader_and_a_graceful_stop_hands_over_at_once(candidates):
    first = candidates.start("first")
    eventually(lambda: first.is_leader)
    second = candidates.start("second")
    time.sleep(LEASE_DURATION + 2 * RETRY_PERIOD)  # longer than a lease: renewals keep the standby out
    assert candidates.holder() == "first" and not second.is_leader
    lease = candidates.kube.get(LEASES, "velashard-shard-t", candidates.namespace)
    assert lease["spec"]["leaseDurationSeconds"] == 2

    first.stop(release=True)
    released = time.monotonic()
    eventually(lambda: second.is_leader, interval=0.02)
    # A released lease is free: the standby takes it on its next try, without waiting a lease duration.
    assert time.monotonic() - released < LEASE_DURATION
    assert candidates.stopped == ["first"]


def test_after_a_crash_the_standby_waits_out_the_lease_then_takes_over(candidates):
    first = candidates.start("first")
    eventually(lambda: first.is_leader)
    second = candidates.start("second")
    time.sleep(2 * RETRY_PERIOD)
    first.stop(release=False)  # a crash: the lease stays as last renewed
    crashed = time.monotonic()
    eventually(lambda: second.is_leader, timeout=LEASE_DURATION + 5, interval=0.02)
    took = time.monotonic() - crashed
    # Never before the lease could have expired (the last renewal was at most one retry period before the
    # crash), and promptly after.
    assert took >= LEASE_DURATION - RETRY_PERIOD, took
    assert candidates.holder() == "second"


def test_a_leader_that_sees_another_holder_steps_down_at_once(candidates):
    leader = candidates.start("leader")
    eventually(lambda: leader.is_leader)
    lease = candidates.kube.get(LEASES, "velashard-shard-t", candidates.namespace)
    lease["spec"].update(holderIdentity="intruder", renewTime=micro_time(time.time()))
    candidates.kube.update(LEASES, lease)  # failure injection: someone else wrote the lease
    stolen = time.monotonic()
    eventually(lambda: not leader.is_leader, interval=0.02)
    assert time.monotonic() - stolen < RENEW_DEADLINE  # did not wait for its renew deadline
    assert candidates.stopped == ["leader"]


def test_a_leader_renews_with_one_update_and_no_read(apiserver, candidates):
    leader = candidates.start("leader")
    eventually(lambda: leader.is_leader)
    since = apiserver.audit.since(0)["lastSeq"]

    def renewals() -> list[tuple[str, int]]:
        return [(r["verb"], r["code"]) for r in apiserver.audit.since(since)["items"]
                if r["resource"] == "leases" and r["name"] == "velashard-shard-t"]

    eventually(lambda: len(renewals()) >= 3, timeout=RETRY_PERIOD * 60)
    assert set(renewals()) == {("update", 200)}  # client-go's fast path: the leader writes what it last wrote
