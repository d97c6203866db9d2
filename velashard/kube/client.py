"""A small, dict-based Kubernetes client over urllib3 (kube/config.py reads kubeconfigs, kube/transport.py
holds the connections).

It gives what controllers need: any group/version/resource as plain dicts, client-side QPS/burst limiting, a
User-Agent naming the shard, errors as exceptions, request metrics, and watch streams that another thread can
close.
"""

from __future__ import annotations

import copy
import gc
import logging
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator
from urllib.parse import urlencode

import urllib3

from velashard import __version__
from velashard.kube import errors, jsoncodec
from velashard.kube.config import ClientConfig, load
from velashard.kube.fence import Fence
from velashard.kube.ratelimit import TokenBucket
from velashard.kube.resources import LEASES, Resource
from velashard.kube.transport import Transport
from velashard.observability import KUBE_REQUESTS, fields

log = logging.getLogger("velashard.kube.client")

_sent = threading.local()


def requests_sent() -> int:
    """How many requests this thread has sent through any client: a reconcile tells by it whether a pass read
    or wrote anything past the caches."""
    return getattr(_sent, "count", 0)


def writes_sent() -> int:
    """How many requests other than reads this thread has sent through any client (a reconcile tells by it
    whether a pass changed anything)."""
    return getattr(_sent, "writes", 0)

_REVIEW_APIS = ("/apis/authentication.k8s.io/", "/apis/authorization.k8s.io/")

# As client-go: a 429 (the server rejected the request before acting on it) is retried for every verb, a 5xx
# that carries Retry-After only for reads; at most this many times, waiting what the server asks (capped).
MAX_RETRIES = 10
MAX_RETRY_AFTER = 10.0
_SAFE_METHODS = ("GET", "HEAD")


def retry_after(status: int, method: str, header: str | None, attempt: int) -> float | None:
    """How long to wait before sending a request again, or None to give up and report the error."""
    if attempt >= MAX_RETRIES or header is None:
        return None
    if status != 429 and not (500 <= status < 600 and method in _SAFE_METHODS):
        return None
    try:
        seconds = float(header.strip())
    except ValueError:
        seconds = 1.0  # an HTTP date or garbage: wait a moment, as client-go does
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


# A request that got no answer is sent again only where that cannot do anything twice: a read (GET, HEAD) after a
# connection or read error, a write only when no connection was made (it never left). urllib3 resends nothing
# itself (kube/transport.py), so every send, a resend too, passes the write fence. At most this many times, after
# a pause that doubles from RESEND_PAUSE.
MAX_RESENDS = 3
RESEND_PAUSE = 0.2


def resend_after(method: str, err: Exception, attempt: int) -> float | None:
    """How long to wait before sending a request that got no answer again, or None to report the error."""
    if attempt >= MAX_RESENDS:
        return None
    if method not in _SAFE_METHODS and not isinstance(err, urllib3.exceptions.ConnectTimeoutError):
        return None  # a write may have reached the server (a read timeout, a connection reset): never resent
    return RESEND_PAUSE * 2 ** attempt


PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}


def load_configuration(kubeconfig: str | None = None) -> ClientConfig:
    """`--kubeconfig` if given, else in-cluster config inside a pod, else $KUBECONFIG or ~/.kube/config."""
    return load(kubeconfig)


def user_agent(shard_id: str, component: str = "velashard") -> str:
    return f"{component}/{__version__} (shard={shard_id})"


# Bodies at least this large (list pages) are decoded with the cyclic garbage collector paused.
LARGE_BODY = 64 * 1024
_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = True


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while the block runs (threads may nest and overlap: it is back on once
    the last one is done, if it was on before the first)."""
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


def decode_body(data: bytes) -> Any:
    """A response's JSON. A list page of 500 Deployments is some 100,000 new dicts and lists, which set off a
    collection every few hundred, each traversing what was built so far: the page took 2.5 times as long to decode
    (a third of a restarted shard's CPU went to decoding its initial lists). Nothing decoding makes is garbage, so
    pausing the collector for it loses nothing."""
    if len(data) < LARGE_BODY:
        return jsoncodec.loads(data)
    with gc_paused():
        return jsoncodec.loads(data)


@dataclass(frozen=True)
class Identity:
    """A user and groups to act as: an Application's author."""

    user: str
    groups: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.user + (f' (groups {", ".join(self.groups)})' if self.groups else "")


def refusal(who: str, verb: str, path: str, server_message: str) -> str:
    """`Forbidden: <user> cannot <verb> <resource> ...`: who was refused what, from the request itself (an
    admission denial says why in the server's words, which follow)."""
    if "cannot impersonate" in server_message:  # the controller's own role lacks impersonate: say so, not who
        return f"Forbidden: the controller may not act as {who}: {server_message}"
    what = describe_request(verb, path)
    text = f"Forbidden: {who} cannot {what}"
    if "cannot" not in server_message:  # not RBAC: a webhook or a policy refused it; its reason matters
        text += f": {server_message}"
    return text


def describe_request(verb: str, path: str) -> str:
    """`create clusterrolebindings.rbac.authorization.k8s.io at the cluster scope`, `get secrets "x" in
    namespace kube-system`: a request's verb and target in RBAC's terms, from its path."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    if parts[:1] == ["api"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return f"{verb} {path}"
    namespace = ""
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) != 2:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else ""
    target = f"{resource}.{group}" if group else resource
    if len(rest) > 2:
        target += "/" + rest[2]
    if name:
        target += f' "{name}"'
    scope = f"in namespace {namespace}" if namespace else "at the cluster scope"
    return f"{verb} {target} {scope}"


class WatchStream:
    """The events of one watch request; `close()` from any thread ends the iteration."""

    def __init__(self, response: urllib3.BaseHTTPResponse):
        self._response = response
        self.closed = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        buffer = b""
        try:
            for chunk in self._response.stream(amt=65536, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield jsoncodec.loads(line)
            if buffer.strip():
                yield jsoncodec.loads(buffer)
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as err:
            if not self.closed:
                raise errors.TransportError(f"watch stream broken: {err}")
        finally:
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for step in (self._response.shutdown,  # wakes a reader blocked in another thread
                     self._response.close,  # closes the socket, so the server ends the watch too
                     self._response.release_conn):  # gives the pool its slot back (it reconnects on next use)
            try:
                step()
            except Exception:  # closing a broken connection may fail in many ways; it is closed either way
                pass


class KubeClient:
    def __init__(self, configuration: ClientConfig, shard_id: str = "master", qps: float = 50.0,
                 burst: int = 100, component: str = "velashard"):
        self.configuration = configuration
        self.host = configuration.host.rstrip("/")
        self.user_agent = user_agent(shard_id, component)
        # Every watch holds a connection while workers, leases and writes need more: with a small pool a
        # controller opens and discards connections all the time.
        self._rest = Transport(configuration, maxsize=64)
        self._limiter = TokenBucket(qps, burst)
        self.sleep: Callable[[float], None] = time.sleep  # tests replace it to skip waiting for Retry-After
        self.fence: Fence | None = None
        self._own_lease: tuple[str, str] = ("", "")
        self.identity: Identity | None = None  # whom this client acts as (impersonation); None: itself
        self._on_forbidden: Callable[[errors.Forbidden], None] | None = None

    def acting_as(self, identity: Identity | None,
                  on_forbidden: Callable[[errors.Forbidden], None] | None = None) -> "KubeClient":
        """A client that acts as `identity` (Impersonate-User and Impersonate-Group headers; None: as this
        client itself) over this one's connections, rate limiter and fence. Its 403s carry a message naming
        who was refused what, and `on_forbidden` hears each before it is raised."""
        view = copy.copy(self)
        view.identity = identity
        view._on_forbidden = on_forbidden
        return view

    def set_fence(self, fence: Fence, lease_namespace: str, lease_name: str) -> None:
        """Refuse every write but those to the shard's own Lease while `fence` is closed (see kube/fence.py)."""
        self._own_lease = (LEASES.path(lease_namespace), lease_name)
        self.fence = fence

    def _fenced_write(self, method: str, path: str, body: Any) -> bool:
        if self.fence is None or method not in ("POST", "PUT", "PATCH", "DELETE"):
            return False
        if method == "POST" and path.startswith(_REVIEW_APIS):
            return False  # reviews (who am I, may I) are questions, not writes: they change nothing
        collection, name = self._own_lease
        if path == f"{collection}/{name}":
            return False
        return not (method == "POST" and path == collection and isinstance(body, dict)
                    and (body.get("metadata") or {}).get("name") == name)

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str | None, **kwargs: Any) -> "KubeClient":
        return cls(load_configuration(kubeconfig), **kwargs)

    # --- transport -------------------------------------------------------------------------------

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = urllib3.HTTPHeaderDict({"Accept": "application/json", "User-Agent": self.user_agent})
        if content_type:
            headers["Content-Type"] = content_type
        authorization = self.configuration.authorization()
        if authorization:
            headers["Authorization"] = authorization
        if self.identity is not None:
            headers["Impersonate-User"] = self.identity.user
            for group in self.identity.groups:  # one header line per group, as client-go sends them
                headers.add("Impersonate-Group", group)
        return headers

    def request(self, verb: str, method: str, path: str, query: dict[str, Any] | None = None,
                body: Any = None, content_type: str | None = None, timeout: float | tuple[float, float] = 60,
                stream: bool = False) -> Any:
        """Send one request; returns the decoded JSON body (or a raw response when `stream`)."""
        _sent.count = getattr(_sent, "count", 0) + 1
        if method not in _SAFE_METHODS:
            _sent.writes = getattr(_sent, "writes", 0) + 1
        params = {k: v for k, v in (query or {}).items() if v not in (None, "")}
        url = self.host + path + ("?" + urlencode(params) if params else "")
        attempt = resends = 0
        refreshed = False
        while True:
            self._limiter.acquire()
            if self._fenced_write(method, path, body):
                # Checked as late as possible, right before each send (a retry too): see kube/fence.py for the
                # one request that may still be in flight when the fence closes.
                assert self.fence is not None
                self.fence.allow_write(verb, path)
            headers = self._headers(content_type or ("application/json" if body is not None else None))
            try:
                response = self._rest.request(method, url, headers, body, timeout, stream)
            except (urllib3.exceptions.HTTPError, OSError) as err:
                KUBE_REQUESTS.labels(verb=verb, code="<error>").inc()
                pause = resend_after(method, err, resends)
                if pause is None:
                    raise errors.TransportError(f"{method} {path}: {err}")
                log.info("no answer, sending again", extra=fields(verb=verb, path=path, error=str(err),
                                                                  retry_in=pause, attempt=resends + 1))
                self.sleep(pause)
                resends += 1
                continue
            KUBE_REQUESTS.labels(verb=verb, code=str(response.status)).inc()
            if response.status == 401 and not refreshed:
                # Credentials rotated under us (a projected token rewritten in place, an exec plugin's token
                # expired early): renewed once, and the request sent again if they changed.
                refreshed = True
                if self.configuration.refreshed(headers.get("Authorization")):
                    response.drain_conn()
                    log.info("unauthorized: credentials renewed, sending again", extra=fields(verb=verb, path=path))
                    continue
            wait = retry_after(response.status, method, response.headers.get("Retry-After"), attempt)
            if wait is None:
                break
            response.drain_conn()  # frees the connection for the next attempt
            log.info("server asked to retry later", extra=fields(verb=verb, path=path, code=response.status,
                                                                 retry_in=wait, attempt=attempt + 1))
            self.sleep(wait)
            attempt += 1
        if stream and response.status == 200:
            return response
        data = response.read() if stream else response.data
        if response.status >= 400:
            err = errors.error_from_response(response.status, data)
            if isinstance(err, errors.Forbidden) and (self.identity is not None or self._on_forbidden is not None):
                who = self.identity.user if self.identity is not None else "the controller"
                err = errors.Forbidden(403, "Forbidden", refusal(who, verb, path, err.message), err.status)
                if self._on_forbidden is not None:
                    self._on_forbidden(err)
            raise err
        return decode_body(data) if data else None

    # --- verbs -----------------------------------------------------------------------------------

    def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        return self.request("get", "GET", res.path(namespace, name))

    def list(self, res: Resource, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None, limit: int | None = None, continue_token: str | None = None,
             resource_version: str | None = None) -> dict[str, Any]:
        return self.request("list", "GET", res.path(namespace), {
            "labelSelector": label_selector, "fieldSelector": field_selector, "limit": limit,
            "continue": continue_token, "resourceVersion": resource_version})

    def list_pages(self, res: Resource, namespace: str | None = None, label_selector: str | None = None,
                   field_selector: str | None = None, page_size: int = 500) -> Iterator[tuple[list[dict[str, Any]], str]]:
        """Each page of a list as it arrives: (its items, the first page's resourceVersion)."""
        token: str | None = None
        rv = ""
        while True:
            page = self.list(res, namespace, label_selector, field_selector, page_size, token)
            rv = rv or page["metadata"].get("resourceVersion", "")
            # The items leave the page: once the caller drops them, nothing here keeps them alive.
            yield page.pop("items", None) or [], rv
            token = page["metadata"].get("continue")
            if not token:
                return

    def list_all(self, res: Resource, namespace: str | None = None, label_selector: str | None = None,
                 field_selector: str | None = None, page_size: int = 500,
                 transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                 ) -> tuple[list[dict[str, Any]], str]:
        """Every page of a list; returns the items and the first page's resourceVersion.

        `transform` is applied page by page, so that only one page of untransformed objects is ever held.
        """
        items: list[dict[str, Any]] = []
        rv = ""
        for page_items, rv in self.list_pages(res, namespace, label_selector, field_selector, page_size):
            items.extend(map(transform, page_items) if transform else page_items)
        return items, rv

    def create(self, res: Resource, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        ns = namespace or (obj.get("metadata") or {}).get("namespace")
        return self.request("create", "POST", res.path(ns), body=obj)

    def update(self, res: Resource, obj: dict[str, Any], subresource: str | None = None) -> dict[str, Any]:
        meta = obj["metadata"]
        return self.request("update", "PUT", res.path(meta.get("namespace"), meta["name"], subresource), body=obj)

    def update_status(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        return self.update(res, obj, subresource="status")

    def patch(self, res: Resource, name: str, patch: Any, namespace: str | None = None, patch_type: str = "merge",
              subresource: str | None = None) -> dict[str, Any]:
        if patch_type not in PATCH_TYPES:
            raise ValueError(f"patch_type must be one of {', '.join(PATCH_TYPES)}")
        return self.request("patch", "PATCH", res.path(namespace, name, subresource), body=patch,
                            content_type=PATCH_TYPES[patch_type])

    def patch_status(self, res: Resource, name: str, patch: Any, namespace: str | None = None,
                     patch_type: str = "merge") -> dict[str, Any]:
        return self.patch(res, name, patch, namespace, patch_type, subresource="status")

    def delete(self, res: Resource, name: str, namespace: str | None = None, propagation_policy: str | None = None,
               preconditions: dict[str, str] | None = None) -> Any:
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation_policy:
            body["propagationPolicy"] = propagation_policy
        if preconditions:
            body["preconditions"] = preconditions
        return self.request("delete", "DELETE", res.path(namespace, name), body=body)

    def watch(self, res: Resource, namespace: str | None = None, label_selector: str | None = None,
              field_selector: str | None = None, resource_version: str | None = None, timeout_seconds: int = 300,
              allow_bookmarks: bool = True) -> WatchStream:
        response = self.request("watch", "GET", res.path(namespace), {
            "watch": "true", "labelSelector": label_selector, "fieldSelector": field_selector,
            "resourceVersion": resource_version, "timeoutSeconds": timeout_seconds,
            "allowWatchBookmarks": "true" if allow_bookmarks else None},
            timeout=(10, timeout_seconds + 30), stream=True)
        return WatchStream(response)
