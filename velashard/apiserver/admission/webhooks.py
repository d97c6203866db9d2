"""Calling admission webhooks the way kube-apiserver does: matching, AdmissionReview v1, HTTPS, policies."""

from __future__ import annotations

import base64
import http.client
import json
import logging
import random
import ssl
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from velashard.apiserver import errors
from velashard.apiserver.admission.attributes import Attributes, rule_matches
from velashard.apiserver.admission import cel
from velashard.apiserver.admission.policy import PolicyAdmission, request_object
from velashard.apiserver.headers import Response
from velashard.apiserver.ids import new_uid
from velashard.apiserver.storage.selectors import SelectorError, stored_label_selector
from velashard.apiserver.storage.store import Store
from velashard.patch import PatchError, apply_json_patch

log = logging.getLogger("velashard.apiserver.admission.webhooks")

_MUTATING = ("admissionregistration.k8s.io", "mutatingwebhookconfigurations")
_VALIDATING = ("admissionregistration.k8s.io", "validatingwebhookconfigurations")
_MAX_IDLE_PER_WEBHOOK = 16
# An idle connection older than this is closed rather than reused: a server closes idle keep-alive
# connections after a while of its own (the master's webhook server after 75 s, Go's after 90 s), and sending on
# one it closed costs a failed attempt and a new TLS handshake in the middle of a user's write.
_IDLE_SECONDS = 30.0


class WebhookCallError(Exception):
    pass


def _labels(obj: dict[str, Any] | None) -> dict[str, str] | None:
    if obj is None:
        return None
    return (obj.get("metadata") or {}).get("labels") or {}


class Admission:
    def __init__(self, store: Store, service_endpoints: dict[str, str | list[str]] | None = None):
        self._store = store
        self._endpoints = {ref: [ep] if isinstance(ep, str) else list(ep)
                           for ref, ep in (service_endpoints or {}).items()}
        self._lock = threading.Lock()
        self._contexts: dict[str, ssl.SSLContext] = {}
        # Idle connections per webhook target, each with the endpoint it reached and when it was idled.
        self._idle: dict[tuple, list[tuple[http.client.HTTPSConnection, str, float]]] = {}
        self._programs: dict[str, cel.Program] = {}  # compiled matchConditions, by expression
        self.policies = PolicyAdmission(store)

    def active(self) -> bool:
        return bool(self._store.snapshot(_MUTATING) or self._store.snapshot(_VALIDATING)) or self.policies.active()

    def mutate(self, attrs: Attributes) -> dict[str, Any] | None:
        """Run matching mutating webhooks in order; returns the (possibly patched) object."""
        hooks = [hook for config in self._store.snapshot(_MUTATING) for hook in config.get("webhooks") or []]
        for index, hook in enumerate(hooks):
            if not self._matches(hook, attrs):
                continue
            response = self._call(hook, attrs, f"mutation.webhook.admission.k8s.io/round_0_index_{index}")
            if response is not None:
                self._apply(hook, response, attrs)
        return attrs.obj

    @staticmethod
    def _apply(hook: dict[str, Any], response: dict[str, Any], attrs: Attributes) -> None:
        patch = response.get("patch")
        if patch and attrs.obj is not None:
            if response.get("patchType", "JSONPatch") != "JSONPatch":
                raise errors.internal(f'failed calling webhook "{hook["name"]}": unsupported patchType '
                                      f'{response.get("patchType")!r}')
            try:
                ops = json.loads(base64.b64decode(patch))
                attrs.obj = apply_json_patch(attrs.obj, ops)
            except (ValueError, PatchError) as err:
                raise errors.internal(f'failed calling webhook "{hook["name"]}": invalid patch: {err}')

    def validate(self, attrs: Attributes) -> None:
        """ValidatingAdmissionPolicies, then validating webhooks: kube-apiserver's plugin order."""
        self.policies.validate(attrs)
        hooks = [hook for config in self._store.snapshot(_VALIDATING) for hook in config.get("webhooks") or []]
        for index, hook in enumerate(hooks):
            if self._matches(hook, attrs):
                self._call(hook, attrs, f"validating.webhook.admission.k8s.io/round_0_index_{index}")

    # --- matching --------------------------------------------------------------------------------

    def _matches(self, hook: dict[str, Any], attrs: Attributes) -> bool:
        if attrs.rt.group == "admissionregistration.k8s.io":
            return False  # webhooks never intercept their own configurations
        if not any(rule_matches(rule, attrs) for rule in hook.get("rules") or []):
            return False
        try:
            obj_sel = stored_label_selector(hook.get("objectSelector"))
            ns_sel = stored_label_selector(hook.get("namespaceSelector"))
        except SelectorError:
            return False
        if not obj_sel.empty:
            # On UPDATE a webhook is called if the old or the new object matches.
            candidates = [lbl for lbl in (_labels(attrs.obj), _labels(attrs.old)) if lbl is not None]
            if not any(obj_sel.matches(lbl) for lbl in candidates):
                return False
        if not ns_sel.empty:
            if attrs.rt.namespaced:
                ns = self._store.get(("", "namespaces"), ("", attrs.namespace))
                if not ns_sel.matches(_labels(ns) or {}):
                    return False
            elif attrs.rt.kind == "Namespace":
                if not ns_sel.matches(_labels(attrs.obj if attrs.obj is not None else attrs.old) or {}):
                    return False
        return self._conditions_hold(hook, attrs)

    def _conditions_hold(self, hook: dict[str, Any], attrs: Attributes) -> bool:
        """matchConditions (CEL over object, oldObject and request): all true calls the webhook, any false skips
        it; one that cannot be evaluated fails the request, or skips the webhook under failurePolicy Ignore."""
        conditions = hook.get("matchConditions") or []
        if not conditions:
            return True
        activation = {"object": attrs.obj, "oldObject": attrs.old, "request": request_object(attrs)}
        for condition in conditions:
            try:
                if not self._program(condition.get("expression") or "").evaluate(activation):
                    return False
            except (cel.CompileError, cel.EvaluationError) as err:
                name = hook.get("name", "")
                if hook.get("failurePolicy", "Fail") == "Ignore":
                    log.warning("admission webhook match condition failed, ignored by failurePolicy webhook=%s "
                                "condition=%s err=%s", name, condition.get("name"), err)
                    return False
                raise errors.internal(f'failed calling webhook "{name}": match condition '
                                      f'"{condition.get("name")}": {err}')
        return True

    def _program(self, expression: str) -> cel.Program:
        with self._lock:
            program = self._programs.get(expression)
        if program is None:
            program = cel.compile_expression(expression, ("BOOL",), ())
            with self._lock:
                self._programs[expression] = program
        return program

    # --- calling ---------------------------------------------------------------------------------

    def review(self, attrs: Attributes) -> dict[str, Any]:
        rt = attrs.rt
        request: dict[str, Any] = {
            "uid": new_uid(),
            "kind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
            "resource": {"group": rt.group, "version": rt.version, "resource": rt.plural},
            "requestKind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
            "requestResource": {"group": rt.group, "version": rt.version, "resource": rt.plural},
            "name": attrs.name,
            "operation": attrs.operation,
            "userInfo": {k: v for k, v in request_object(attrs)["userInfo"].items() if v},
            "object": attrs.obj,
            "oldObject": attrs.old,
            "dryRun": attrs.dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1",
                        "kind": {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions",
                                 "DELETE": "DeleteOptions"}[attrs.operation]},
        }
        if attrs.namespace:
            request["namespace"] = attrs.namespace
        if attrs.subresource:
            request["subResource"] = attrs.subresource
            request["requestSubResource"] = attrs.subresource
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}

    def _call(self, hook: dict[str, Any], attrs: Attributes, audit_key: str) -> dict[str, Any] | None:
        """Call one webhook; returns its response when allowed, None when ignored after a failure (which the
        request's audit record says, as kube-apiserver's annotation failed-open.<audit_key> does)."""
        name = hook.get("name", "")
        review = self.review(attrs)
        try:
            if "v1" not in (hook.get("admissionReviewVersions") or ["v1"]):
                raise WebhookCallError("webhook does not accept admission.k8s.io/v1 AdmissionReview")
            response = self._post(hook, review)
            if not isinstance(response, dict) or not isinstance(response.get("response"), dict):
                raise WebhookCallError("webhook response was absent")
            result = response["response"]
            if result.get("uid") != review["request"]["uid"]:
                raise WebhookCallError(f'expected response.uid="{review["request"]["uid"]}", '
                                       f'got "{result.get("uid")}"')
        except WebhookCallError as err:
            if hook.get("failurePolicy", "Fail") == "Ignore":
                log.warning("admission webhook call failed, ignored by failurePolicy webhook=%s err=%s", name, err)
                attrs.annotations[f"failed-open.{audit_key}"] = name
                return None
            raise errors.internal(f'failed calling webhook "{name}": {err}')
        if not result.get("allowed"):
            status = result.get("status") or {}
            code = status.get("code") if isinstance(status.get("code"), int) else 400
            code = max(code, 400)
            message = status.get("message") or "without explanation"
            raise errors.APIError(code, status.get("reason") or ("Forbidden" if code == 403 else "BadRequest"),
                                  f'admission webhook "{name}" denied the request: {message}')
        return result

    def _target(self, client_config: dict[str, Any]) -> tuple[list[str], str, str]:
        """(endpoints HOST:PORT, server name to verify, path) for a webhook clientConfig: a URL's host, or every
        ready endpoint of the Service it names."""
        if client_config.get("url"):
            parts = urlsplit(client_config["url"])
            if parts.scheme != "https":
                raise WebhookCallError(f'webhook URL must use https, got "{client_config["url"]}"')
            host = parts.hostname or ""
            path = parts.path or "/"
            if parts.query:
                path += "?" + parts.query
            return [f"[{host}]:{parts.port or 443}" if ":" in host else f"{host}:{parts.port or 443}"], host, path
        service = client_config.get("service")
        if not isinstance(service, dict):
            raise WebhookCallError("webhook clientConfig has neither url nor service")
        ref = f'{service.get("namespace")}/{service.get("name")}'
        with self._lock:
            endpoints = list(self._endpoints.get(ref) or [])
        if not endpoints:
            raise WebhookCallError(f"service {ref} has no endpoint (start the server with --service-endpoint "
                                   f"{ref}=HOST:PORT)")
        return endpoints, f'{service.get("name")}.{service.get("namespace")}.svc', service.get("path") or "/"

    def route_service(self, ref: str, endpoints: list[str]) -> None:
        """Where the Service `ref` (NS/NAME) is reached now, as its Endpoints would say: every ready pod's
        HOST:PORT (none: no ready pod); the local kubelet keeps this in step with the pods it runs. A new
        connection goes to one of them at random, as kube-proxy sends it."""
        with self._lock:
            if endpoints:
                self._endpoints[ref] = list(endpoints)
            else:
                self._endpoints.pop(ref, None)

    def _context(self, ca_bundle: str | None) -> ssl.SSLContext:
        key = ca_bundle or ""
        with self._lock:
            context = self._contexts.get(key)
        if context is None:
            try:
                context = (ssl.create_default_context(cadata=base64.b64decode(ca_bundle).decode()) if ca_bundle
                           else ssl.create_default_context())
            except (ValueError, ssl.SSLError) as err:
                raise WebhookCallError(f"invalid caBundle: {err}")
            with self._lock:
                self._contexts[key] = context
        return context

    def _post(self, hook: dict[str, Any], review: dict[str, Any]) -> Any:
        client_config = hook.get("clientConfig") or {}
        context = self._context(client_config.get("caBundle"))
        timeout = min(max(int(hook.get("timeoutSeconds") or 10), 1), 30)
        body = json.dumps(review).encode()
        key = (client_config.get("url") or json.dumps(client_config.get("service"), sort_keys=True),
               client_config.get("caBundle") or "")
        # Connections are kept alive and reused, as kube-apiserver does: a TLS handshake per call
        # would cost more than the webhook itself. A reused connection the peer closed is retried once, on a
        # new connection through the Service again (to whichever endpoint is ready now).
        for attempt in range(2):
            endpoints, server_name, path = self._target(client_config)
            conn, reused = self._checkout(key, endpoints, server_name, context, timeout, fresh=attempt > 0)
            url = f"https://{conn.host}:{conn.port}{path}"
            try:
                conn.request("POST", path, body, {"Content-Type": "application/json", "Accept": "application/json"})
                resp = conn.getresponse()
                payload = resp.read()
            except (OSError, http.client.HTTPException) as err:
                conn.close()
                if reused and attempt == 0 and not isinstance(err, TimeoutError):
                    continue  # the peer closed this one while it was idle: a new connection once
                raise WebhookCallError(f'failed to call webhook: Post "{url}": {err}')
            if resp.will_close:
                conn.close()
            else:
                self._checkin(key, conn)
            break
        if resp.status != 200:
            raise WebhookCallError(f"received invalid webhook response: HTTP {resp.status}: {payload[:200]!r}")
        try:
            return json.loads(payload)
        except ValueError as err:
            raise WebhookCallError(f"received invalid webhook response: {err}")

    def _checkout(self, key: tuple, endpoints: list[str], server_name: str, context: ssl.SSLContext,
                  timeout: float, fresh: bool = False) -> tuple[http.client.HTTPSConnection, bool]:
        conn, stale = None, []
        with self._lock:
            idle = self._idle.get(key) or []
            # The most recently used is taken (the fewest connections stay busy); the oldest ones go once stale,
            # and so do those to an endpoint that is no longer ready.
            while idle and time.monotonic() - idle[0][2] > _IDLE_SECONDS:
                stale.append(idle.pop(0)[0])
            for entry in [e for e in idle if e[1] not in endpoints]:
                idle.remove(entry)
                stale.append(entry[0])
            if idle and not fresh:
                conn = idle.pop()[0]
        for old in stale:
            old.close()
        if conn is not None:
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            return conn, True
        host, _, port = random.choice(endpoints).rpartition(":")
        return _VerifyingHTTPSConnection(host.strip("[]"), int(port), server_name, context, timeout), False

    def _checkin(self, key: tuple, conn: http.client.HTTPSConnection) -> None:
        endpoint = f"{conn.host}:{conn.port}" if ":" not in conn.host else f"[{conn.host}]:{conn.port}"
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if len(idle) < _MAX_IDLE_PER_WEBHOOK:
                idle.append((conn, endpoint, time.monotonic()))
                return
        conn.close()


class _VerifyingHTTPSConnection(http.client.HTTPSConnection):
    """Connects to (host, port) but verifies the certificate against `server_name`, as for service references."""

    response_class = Response  # headers read without the email package

    def __init__(self, host: str, port: int, server_name: str, context: ssl.SSLContext, timeout: float):
        super().__init__(host, port, timeout=timeout, context=context)
        self._server_name = server_name
        self._ctx = context

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)
        self.sock = self._ctx.wrap_socket(self.sock, server_hostname=self._server_name)

    def _send_output(self, message_body: Any = None, encode_chunked: bool = False) -> None:
        """The review's head and body in one write, so one TLS record: http.client writes them apart, and the
        webhook server then reads them in two calls, each a wake-up of its own (webhook/worker.py does the same
        for the answer)."""
        if not isinstance(message_body, bytes) or encode_chunked:
            super()._send_output(message_body, encode_chunked)
            return
        self._buffer.extend((b"", b""))
        head = b"\r\n".join(self._buffer)
        del self._buffer[:]
        self.send(head + message_body)
