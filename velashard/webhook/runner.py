"""The master's side of the webhooks: webhook configurations, and the server process on every replica."""

from __future__ import annotations

import base64
import ipaddress
import json
import logging
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlsplit

from velashard.apis import labels
from velashard.core.authors import AuthConfig
from velashard.kube import errors
from velashard.kube.apply import upsert
from velashard.kube.client import KubeClient
from velashard.kube.resources import (ADMISSION_POLICIES, ADMISSION_POLICY_BINDINGS, MUTATING_WEBHOOKS,
                                      VALIDATING_WEBHOOKS)
from velashard.observability import fields
from velashard.sharding import guard as shard_guard
from velashard.sharding.keys import SigningKey
from velashard.webhook import author_guard
from velashard.webhook.certstore import MountedCertificates, SharedCertificates, secret_name
from velashard.webhook.tls import write_atomically
from velashard.webhook.paths import DEFINITIONS_PATH, MUTATING_PATH, VALIDATING_PATH

log = logging.getLogger("velashard.webhook.runner")


def default_bind_address(environ: Mapping[str, str]) -> str:
    """Every interface inside a pod (the webhook Service routes to the pod's IP), else loopback: a master run
    as a local process (`velashard dev`, tests) is reached by an API server on the same machine."""
    return "0.0.0.0" if environ.get("KUBERNETES_SERVICE_HOST") else "127.0.0.1"


def host_port(host: str, port: int) -> str:
    """HOST:PORT, with an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass
class WebhookOptions:
    port: int = 9443
    bind_address: str = "127.0.0.1"
    namespace: str = "vela-system"
    service_name: str = "velashard-webhook"
    mutating_name: str = "velashard-mutating"
    validating_name: str = "velashard-validating"
    url: str | None = None  # out of cluster: create configurations pointing here
    cert_dir: str | None = None
    validating_failure_policy: str = "Fail"
    schedulable_shards: str = ""
    strategy: str = "round-robin"
    # Out of cluster (url set) the master also installs the shard-label guard with these privileged users
    # and groups; in a cluster the chart or `velashard install` ships it.
    privileged_users: tuple[str, ...] = ()
    privileged_groups: tuple[str, ...] = ()
    auto_schedule: bool = True
    validate_components: bool = False
    kubeconfig: str | None = None
    log_format: str = "text"
    sharding: bool = True  # schedule apps (the master of a sharded controller); else only record authors
    auth: AuthConfig | None = None  # record apps' authors (AuthenticateApplication), and how


def serving_hosts(opts: WebhookOptions) -> list[str]:
    hosts = ["127.0.0.1", "localhost", f"{opts.service_name}.{opts.namespace}.svc",
             f"{opts.service_name}.{opts.namespace}.svc.cluster.local"]
    if opts.url:
        host = urlsplit(opts.url).hostname
        if host and host not in hosts:
            hosts.insert(0, host)
    return hosts


DEFINITION_PLURALS = ("componentdefinitions", "traitdefinitions", "policydefinitions", "workflowstepdefinitions")


def _author_annotation(obj: str, key: str) -> str:
    return f"has({obj}.metadata.annotations) && {json.dumps(key)} in {obj}.metadata.annotations ? " \
           f"{obj}.metadata.annotations[{json.dumps(key)}] : ''"


# An update reaches the author webhook only when it can change who the app acts as (the chart's webhooks.yaml
# writes the same expression).
AUTHOR_MATCH_CONDITIONS = [{
    "name": "spec-or-author-changed",
    "expression": " || ".join(["object.spec != oldObject.spec"] + [
        f"({_author_annotation('object', key)}) != ({_author_annotation('oldObject', key)})"
        for key in (labels.APP_USERNAME, labels.APP_GROUP)]),
}]


def configurations(opts: WebhookOptions, ca_bundle: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """(mutating, validating): the validating webhooks check definitions, and components with
    ValidateComponentWhenSharding; the shard-label guard is a ValidatingAdmissionPolicy."""
    bundle = base64.b64encode(ca_bundle).decode()

    def client_config(path: str) -> dict[str, Any]:
        if opts.url:
            return {"url": opts.url.rstrip("/") + path, "caBundle": bundle}
        return {"service": {"namespace": opts.namespace, "name": opts.service_name, "path": path,
                            "port": 443}, "caBundle": bundle}

    def rules(*operations: str, resources: tuple[str, ...] = ("applications",), runs: bool = False
              ) -> list[dict[str, Any]]:
        found = [{"operations": list(operations), "apiGroups": ["core.oam.dev"], "apiVersions": ["v1beta1"],
                  "resources": list(resources), "scope": "Namespaced"}]
        if runs:  # WorkflowRuns are authored and placed as applications are
            found.append({**found[0], "apiVersions": ["v1alpha1"], "resources": ["workflowruns"]})
        return found

    def hook(name: str, path: str, operations: tuple[str, ...], failure_policy: str,
             resources: tuple[str, ...] = ("applications",), runs: bool = False, **extra: Any) -> dict[str, Any]:
        return {"name": name, "clientConfig": client_config(path),
                "rules": rules(*operations, resources=resources, runs=runs),
                "admissionReviewVersions": ["v1"], "sideEffects": "None", "timeoutSeconds": 5,
                "failurePolicy": failure_policy, **extra}

    # Every create reaches the mutating webhook (it records the author, schedules, and strips a user's copy of
    # the webhook's annotation); updates when the old or new app has no shard label, and when they change the
    # spec or the author annotations (to record the author). Ignore: with the master down, writes succeed, the
    # background scheduler schedules what was missed and the author guard keeps recorded authors true.
    hooks = [hook("mutating-create.core.oam.dev.v1beta1.applications", MUTATING_PATH, ("CREATE",), "Ignore",
                  runs=True, reinvocationPolicy="Never")]
    if opts.sharding:
        hooks.append(hook("mutating.core.oam.dev.v1beta1.applications", MUTATING_PATH, ("UPDATE",), "Ignore",
                          runs=True, reinvocationPolicy="Never",
                          objectSelector={"matchExpressions": [{"key": labels.SCHEDULED_SHARD_ID,
                                                                "operator": "DoesNotExist"}]}))
    if opts.auth is not None and opts.auth.enabled:
        hooks.append(hook("mutating-author.core.oam.dev.v1beta1.applications", MUTATING_PATH, ("UPDATE",),
                          "Ignore", runs=True, reinvocationPolicy="Never", matchConditions=AUTHOR_MATCH_CONDITIONS))
    mutating = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": opts.mutating_name}, "webhooks": hooks}
    # Definitions whose CUE does not compile are refused; Ignore: with the master down they are stored and
    # their status says what is wrong (velashard.core.defstatus).
    hooks = [hook("validating.core.oam.dev.v1beta1.definitions", DEFINITIONS_PATH, ("CREATE", "UPDATE"), "Ignore",
                  resources=DEFINITION_PLURALS)]
    if opts.validate_components:
        hooks.insert(0, hook("validating.core.oam.dev.v1beta1.applications", VALIDATING_PATH, ("CREATE", "UPDATE"),
                             opts.validating_failure_policy))
    validating = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                  "metadata": {"name": opts.validating_name}, "webhooks": hooks}
    return mutating, validating


def register(client: KubeClient, opts: WebhookOptions, ca_bundle: bytes) -> None:
    """With --webhook-url, create or update the configurations and the shard-label guard; else put the CA
    into the existing configurations."""
    mutating, validating = configurations(opts, ca_bundle)
    if opts.url:
        guards = []
        if opts.sharding:
            guards.append(("shard-label guard", shard_guard.guard_objects(opts.privileged_users,
                                                                          opts.privileged_groups)))
        if opts.auth is not None and opts.auth.enabled:
            guards.append(("author guard", author_guard.guard_objects(opts.auth, opts.privileged_users,
                                                                      opts.privileged_groups)))
        for what, (policy, binding) in guards:
            for res, body in ((ADMISSION_POLICIES, policy), (ADMISSION_POLICY_BINDINGS, binding)):
                log.info(what + " " + upsert(client, res, body), extra=fields(name=body["metadata"]["name"]))
    for res, body in ((MUTATING_WEBHOOKS, mutating), (VALIDATING_WEBHOOKS, validating)):
        if opts.url:
            log.info("webhook configuration " + upsert(client, res, body), extra=fields(name=body["metadata"]["name"]))
            continue
        try:
            current = client.get(res, body["metadata"]["name"])
        except errors.NotFound:
            log.warning("webhook configuration not found; nothing to patch", extra=fields(
                name=body["metadata"]["name"]))
            continue
        bundle = base64.b64encode(ca_bundle).decode()
        hooks = current.get("webhooks") or []
        if all((hook.get("clientConfig") or {}).get("caBundle") == bundle for hook in hooks):
            continue  # a restarted or second replica serves the same CA: nothing to write
        for hook in hooks:
            hook.setdefault("clientConfig", {})["caBundle"] = bundle
        client.update(res, current)


# A replica that stops keeps serving admission this long after it said it is not ready, so that calls the API
# server sent before the Service dropped it are answered (only where a Service routes to it, not with --webhook-url).
DRAIN_SECONDS = 2.0
HEALTHY_RUN = 60.0  # seconds: a server that ran this long and then died restarts at once, not after a long backoff
PROBE_PERIOD = 5.0


class WebhookRunner:
    """Runs the webhook server process on this replica, leader or standby (every master replica answers
    admission, as controller-runtime's webhook server does), restarting it if it dies; while this replica leads,
    also registers the webhooks and keeps self-made certificates renewed (`lead`)."""

    def __init__(self, client: KubeClient, opts: WebhookOptions, keys: SigningKey | None):
        self.client = client
        self.opts = opts
        self.keys = keys  # sharded: the webhook proves the shards it assigns with the master's key
        self._dir = tempfile.mkdtemp(prefix="velashard-webhook-")
        self.certs: MountedCertificates | SharedCertificates = (
            MountedCertificates(opts.cert_dir) if opts.cert_dir else
            SharedCertificates(client, opts.namespace, secret_name(opts.service_name), serving_hosts(opts), self._dir))
        self._drain = 0.0 if opts.url else DRAIN_SECONDS  # a URL is this replica's alone: nothing routes elsewhere
        self._proc: subprocess.Popen | None = None
        self._serving = False
        self._stop = threading.Event()
        self._register = threading.Event()  # set when the webhooks must be registered (again)
        self.certs.on_ca_change(self._register.set)

    def readiness(self) -> list[str]:
        """Why this replica's webhook does not answer yet (a replica that cannot admit is not ready)."""
        if not self.certs.ready():
            where = self.opts.cert_dir or f"Secret {self.opts.namespace}/{secret_name(self.opts.service_name)}"
            return [f"webhook: no serving certificate yet in {where}"]
        if self.keys is not None and self.keys.signer is None:
            return ["webhook: waiting for the shard signing key (the leader makes it)"]
        return [] if self._serving else ["webhook: the server does not answer yet"]

    def start(self) -> None:
        """On every replica: follow the certificates and the signing key, then serve."""
        self._args = [sys.executable, "-m", "velashard.webhook.server", "--bind",
                      host_port(self.opts.bind_address, self.opts.port),
                      "--certfile", self.certs.cert_path, "--keyfile", self.certs.key_path,
                      "--namespace", self.opts.namespace,
                      "--schedulable-shards", self.opts.schedulable_shards, "--shard-scheduler", self.opts.strategy,
                      "--log-format", self.opts.log_format, "--parent-pid", str(os.getpid())]
        if self.keys is not None:
            self._args += ["--signing-key-file", self._signing_key_path()]
            self.keys.follow()
        auth = self.opts.auth
        if auth is not None and auth.enabled:
            self._args += ["--authenticate-applications", f"--authentication-with-user={str(auth.with_user).lower()}",
                           "--authentication-group-pattern", auth.group_pattern,
                           "--controller-users", ",".join(self.opts.privileged_users[:1])]
        if self.opts.kubeconfig:
            self._args += ["--kubeconfig", self.opts.kubeconfig]
        if not self.opts.auto_schedule:
            self._args.append("--disable-auto-schedule")
        if self.opts.validate_components:
            self._args.append("--validate-components")
        log.info("webhook server starting", extra=fields(bind=host_port(self.opts.bind_address, self.opts.port)))
        self.certs.follow()
        threading.Thread(target=self._supervise, name="webhook-supervisor", daemon=True).start()

    def lead(self) -> None:
        """While this replica leads: make or renew self-made certificates, register the webhooks once this
        replica serves, and again when the CA changes."""
        self.certs.lead()
        self._register.set()
        threading.Thread(target=self._register_loop, name="webhook-register", daemon=True).start()

    def _register_loop(self) -> None:
        """Point the API server at the webhooks only once they answer, so that no write fails meanwhile;
        a failed registration is retried (with backoff) until it lands or the master stops."""
        delay = 0.5
        while not self._stop.is_set():
            self._register.wait()
            ca = self.certs.ca_pem()
            if self._stop.is_set():
                return
            if not self._serving or ca is None:
                self._stop.wait(0.2)
                continue
            self._register.clear()  # a change from here on registers again
            try:
                register(self.client, self.opts, ca)
                delay = 0.5
            except errors.KubeError as err:
                log.error("registering the webhooks failed; retrying", extra=fields(error=str(err), retry_in=delay))
                self._register.set()
                self._stop.wait(delay)
                delay = min(delay * 2, 30.0)

    def _signing_key_path(self) -> str:
        return os.path.join(self._dir, "signing.key")

    def _probe(self) -> bool:
        """Whether the server answers /healthz over TLS with a certificate of the CA registered."""
        ca = self.certs.ca_pem()
        if ca is None:
            return False
        try:
            context = ssl.create_default_context(cadata=ca.decode())
        except (ssl.SSLError, ValueError):
            return False
        context.check_hostname = False  # we only ask whether it serves; the API server verifies the name
        # An unspecified address (0.0.0.0, ::) listens on loopback too; a specific one only on itself.
        bound = ipaddress.ip_address(self.opts.bind_address)
        probe = ("::1" if bound.version == 6 else "127.0.0.1") if bound.is_unspecified else self.opts.bind_address
        try:
            with urllib.request.urlopen(f"https://{host_port(probe, self.opts.port)}/healthz", timeout=2,
                                        context=context):
                return True
        except OSError:
            return False

    def _supervise(self) -> None:
        # No server before the certificate, nor before the key when sharded: its assignments would be handed back.
        while not self.certs.ready() or (self.keys is not None and self.keys.signer is None):
            if self._stop.wait(0.2):
                return
        if self.keys is not None:
            assert self.keys.signer is not None
            write_atomically(self._signing_key_path(), self.keys.signer.private_pem())
        delay = 1.0
        while not self._stop.is_set():
            started = time.monotonic()
            self._proc = subprocess.Popen(self._args)
            self._watch(self._proc, started)
            self._serving = False
            if self._stop.is_set():
                return
            if time.monotonic() - started >= HEALTHY_RUN:
                delay = 1.0  # a crash after a healthy run is no crash loop
            log.error("webhook server exited; restarting", extra=fields(code=self._proc.returncode, retry_in=delay))
            self._stop.wait(delay)
            delay = min(delay * 2, 30.0)

    def _watch(self, proc: subprocess.Popen, started: float) -> None:
        """While the server runs: probe it (often until it first answers, then every PROBE_PERIOD)."""
        next_probe, warned = started, False
        while proc.poll() is None and not self._stop.is_set():
            now = time.monotonic()
            if now >= next_probe:
                self._serving = self._probe()
                next_probe = now + (PROBE_PERIOD if self._serving else 0.2)
                if not self._serving and not warned and now - started > 60:
                    warned = True
                    log.warning("the webhook server does not answer yet", extra=fields(port=self.opts.port))
            self._stop.wait(0.2)

    def stop(self) -> None:
        if self._drain and self._serving and not self._stop.is_set():
            time.sleep(self._drain)  # not ready since the stop began; calls routed meanwhile are still answered
        self._stop.set()
        self._register.set()
        self.certs.stop()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(8)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        shutil.rmtree(self._dir, ignore_errors=True)  # the keys do not outlive the master on disk
