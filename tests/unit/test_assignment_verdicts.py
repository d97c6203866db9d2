"""The owning shard's verdicts on its apps' assignment proofs are kept (sharding/keys.py): re-syncs do not verify a
signature again, nor does a restarted process whose snapshot (core/cachesnapshot.py) brings them, as long as the
master's key is the one they were verified with."""

from __future__ import annotations

from typing import Any

import pytest

from velashard.apis import labels
from velashard.core import cachesnapshot
from velashard.core.slotcache import SlotCache
from velashard.sharding import keys, proof
from velashard.sharding.keys import PUBLIC_KEY_FIELD, AssignmentCheck
from velashard.sharding.proof import PROVEN, UNPROVEN, Signer


class _Informer:
    def add_handler(self, _handler: Any) -> None:
        pass


class _Manager:
    def informer(self, *_args: Any, **_kwargs: Any) -> _Informer:
        return _Informer()


def app(name: str, signer: Signer) -> dict:
    return {"metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}",
                         "labels": {labels.SCHEDULED_SHARD_ID: "s1"},
                         "annotations": {labels.ASSIGNMENT_PROOF: signer.sign("team", name, "s1")}}}


def check_with(verdicts: SlotCache, signer: Signer) -> AssignmentCheck:
    check = AssignmentCheck(_Manager(), "vela-system", verdicts)
    check._seen({"metadata": {"namespace": "vela-system"}, "data": {PUBLIC_KEY_FIELD: signer.public_pem()}})
    return check


@pytest.fixture
def verified(monkeypatch) -> list[str]:
    """The names whose signature was checked."""
    checked: list[str] = []
    real = proof.verify

    def counting(key: Any, namespace: str, name: str, shard: str, signature: str) -> bool:
        checked.append(name)
        return real(key, namespace, name, shard, signature)
    monkeypatch.setattr(proof, "verify", counting)
    return checked


def restarted(verdicts: SlotCache, tmp_path, monkeypatch) -> SlotCache:
    """The verdicts as a restarted process finds them: written to a snapshot, read back into a new cache, under
    another process's mark."""
    path, fingerprint = str(tmp_path / "shard.cache"), b"\x01" * 32
    cachesnapshot.write(path, {"proven": cachesnapshot.Kept(verdicts)}, fingerprint)
    fresh = SlotCache()
    assert cachesnapshot.read(path, {"proven": cachesnapshot.Kept(fresh)}, fingerprint) == 1
    monkeypatch.setattr(keys, "_BOOT", b"\x02" * 8)
    return fresh


def test_a_proven_assignment_is_verified_once(verified):
    signer = Signer.generate()
    check = check_with(SlotCache(), signer)
    assert [check.verdict("team/web", app("web", signer))[0] for _ in range(3)] == [PROVEN] * 3
    assert verified == ["web"]
    # a new proof (the app was moved and back) is verified anew
    moved = app("web", signer)
    moved["metadata"]["uid"] = "uid-recreated"
    assert check.verdict("team/web", moved)[0] == PROVEN and verified == ["web", "web"]


def test_a_restarted_shard_takes_its_snapshots_verdicts_for_the_same_key(verified, tmp_path, monkeypatch):
    signer = Signer.generate()
    before = SlotCache()
    check_with(before, signer).verdict("team/web", app("web", signer))
    check = check_with(restarted(before, tmp_path, monkeypatch), signer)
    assert check.verdict("team/web", app("web", signer))[0] == PROVEN
    assert verified == ["web"]  # not verified again


def test_a_snapshots_verdicts_do_not_hold_once_the_key_changed(verified, tmp_path, monkeypatch):
    old, new = Signer.generate(), Signer.generate()
    before = SlotCache()
    check_with(before, old).verdict("team/web", app("web", old))
    check = check_with(restarted(before, tmp_path, monkeypatch), new)
    assert check.verdict("team/web", app("web", old))[0] == UNPROVEN  # verified with the key it has now
    assert verified == ["web", "web"]


def test_a_running_shard_keeps_its_verdicts_across_a_key_change(verified):
    old, new = Signer.generate(), Signer.generate()
    check = check_with(SlotCache(), old)
    check.verdict("team/web", app("web", old))
    check._seen({"metadata": {"namespace": "vela-system"}, "data": {PUBLIC_KEY_FIELD: new.public_pem()}})
    assert check.verdict("team/web", app("web", old))[0] == PROVEN and verified == ["web"]
    check.forget("team/web")  # the app left: back, it meets the key of the day
    assert check.verdict("team/web", app("web", old))[0] == UNPROVEN
