"""What proves a shard assignment: an Ed25519 signature over (namespace, name, shard) made with the master's
key, and the owning shard's verdict on an app's proof, as pure functions.

Only the scheduler's paths sign (the mutating webhook, the background scheduler, and shard admins'
`velashard reschedule` / `velashard addon enable`), so a shard label a tenant wrote while the webhook was
down has no valid proof, whatever annotations the tenant copied. A proof binds the namespace, the name and
the shard (not the uid, which a create's admission does not know yet): replayed, it can only put an app of
that very name back on a shard the scheduler once chose for it.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any, Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from velashard.apis import labels

PROVEN, UNPROVEN, NO_KEY = "proven", "unproven", "no-key"
MISSING, INVALID = "missing", "invalid"  # why a proof is not valid: the metric's reason

_CONTEXT = b"velashard shard assignment v1"


def message(namespace: str, name: str, shard: str) -> bytes:
    """What is signed. NUL separates the parts: no namespace, name or label value can contain it."""
    return b"\0".join((_CONTEXT, namespace.encode(), name.encode(), shard.encode()))


def subject(kind: str, name: str) -> str:
    """What a proof names of an object: an Application its name; anything else the scheduler places (a WorkflowRun)
    `kind/name`, which no object's name can be, so that a proof of one kind's assignment proves no other's."""
    return name if kind in ("", "Application") else f"{kind}/{name}"


def _encode(signature: bytes) -> str:
    return base64.urlsafe_b64encode(signature).rstrip(b"=").decode()


def _decode(proof: str) -> bytes | None:
    try:
        return base64.urlsafe_b64decode(proof + "=" * (-len(proof) % 4))
    except (binascii.Error, ValueError):
        return None


def verify(key: Ed25519PublicKey, namespace: str, name: str, shard: str, proof: str) -> bool:
    signature = _decode(proof)
    if signature is None or len(signature) != 64:
        return False
    try:
        key.verify(signature, message(namespace, name, shard))
        return True
    except InvalidSignature:
        return False


class Signer:
    """The master's private key: signs assignments (Ed25519 is deterministic: one assignment, one proof)."""

    def __init__(self, key: Ed25519PrivateKey):
        self._key = key
        self.public_key = key.public_key()

    def sign(self, namespace: str, name: str, shard: str) -> str:
        return _encode(self._key.sign(message(namespace, name, shard)))

    def proves(self, namespace: str, name: str, shard: str, proof: str) -> bool:
        return verify(self.public_key, namespace, name, shard, proof)

    def private_pem(self) -> bytes:
        return self._key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption())

    def public_pem(self) -> str:
        return public_pem(self.public_key)

    @classmethod
    def generate(cls) -> "Signer":
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_pem(cls, pem: bytes) -> "Signer":
        key = serialization.load_pem_private_key(pem, password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError("the shard signing key is not an Ed25519 private key")
        return cls(key)


def public_pem(key: Ed25519PublicKey) -> str:
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def load_public_pem(pem: str) -> Ed25519PublicKey | None:
    """The public key in `pem`, or None when it is not an Ed25519 public key."""
    try:
        key = serialization.load_pem_public_key(pem.encode())
    except ValueError:
        return None
    return key if isinstance(key, Ed25519PublicKey) else None


@dataclass(frozen=True)
class Assignment:
    """An app's shard assignment as the owning shard sees it."""

    namespace: str
    name: str
    uid: str
    shard: str
    proof: str  # "" when the annotation is missing


def assignment_of(app: Mapping[str, Any], kind: str = "") -> Assignment | None:
    """The app's assignment (of a WorkflowRun with kind "WorkflowRun"), or None when it has no shard label."""
    meta = app.get("metadata") or {}
    shard = (meta.get("labels") or {}).get(labels.SCHEDULED_SHARD_ID)
    if not shard:
        return None
    return Assignment(meta.get("namespace") or "", subject(kind, meta.get("name") or ""), meta.get("uid") or "",
                      shard, (meta.get("annotations") or {}).get(labels.ASSIGNMENT_PROOF) or "")


def with_proof(app: dict[str, Any], signer: Signer) -> dict[str, Any]:
    """`app` with a proof for the shard its label names (what an admin's tool writes when it sets the label)."""
    meta = app["metadata"]
    shard = (meta.get("labels") or {}).get(labels.SCHEDULED_SHARD_ID)
    if not shard:
        return app
    proof = signer.sign(meta.get("namespace") or "", subject(str(app.get("kind") or ""), meta["name"]), shard)
    return {**app, "metadata": {**meta, "annotations": {**(meta.get("annotations") or {}),
                                                        labels.ASSIGNMENT_PROOF: proof}}}


def judge(assignment: Assignment, key: Ed25519PublicKey | None, proven_before: Assignment | None) -> str:
    """The owning shard's verdict: PROVEN (run it), UNPROVEN (hand it back to the scheduler) or NO_KEY (wait for
    the master's public key). An assignment proven before, unchanged (same uid, shard and proof), is not
    verified again."""
    if assignment == proven_before:
        return PROVEN
    if key is None:
        return NO_KEY
    return PROVEN if assignment.proof and verify(key, assignment.namespace, assignment.name, assignment.shard,
                                                 assignment.proof) else UNPROVEN


def rejection_reason(assignment: Assignment) -> str:
    return MISSING if not assignment.proof else INVALID
