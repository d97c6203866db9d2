"""Where a master replica's webhook certificate comes from; every replica serves the same one.

- `MountedCertificates` (`--webhook-cert-dir`, the cert-manager way): ca.crt, tls.crt and tls.key as someone else
  keeps them (a Secret volume); the webhook server reads tls.crt and tls.key themselves, so a rotation is served
  from the next connection on (webhook/tls.py), and a new ca.crt is registered again by the leader.
- `SharedCertificates` (made by the master): a CA and a serving pair in one Secret in the controller's namespace,
  `<webhook service>-certs`. The leader makes it the first time and renews the serving pair with the same CA
  30 days before it expires (caBundle stays valid); every replica reads it and writes its files atomically, so
  that the API server, which trusts one caBundle, can call any replica. A standby never writes it: its writes
  would bypass its fence.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import ipaddress
import logging
import os
import threading
from typing import Any, Callable

from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.resources import SECRETS
from velashard.observability import fields
from velashard.webhook.certificates import KeyPair, make_ca, make_serving_cert
from velashard.webhook.tls import file_signature, write_atomically

log = logging.getLogger("velashard.webhook.certstore")

RENEW_BEFORE = datetime.timedelta(days=30)
CA_FIELD, CA_KEY_FIELD, CERT_FIELD, KEY_FIELD = "ca.crt", "ca.key", "tls.crt", "tls.key"
_LABELS = {"app.kubernetes.io/name": "velashard", "app.kubernetes.io/component": "webhook-certificates"}


def secret_name(service_name: str) -> str:
    return f"{service_name}-certs"


def needs_renewal(pair: KeyPair, now: datetime.datetime, margin: datetime.timedelta = RENEW_BEFORE) -> bool:
    return pair.not_after - now <= margin


def _normal(host: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


def covers(pair: KeyPair, hosts: list[str]) -> bool:
    """Whether the certificate is for every one of `hosts`."""
    return {_normal(h) for h in hosts} <= {_normal(h) for h in pair.hosts}


def bundle(current: bytes | None, previous: bytes | None) -> bytes | None:
    """A caBundle of the current CA and the one it replaced, if any."""
    if current is None or previous is None or previous == current:
        return current
    return current.rstrip(b"\n") + b"\n" + previous


def _pairs_of(secret: dict[str, Any]) -> tuple[KeyPair, KeyPair] | None:
    """(CA, serving pair) stored in the Secret, or None when it does not hold both whole."""
    data = secret.get("data") or {}
    try:
        ca = KeyPair(base64.b64decode(data[CA_FIELD]), base64.b64decode(data[CA_KEY_FIELD]))
        serving = KeyPair(base64.b64decode(data[CERT_FIELD]), base64.b64decode(data[KEY_FIELD]))
        _ = ca.not_after, serving.not_after  # both parse as certificates
    except (KeyError, TypeError, ValueError, binascii.Error):
        return None
    return ca, serving


class MountedCertificates:
    """Certificates in a directory kept by someone else; the leader registers ca.crt again when it changes."""

    def __init__(self, directory: str, recheck: float = 10.0):
        self.cert_path = os.path.join(directory, CERT_FIELD)
        self.key_path = os.path.join(directory, KEY_FIELD)
        self.ca_path = os.path.join(directory, CA_FIELD)
        self._recheck = recheck
        self._stop = threading.Event()
        self._listeners: list[Callable[[], None]] = []
        self._current: bytes | None = None
        self._previous: bytes | None = None

    def ready(self) -> bool:
        return all(os.path.exists(p) for p in (self.cert_path, self.key_path, self.ca_path))

    def ca_pem(self) -> bytes | None:
        """ca.crt, with the CA it replaced last: certificates of either verify while a rotation rolls out."""
        try:
            with open(self.ca_path, "rb") as fh:
                current = fh.read()
        except OSError:
            return None
        if current != self._current:
            self._previous, self._current = self._current, current
        return bundle(self._current, self._previous)

    def on_ca_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def follow(self) -> None:
        threading.Thread(target=self._follow, name="webhook-cert-files", daemon=True).start()

    def _follow(self) -> None:
        seen = file_signature(self.ca_path)
        while not self._stop.wait(self._recheck):
            now = file_signature(self.ca_path)
            if now != seen:
                seen = now
                self.ca_pem()
                log.info("webhook CA file changed", extra=fields(path=self.ca_path))
                for listener in self._listeners:
                    listener()

    def lead(self) -> None:
        """Nothing to make: the files are someone else's."""

    def stop(self) -> None:
        self._stop.set()


class SharedCertificates:
    """The CA and serving pair in a Secret: made and renewed by the leader, followed by every replica."""

    def __init__(self, client: KubeClient, namespace: str, name: str, hosts: list[str], directory: str,
                 recheck: float = 300.0, renew_check: float = 3600.0, renew_before: datetime.timedelta = RENEW_BEFORE):
        self.client, self.namespace, self.name, self.hosts = client, namespace, name, hosts
        self.cert_path = os.path.join(directory, CERT_FIELD)
        self.key_path = os.path.join(directory, KEY_FIELD)
        self._recheck, self._renew_check, self._renew_before = recheck, renew_check, renew_before
        self._ca: bytes | None = None
        self._previous_ca: bytes | None = None
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._listeners: list[Callable[[], None]] = []

    def ready(self) -> bool:
        return self._ready.is_set()

    def ca_pem(self) -> bytes | None:
        """The CA, with the one it replaced last (see MountedCertificates.ca_pem)."""
        return bundle(self._ca, self._previous_ca)

    def on_ca_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    # --- every replica ---------------------------------------------------------------------------------

    def follow(self) -> None:
        threading.Thread(target=self._follow, name="webhook-cert-follow", daemon=True).start()

    def _follow(self) -> None:
        delay = 0.5
        while not self._stop.is_set():
            try:
                pairs = _pairs_of(self.client.get(SECRETS, self.name, self.namespace))
                if pairs is None:
                    log.error("the webhook certificate Secret does not hold ca.crt, ca.key, tls.crt and tls.key; the "
                              "leader replaces it", extra=fields(secret=f"{self.namespace}/{self.name}"))
                else:
                    self.serve(*pairs)
            except errors.NotFound:
                pass  # the leader has not made it yet
            except errors.KubeError as err:
                log.error("cannot read the webhook certificate Secret", extra=fields(
                    secret=f"{self.namespace}/{self.name}", error=str(err), retry_in=delay))
            if self._ready.is_set():
                delay = 0.5
                self._wake.wait(self._recheck)  # a renewal by another replica is seen within `recheck`
                self._wake.clear()
            else:
                self._stop.wait(delay)
                delay = min(delay * 2, 5.0)

    def serve(self, ca: KeyPair, serving: KeyPair) -> None:
        """Write the pair into this replica's files (each replaced in one step: a connection meanwhile is served
        with the old pair, see webhook/tls.py) and keep the CA for registering."""
        changed = write_atomically(self.key_path, serving.key_pem)
        changed = write_atomically(self.cert_path, serving.cert_pem, 0o644) or changed
        if changed:
            log.info("webhook serving certificate written", extra=fields(not_after=serving.not_after.isoformat()))
        ca_changed = self._ca is not None and self._ca != ca.cert_pem
        if ca_changed:
            self._previous_ca = self._ca
        self._ca = ca.cert_pem
        self._ready.set()
        if ca_changed:
            for listener in self._listeners:
                listener()

    # --- the leader ------------------------------------------------------------------------------------

    def lead(self) -> None:
        threading.Thread(target=self._lead, name="webhook-cert-renewal", daemon=True).start()

    def _lead(self) -> None:
        delay = 0.5
        while not self._stop.is_set():
            try:
                self.ensure(datetime.datetime.now(datetime.timezone.utc))
                delay = 0.5
                wait = self._renew_check
            except errors.KubeError as err:  # a conflict with another writer among them: read again soon
                log.error("cannot make or renew the webhook certificate", extra=fields(
                    secret=f"{self.namespace}/{self.name}", error=str(err), retry_in=delay))
                wait, delay = delay, min(delay * 2, 30.0)
            self._stop.wait(wait)

    def ensure(self, now: datetime.datetime) -> str:
        """Make the Secret if there is none, renew its serving pair if due or not for this webhook's hosts (its
        CA too when that is due); returns what it did: created, renewed or unchanged."""
        try:
            secret: dict[str, Any] | None = self.client.get(SECRETS, self.name, self.namespace)
        except errors.NotFound:
            secret = None
        pairs = _pairs_of(secret) if secret is not None else None
        if pairs is not None and not needs_renewal(pairs[0], now, self._renew_before) and \
                not needs_renewal(pairs[1], now, self._renew_before) and covers(pairs[1], self.hosts):
            return "unchanged"
        ca = pairs[0] if pairs is not None and not needs_renewal(pairs[0], now, self._renew_before) else make_ca()
        serving = make_serving_cert(ca, self.hosts)
        data = {CA_FIELD: ca.cert_pem, CA_KEY_FIELD: ca.key_pem, CERT_FIELD: serving.cert_pem, KEY_FIELD: serving.key_pem}
        body = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": self.name, "namespace": self.namespace, "labels": _LABELS},
                "data": {k: base64.b64encode(v).decode() for k, v in data.items()}}
        if secret is None:
            try:
                self.client.create(SECRETS, body)
            except errors.AlreadyExists:
                return "unchanged"  # another replica made it first: read on the next look
            what = "created"
        else:
            body["metadata"]["resourceVersion"] = secret["metadata"]["resourceVersion"]
            self.client.update(SECRETS, body)  # a Conflict: someone else wrote it meanwhile; looked at again
            what = "renewed"
        log.info(f"webhook certificate {what}", extra=fields(secret=f"{self.namespace}/{self.name}",
                                                            not_after=serving.not_after.isoformat()))
        self._wake.set()  # this replica's files follow at once
        return what

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
