"""Leader election on a coordination.k8s.io Lease: one active replica per lease name.

The decision is a pure function of the lease, this candidate and the time, like client-go's: a
candidate may take the lease when nobody holds it, when it holds it already, or when the holder
has not renewed it for a lease duration as observed by this candidate's own clock.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.fence import Fence
from velashard.kube.resources import LEASES
from velashard.observability import LEADER, fields

log = logging.getLogger("velashard.kube.leaderelection")


def micro_time(moment: float) -> str:
    return datetime.fromtimestamp(moment, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Observation:
    """What this candidate last saw of the lease, and when (monotonic clock)."""

    holder: str
    renew_time: str
    observed_at: float


def may_acquire(spec: dict[str, Any] | None, identity: str, seen: Observation | None, now: float,
                lease_duration: float) -> bool:
    if not spec or not spec.get("holderIdentity"):
        return True
    if spec["holderIdentity"] == identity:
        return True
    if seen is None or seen.holder != spec["holderIdentity"] or seen.renew_time != spec.get("renewTime"):
        return False  # the record just changed: wait a full duration from now before taking it
    duration = spec.get("leaseDurationSeconds") or lease_duration
    return now - seen.observed_at > duration


class LeaderElector:
    def __init__(self, client: KubeClient, name: str, namespace: str, identity: str,
                 on_started: Callable[[], None], on_stopped: Callable[[], None], lease_duration: float = 15.0,
                 renew_deadline: float = 10.0, retry_period: float = 2.0, fence: Fence | None = None,
                 labels: dict[str, str] | None = None, annotations: Callable[[], dict[str, str]] | None = None):
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("need lease-duration > renew-deadline > retry-period > 0")
        self.client = client
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.on_started = on_started
        self.on_stopped = on_stopped
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.fence = fence
        self.labels = dict(labels or {})
        # Extra data riding on each renewal (the shard's load report), so readers need no second object.
        self.annotations = annotations
        self._seen: Observation | None = None
        self._held: dict[str, Any] | None = None  # the lease as this process last wrote it
        self._leader = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._gauge = LEADER.labels(lease=f"{namespace}/{name}")

    @property
    def is_leader(self) -> bool:
        return self._leader

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"leader-{self.name}", daemon=True)
        self._thread.start()

    def stop(self, release: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.retry_period + 5)
        if self._leader:
            self._set_leader(False)
            if release:
                self._release()

    def _run(self) -> None:
        last_renew = 0.0
        while not self._stop.is_set():
            attempt = time.monotonic()
            ok = self._try_acquire_or_renew()
            if ok:
                last_renew = attempt  # the lease runs from when the renewal was sent, not when it was answered
                if self.fence is not None:
                    self.fence.renewed(attempt)
                if not self._leader:
                    log.info("acquired lease", extra=fields(lease=f"{self.namespace}/{self.name}",
                                                            identity=self.identity))
                    self._set_leader(True)
            elif self._leader:
                holder = self._seen.holder if self._seen is not None else ""
                if holder not in ("", self.identity):
                    log.error("lost lease: another replica holds it", extra=fields(
                        lease=f"{self.namespace}/{self.name}", identity=self.identity, holder=holder))
                    self._set_leader(False)
                elif self.fence is not None:
                    self.fence.check()  # keeps trying to renew; the manager resumes once it holds the lease again
                elif time.monotonic() - last_renew > self.renew_deadline:
                    log.error("lost lease: could not renew within the deadline",
                              extra=fields(lease=f"{self.namespace}/{self.name}", identity=self.identity))
                    self._set_leader(False)
            self._stop.wait(self.retry_period)

    def _set_leader(self, leader: bool) -> None:
        self._leader = leader
        self._gauge.set(1 if leader else 0)
        if leader:
            # Starting may wait for caches to sync; renewing the lease must not wait for it.
            threading.Thread(target=self._callback, args=(self.on_started,), name=f"leader-start-{self.name}",
                             daemon=True).start()
        else:
            self._callback(self.on_stopped)

    def _callback(self, func: Callable[[], None]) -> None:
        try:
            func()
        except Exception:
            log.exception("leadership callback failed", extra=fields(lease=self.name))

    def _try_acquire_or_renew(self) -> bool:
        now_wall, now = time.time(), time.monotonic()
        if self._held is not None:
            # client-go's fast path: the leader renews the lease it last wrote without reading it first (half
            # the requests at steady state); a conflict means someone else wrote, so read it and decide again.
            try:
                self._wrote(self.client.update(LEASES, self._desired(self._held, now_wall)), now)
                return True
            except errors.KubeError as err:
                self._held = None
                log.debug("renewing the held lease failed, reading it", extra=fields(lease=self.name,
                                                                                     error=str(err)))
        try:
            lease = self.client.get(LEASES, self.name, self.namespace)
        except errors.NotFound:
            lease = None
        except errors.KubeError as err:
            log.warning("reading lease failed", extra=fields(lease=self.name, error=str(err)))
            return False
        spec = (lease or {}).get("spec") or {}
        if lease is not None:
            holder, renew = spec.get("holderIdentity") or "", spec.get("renewTime") or ""
            if self._seen is None or (self._seen.holder, self._seen.renew_time) != (holder, renew):
                self._seen = Observation(holder, renew, now)
        if not may_acquire(spec if lease is not None else None, self.identity, self._seen, now, self.lease_duration):
            return False
        try:
            if lease is None:
                written = self.client.create(LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                                      **self._desired(None, now_wall)})
            else:
                written = self.client.update(LEASES, self._desired(lease, now_wall))
        except (errors.Conflict, errors.AlreadyExists):
            return False  # someone else wrote first; re-read next round
        except errors.KubeError as err:
            log.warning("writing lease failed", extra=fields(lease=self.name, error=str(err)))
            return False
        self._wrote(written, now)
        return True

    def _desired(self, lease: dict[str, Any] | None, now_wall: float) -> dict[str, Any]:
        """`lease` (None: a new one) held by this identity, renewed now, with this shard's labels and report."""
        spec = (lease or {}).get("spec") or {}
        new_spec = {"holderIdentity": self.identity,
                    "leaseDurationSeconds": max(1, math.ceil(self.lease_duration)),  # an integer in the API
                    "renewTime": micro_time(now_wall),
                    "acquireTime": spec.get("acquireTime") if spec.get("holderIdentity") == self.identity
                    else micro_time(now_wall),
                    "leaseTransitions": (spec.get("leaseTransitions") or 0)
                    + (0 if spec.get("holderIdentity") in (self.identity, None, "") else 1)}
        meta = dict((lease or {}).get("metadata") or {"name": self.name, "namespace": self.namespace})
        if self.labels:
            meta["labels"] = {**(meta.get("labels") or {}), **self.labels}
        if self.annotations is not None:
            try:
                meta["annotations"] = {**(meta.get("annotations") or {}), **self.annotations()}
            except Exception:  # a report that cannot be made must never cost the lease
                log.exception("lease annotations failed", extra=fields(lease=self.name))
        return dict(lease or {}, metadata=meta, spec=new_spec)

    def _wrote(self, lease: dict[str, Any], now: float) -> None:
        self._held = lease
        self._seen = Observation(self.identity, (lease.get("spec") or {}).get("renewTime") or "", now)

    def _release(self) -> None:
        """Give the lease up at once so a standby takes over without waiting a lease duration."""
        self._held = None
        try:
            lease = self.client.get(LEASES, self.name, self.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"] = dict(lease["spec"], holderIdentity=None, leaseDurationSeconds=1,
                                 renewTime=micro_time(time.time()))
            self.client.update(LEASES, lease)
            log.info("released lease", extra=fields(lease=f"{self.namespace}/{self.name}", identity=self.identity))
        except errors.KubeError as err:
            log.warning("releasing lease failed", extra=fields(lease=self.name, error=str(err)))
