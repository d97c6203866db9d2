"""Shard-assignment proofs (pure): signing and verifying, and the owning shard's verdict (what the shard then does
is tests/integration/test_assignment_proofs.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from velashard.apis import labels
from velashard.sharding.proof import (INVALID, MISSING, NO_KEY, PROVEN, UNPROVEN, Assignment, Signer, assignment_of,
                                      judge, load_public_pem, message, public_pem, rejection_reason, verify,
                                      with_proof)

SIGNER = Signer.generate()
OTHER = Signer.generate()
label_value = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)


def app(shard: str | None, proof: str | None = None, name: str = "web", namespace: str = "apps",
        uid: str = "u-1") -> dict:
    meta: dict = {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": "7", "labels": {}}
    if shard:
        meta["labels"][labels.SCHEDULED_SHARD_ID] = shard
    if proof is not None:
        meta["annotations"] = {labels.ASSIGNMENT_PROOF: proof}
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": meta}


@settings(max_examples=60, deadline=None)
@given(namespace=label_value, name=label_value, shard=label_value, other=label_value)
def test_a_proof_holds_for_its_namespace_name_and_shard_only(namespace, name, shard, other):
    proof = SIGNER.sign(namespace, name, shard)
    assert verify(SIGNER.public_key, namespace, name, shard, proof)
    assert SIGNER.sign(namespace, name, shard) == proof  # Ed25519 is deterministic: one assignment, one proof
    assert not verify(OTHER.public_key, namespace, name, shard, proof)
    if other != shard:
        assert not verify(SIGNER.public_key, namespace, name, other, proof)
    if other != name:
        assert not verify(SIGNER.public_key, namespace, other, shard, proof)
    if other != namespace:
        assert not verify(SIGNER.public_key, other, name, shard, proof)


def test_the_parts_cannot_be_shifted_into_one_another():
    assert message("ab", "c", "d") != message("a", "bc", "d")
    proof = SIGNER.sign("team", "a-web", "shard-1")
    assert not verify(SIGNER.public_key, "team-a", "web", "shard-1", proof)


@pytest.mark.parametrize("proof", ["", "forged", "!!!", "a" * 86, SIGNER.sign("apps", "web", "shard-1")[:-2],
                                   SIGNER.sign("apps", "web", "shard-1") + "AA"],
                         ids=["empty", "word", "not-base64", "unsigned", "truncated", "extended"])  # the key is random
def test_malformed_proofs_are_invalid_not_errors(proof):
    assert not verify(SIGNER.public_key, "apps", "web", "shard-1", proof)


def test_keys_round_trip_through_pem():
    again = Signer.from_pem(SIGNER.private_pem())
    assert again.sign("apps", "web", "s") == SIGNER.sign("apps", "web", "s")
    public = load_public_pem(public_pem(SIGNER.public_key))
    assert public is not None and verify(public, "apps", "web", "s", SIGNER.sign("apps", "web", "s"))
    assert load_public_pem("not a key") is None
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    other = ec.generate_private_key(ec.SECP256R1())
    with pytest.raises(ValueError, match="not an Ed25519 private key"):
        Signer.from_pem(other.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    assert load_public_pem(other.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()) is None


def test_the_verdict():
    good = assignment_of(app("shard-1", SIGNER.sign("apps", "web", "shard-1")))
    assert judge(good, SIGNER.public_key, None) == PROVEN
    assert judge(good, OTHER.public_key, None) == UNPROVEN
    assert judge(good, None, None) == NO_KEY  # nothing is run, nothing handed back, before the key is known
    assert judge(good, OTHER.public_key, good) == PROVEN  # proven before and unchanged: not verified again
    forged = assignment_of(app("master", "copied-from-elsewhere"))
    assert judge(forged, SIGNER.public_key, None) == UNPROVEN and rejection_reason(forged) == INVALID
    missing = assignment_of(app("master"))
    assert missing == Assignment("apps", "web", "u-1", "master", "")
    assert judge(missing, SIGNER.public_key, None) == UNPROVEN and rejection_reason(missing) == MISSING
    # A new proof, a new shard or a recreated app (new uid) is verified again.
    recreated = assignment_of(app("shard-1", SIGNER.sign("apps", "web", "shard-1"), uid="u-2"))
    assert judge(recreated, None, good) == NO_KEY
    assert assignment_of(app(None)) is None


def test_an_admins_tool_signs_the_shard_its_object_names():
    pinned = with_proof(app("master"), SIGNER)
    proof = pinned["metadata"]["annotations"][labels.ASSIGNMENT_PROOF]
    assert SIGNER.proves("apps", "web", "master", proof)
    assert with_proof(app(None), SIGNER) == app(None)
