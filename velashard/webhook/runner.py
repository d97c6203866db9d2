"""The master's side of the webhooks: certificates, webhook configurations, and the server process."""

from __future__ import annotations

import base64
import datetime
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
from velashard.webhook.certificates import KeyPair, make_ca, make_serving_cert
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


def load_or_make_certificates(opts: WebhookOptions) -> tuple[KeyPair, KeyPair]:
    """(CA, serving pair): from --webhook-cert-dir (ca.crt, tls.crt, tls.key) if given, else made now."""
    if opts.cert_dir:
        def read(name: str) -> bytes:
            with open(os.path.join(opts.cert_dir or "", name), "rb") as fh:
                return fh.read()
        return KeyPair(read("ca.crt"), b""), KeyPair(read("tls.crt"), read("tls.key"))
    ca = make_ca()
    return ca, make_serving_cert(ca, serving_hosts(opts))


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
        for hook in current.get("webhooks") or []:
            hook.setdefault("clientConfig", {})["caBundle"] = bundle
        client.update(res, current)


RENEW_BEFORE = datetime.timedelta(days=30)


def _write_private(path: str, data: bytes) -> None:
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as fh:
        fh.write(data)


def needs_renewal(serving: KeyPair, now: datetime.datetime, margin: datetime.timedelta = RENEW_BEFORE) -> bool:
    return serving.not_after - now <= margin


class WebhookRunner:
    """Runs the webhook server process while this master leads, restarting it if it dies."""

    def __init__(self, client: KubeClient, opts: WebhookOptions, keys: SigningKey | None):
        self.client = client
        self.opts = opts
        self.keys = keys  # sharded: the webhook proves the shards it assigns with the master's key
        self._dir = tempfile.mkdtemp(prefix="velashard-webhook-")
        self._proc: subprocess.Popen | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._ca, serving = load_or_make_certificates(self.opts)
        self._write_serving(serving)
        cert, key = os.path.join(self._dir, "tls.crt"), os.path.join(self._dir, "tls.key")
        self._args = [sys.executable, "-m", "velashard.webhook.server", "--bind",
                      host_port(self.opts.bind_address, self.opts.port),
                      "--certfile", cert, "--keyfile", key, "--namespace", self.opts.namespace,
                      "--schedulable-shards", self.opts.schedulable_shards, "--shard-scheduler", self.opts.strategy,
                      "--log-format", self.opts.log_format, "--parent-pid", str(os.getpid())]
        if self.keys is not None:
            self._args += ["--signing-key-file", self._signing_key_path()]
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
        self._thread = threading.Thread(target=self._supervise, name="webhook-supervisor", daemon=True)
        self._thread.start()
        threading.Thread(target=self._renew_loop, name="webhook-cert-renewal", daemon=True).start()
        threading.Thread(target=self._register_when_serving, name="webhook-register", daemon=True).start()

    def _register_when_serving(self) -> None:
        """Point the API server at the webhooks only once they answer, so that no write fails meanwhile;
        a failed registration is retried (with backoff) until it lands or the master stops."""
        context = ssl.create_default_context(cadata=self._ca.cert_pem.decode())
        context.check_hostname = False  # we only ask whether it serves; the API server verifies the name
        # An unspecified address (0.0.0.0, ::) listens on loopback too; a specific one only on itself.
        bound = ipaddress.ip_address(self.opts.bind_address)
        probe = ("::1" if bound.version == 6 else "127.0.0.1") if bound.is_unspecified else self.opts.bind_address
        started = time.monotonic()
        warned = False
        while not self._stop.is_set():
            try:
                with urllib.request.urlopen(f"https://{host_port(probe, self.opts.port)}/healthz", timeout=2,
                                            context=context):
                    break
            except OSError:
                if not warned and time.monotonic() - started > 60:
                    log.warning("the webhook server does not answer yet; registering once it does",
                                extra=fields(port=self.opts.port))
                    warned = True
                self._stop.wait(0.2)
        delay = 0.5
        while not self._stop.is_set():
            try:
                register(self.client, self.opts, self._ca.cert_pem)
                return
            except errors.KubeError as err:
                log.error("registering the webhooks failed; retrying", extra=fields(error=str(err), retry_in=delay))
                self._stop.wait(delay)
                delay = min(delay * 2, 30.0)

    def _write_serving(self, serving: KeyPair) -> None:
        self._serving = serving
        with open(os.path.join(self._dir, "tls.crt"), "wb") as fh:
            fh.write(serving.cert_pem)
        _write_private(os.path.join(self._dir, "tls.key"), serving.key_pem)

    def _signing_key_path(self) -> str:
        return os.path.join(self._dir, "signing.key")

    def _renew_loop(self) -> None:
        """Made certificates are renewed 30 days before expiry (same CA, so caBundle stays valid)."""
        while not self._stop.wait(3600):
            if self.opts.cert_dir or not needs_renewal(self._serving, datetime.datetime.now(datetime.timezone.utc)):
                continue
            self._write_serving(make_serving_cert(self._ca, serving_hosts(self.opts)))
            log.info("renewed the webhook serving certificate", extra=fields(
                not_after=self._serving.not_after.isoformat()))
            if self._proc is not None:
                self._proc.terminate()  # the supervisor restarts it with the new files

    def _supervise(self) -> None:
        if self.keys is not None:
            signer = None
            while signer is None:  # no webhook before the key: its assignments would all be handed back
                if self._stop.is_set():
                    return
                signer = self.keys.wait(0.5)
            _write_private(self._signing_key_path(), signer.private_pem())
        delay = 1.0
        while not self._stop.is_set():
            self._proc = subprocess.Popen(self._args)
            code = self._proc.wait()
            if self._stop.is_set():
                return
            log.error("webhook server exited; restarting", extra=fields(code=code, retry_in=delay))
            self._stop.wait(delay)
            delay = min(delay * 2, 30.0)

    def stop(self) -> None:
        self._stop.set()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(8)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        shutil.rmtree(self._dir, ignore_errors=True)  # the keys do not outlive the master on disk
