"""Where the shard-assignment keys live and how each process gets its half: the private key in a Secret in the
controller's namespace (the master signs; shard admins' tools read it to sign their moves), the public key in
a ConfigMap beside it that every shard watches to check its apps' proofs (sharding/proof.py).

The master makes the key the first time it leads and publishes its public half; it never replaces a stored
key, since every proof made with it would turn invalid and every app would be re-placed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import os
import threading
from typing import Any, Callable, Protocol

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from velashard.kube import errors
from velashard.kube.apply import upsert
from velashard.kube.client import KubeClient
from velashard.kube.informer import EventHandler
from velashard.kube.manager import Manager
from velashard.kube.resources import CONFIGMAPS, SECRETS
from velashard.observability import fields
from velashard.sharding.proof import PROVEN, Assignment, Signer, assignment_of, judge, load_public_pem

log = logging.getLogger("velashard.sharding.keys")

SIGNING_KEY_SECRET = "velashard-shard-signing-key"
VERIFYING_KEY_CONFIGMAP = "velashard-shard-verifying-key"
PRIVATE_KEY_FIELD = "ed25519.pem"
PUBLIC_KEY_FIELD = "ed25519.pub"
_LABELS = {"app.kubernetes.io/name": "velashard", "app.kubernetes.io/component": "shard-assignment-key"}


class SigningKeyError(Exception):
    """The stored signing key cannot be read (not replaced: that would invalidate every proof)."""


def _signer_of(secret: dict[str, Any]) -> Signer:
    try:
        return Signer.from_pem(base64.b64decode((secret.get("data") or {})[PRIVATE_KEY_FIELD]))
    except (KeyError, ValueError, TypeError, binascii.Error) as err:
        raise SigningKeyError(f"Secret {secret['metadata'].get('namespace')}/{SIGNING_KEY_SECRET} does not hold an "
                              f"Ed25519 private key in {PRIVATE_KEY_FIELD}: {err}")


def load_signing_key(client: KubeClient, namespace: str) -> Signer:
    """The stored key (errors.NotFound until the master has made it): for tools that must never make one."""
    return _signer_of(client.get(SECRETS, SIGNING_KEY_SECRET, namespace))


def load_or_create_signing_key(client: KubeClient, namespace: str) -> Signer:
    """The stored key, or a new one stored now (whoever creates it first wins; the others read theirs)."""
    try:
        return _signer_of(client.get(SECRETS, SIGNING_KEY_SECRET, namespace))
    except errors.NotFound:
        pass
    signer = Signer.generate()
    body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": SIGNING_KEY_SECRET, "namespace": namespace, "labels": _LABELS},
            "data": {PRIVATE_KEY_FIELD: base64.b64encode(signer.private_pem()).decode()}}
    try:
        client.create(SECRETS, body)
    except errors.AlreadyExists:
        return _signer_of(client.get(SECRETS, SIGNING_KEY_SECRET, namespace))
    log.info("shard signing key created", extra=fields(key=f"{namespace}/{SIGNING_KEY_SECRET}"))
    return signer


def publish_verifying_key(client: KubeClient, namespace: str, signer: Signer) -> str:
    """Write the public half where shards read it; returns created, updated or unchanged."""
    return upsert(client, CONFIGMAPS, {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": VERIFYING_KEY_CONFIGMAP, "namespace": namespace, "labels": _LABELS},
        "data": {PUBLIC_KEY_FIELD: signer.public_pem()}})


class SigningKey:
    """The master's signing key, loaded (or made) and published once it leads, retried until that succeeds; on
    every replica (a standby too) read once the leader has stored it, since every replica's webhook signs with it."""

    def __init__(self, client: KubeClient, namespace: str):
        self.client, self.namespace = client, namespace
        self._signer: Signer | None = None
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._listeners: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    @property
    def signer(self) -> Signer | None:
        return self._signer

    def on_ready(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def wait(self, timeout: float) -> Signer | None:
        self._ready.wait(timeout)
        return self._signer

    def load(self) -> Signer:
        """One attempt: read or make the key, publish its public half."""
        signer = load_or_create_signing_key(self.client, self.namespace)
        result = publish_verifying_key(self.client, self.namespace, signer)
        log.info("shard verifying key " + result, extra=fields(key=f"{self.namespace}/{VERIFYING_KEY_CONFIGMAP}"))
        return self._loaded(signer)

    def _loaded(self, signer: Signer) -> Signer:
        with self._lock:
            if self._signer is not None:  # the stored key is never replaced: whoever read it first read the same
                return self._signer
            self._signer = signer
        self._ready.set()
        for listener in self._listeners:
            listener()
        return signer

    def follow(self) -> None:
        """Read the stored key, without making it (only the leader does, so that no standby's write bypasses its
        fence), until there is one."""
        threading.Thread(target=self._follow, name="signing-key-follow", daemon=True).start()

    def _follow(self) -> None:
        delay = 0.5
        while not self._stop.is_set() and not self._ready.is_set():
            try:
                self._loaded(_signer_of(self.client.get(SECRETS, SIGNING_KEY_SECRET, self.namespace)))
                return
            except errors.NotFound:
                pass  # the leader has not made it yet
            except (errors.KubeError, SigningKeyError) as err:
                log.error("cannot read the shard signing key; this replica's webhook waits for it", extra=fields(
                    key=f"{self.namespace}/{SIGNING_KEY_SECRET}", error=str(err), retry_in=delay))
            self._stop.wait(delay)
            delay = min(delay * 2, 5.0)

    def start(self) -> None:
        threading.Thread(target=self._run, name="signing-key", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        delay = 0.5
        while not self._stop.is_set():
            try:
                self.load()
                return
            except (errors.KubeError, SigningKeyError) as err:
                log.error("cannot load the shard signing key; nothing is scheduled until it loads", extra=fields(
                    key=f"{self.namespace}/{SIGNING_KEY_SECRET}", error=str(err), retry_in=delay))
                self._stop.wait(delay)
                delay = min(delay * 2, 30.0)


class Verdicts(Protocol):
    """Where proven assignments are kept, per owner (core/slotcache.py's SlotCache, which a snapshot keeps)."""

    def get(self, owner: str, slot: bytes, inputs: bytes) -> Any | None: ...

    def put(self, owner: str, slot: bytes, inputs: bytes, value: Any) -> None: ...

    def forget(self, owner: str) -> None: ...


def _digest(*parts: str) -> bytes:
    return hashlib.blake2b("\x00".join(parts).encode(), digest_size=16).digest()


_SLOT = _digest("assignment-proof")
# This process's mark on its verdicts: its own hold across a change of the key (as they did before it), those a
# restarted process's snapshot brings only for the key they were verified with.
_BOOT = os.urandom(8)


class AssignmentCheck:
    """The owning shard's check of its apps' proofs, with the public key from the ConfigMap the master publishes
    (a watch of that one object). Verdicts are kept per app key in `verdicts` (kept across restarts with
    --cache-dir), so neither re-syncs nor a restart verify again (a signature check is some 150 µs)."""

    def __init__(self, manager: Manager, namespace: str, verdicts: Verdicts, kind: str = ""):
        self.kind = kind  # of the objects checked ("": Applications; "WorkflowRun")
        self.informer = manager.informer(CONFIGMAPS, namespace,
                                         field_selector=f"metadata.name={VERIFYING_KEY_CONFIGMAP}")
        # A deleted ConfigMap keeps the key we have: apps keep running until the master publishes it again.
        self.informer.add_handler(EventHandler(self._seen, lambda _old, new: self._seen(new), None))
        self._key: Ed25519PublicKey | None = None
        self._pem = ""
        self._key_digest = b""
        self._verdicts = verdicts
        self._listeners: list[Callable[[], None]] = []

    def on_first_key(self, listener: Callable[[], None]) -> None:
        """Told once a key is known, so that apps that waited for it are looked at again."""
        self._listeners.append(listener)

    def _seen(self, configmap: dict[str, Any]) -> None:
        pem = (configmap.get("data") or {}).get(PUBLIC_KEY_FIELD) or ""
        if pem == self._pem:
            return
        key = load_public_pem(pem)
        if key is None:
            log.error("the shard verifying key is not an Ed25519 public key; keeping the one we have",
                      extra=fields(key=f"{configmap['metadata'].get('namespace')}/{VERIFYING_KEY_CONFIGMAP}"))
            return
        first = self._key is None
        self._key, self._pem, self._key_digest = key, pem, _digest(pem)
        if first:
            log.info("shard verifying key loaded")
            for listener in self._listeners:
                listener()
        else:
            # Proven apps stay proven (their verdicts are cached); only apps not yet checked meet the new key.
            log.warning("shard verifying key changed")

    def _owner(self, key: str) -> str:
        return f"{self.kind}:{key}" if self.kind else key

    def verdict(self, key: str, app: dict[str, Any]) -> tuple[str, Assignment]:
        """(proof.PROVEN | UNPROVEN | NO_KEY, the assignment) for a scheduled app of this shard."""
        assignment = assignment_of(app, self.kind)
        assert assignment is not None, "the shard's cache holds only apps labelled for it"
        owner = self._owner(key)
        inputs = _digest(assignment.namespace, assignment.name, assignment.uid, assignment.shard, assignment.proof)
        kept = self._verdicts.get(owner, _SLOT, inputs)
        before = assignment if kept is not None and (kept[:8] == _BOOT or kept[8:] == self._key_digest) else None
        verdict = judge(assignment, self._key, before)
        if verdict == PROVEN and before is None:
            self._verdicts.put(owner, _SLOT, inputs, _BOOT + self._key_digest)
        return verdict, assignment

    def forget(self, key: str) -> None:
        self._verdicts.forget(self._owner(key))
