"""The embedded Kubernetes API server: HTTP routing, discovery, list/watch streaming and lifecycle.

It serves the Kubernetes REST API over plain HTTP for development, tests and benchmarks; every
semantic decision lives in `rest`, `store`, `admission` and `controllers`.

Credentials: every server makes its own random admin token and a random token per user it writes a
kubeconfig for, so nothing guessable is ever accepted; clients read the token from the kubeconfig (written
0600). It listens on loopback unless asked with `allow_remote`, since anyone who can reach it and holds a
token is that user (and plain HTTP shares the port).
"""

from __future__ import annotations

import base64
import http.client
import ipaddress
import logging
import os
import secrets
import socket
import ssl
import tempfile
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from velashard import __version__
from velashard.apiserver import errors
from velashard.apiserver.admission.webhooks import Admission
from velashard.apiserver.auth import access
from velashard.apiserver.auth.authn import ANONYMOUS, service_account_user, split_service_account
from velashard.apiserver.controllers.controller_manager import Controllers
from velashard.apiserver.headers import read_headers
from velashard.apiserver.http import openapi_builtin, protobuf, review_protobuf
from velashard.apiserver.http.audit import AuditLog
from velashard.apiserver.http.tables import to_table
from velashard.apiserver.registry import scale
from velashard.apiserver.registry.rest import Request, RestAPI, Result
from velashard.apiserver.simulation.nodes import NodeHeartbeat
from velashard.apiserver.simulation.workloads import WorkloadSimulator
from velashard.apiserver.storage import conversion, managed_fields
from velashard.apiserver.storage.resources import SCALABLE, Registry, ResourceType
from velashard.apiserver.storage.store import Store, dumps
from velashard.httpdate import http_date
from velashard.kube import jsoncodec
from velashard.kube.kubeconfig import write_kubeconfig
from velashard.webhook.certificates import KeyPair, make_ca, make_serving_cert

log = logging.getLogger("velashard.apiserver.http.server")

MAX_BODY_BYTES = 3 * 1024 * 1024  # kube-apiserver's request size limit
# How long a watch lets events pile up after sending some. A writer wakes an idle watch's thread, which then
# takes the GIL from it; 20 ms rather than 5 spared the API server 3 and each shard 1 CPU second of 3,000 apps.
WATCH_BATCH_SECONDS = 0.02
ADMIN_USER = "admin"  # the user of the kubeconfigs written by default, in system:masters
ADMIN_GROUPS = ["system:masters"]
# Request bodies this server decodes (JSON, YAML and the patch types; not Kubernetes protobuf or CBOR).
_DECODABLE = frozenset({"application/json", "application/yaml", "application/json-patch+json",
                        "application/merge-patch+json", "application/strategic-merge-patch+json",
                        "application/apply-patch+yaml", "text/plain", "*/*"})
_VERB_BY_METHOD = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


class _Route:
    """What a resource URL names."""

    def __init__(self, rt: ResourceType, namespace: str | None, name: str | None, subresource: str | None):
        self.rt = rt
        self.namespace = namespace
        self.name = name
        self.subresource = subresource


def is_loopback(host: str) -> bool:
    """Whether `host` names only this machine: `localhost` or a loopback address (not a hostname that may
    resolve elsewhere, and not "" or 0.0.0.0, which mean every interface)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class APIServer:
    """An embedded kube-apiserver. `start()` serves in background threads; `serve_forever()` in the foreground."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, watch_history: int = 10_000,
                 simulate_workloads: bool = False, service_endpoints: dict[str, str | list[str]] | None = None,
                 bookmark_interval: float = 5.0, audit_limit: int = 500_000, nodes: int | None = None,
                 allow_remote: bool = False):
        """`nodes` simulated nodes are registered (default: one under `simulate_workloads`, else none).
        A `host` beyond loopback needs `allow_remote` (ValueError otherwise) and is logged as a warning."""
        if not is_loopback(host):
            if not allow_remote:
                raise ValueError(f"{host or 'every interface'} is reachable from other machines; "
                                 f"listening there needs allow_remote")
            log.warning("listening beyond loopback host=%s: anyone who can reach it may try tokens, and plain "
                        "HTTP on the same port carries them unencrypted", host or "*")
        self.types = Registry()
        self.store = Store(watch_history=watch_history)
        self.admission = Admission(self.store, service_endpoints)
        self.api = RestAPI(self.store, self.types, self.admission)
        self.controllers = Controllers(self.api, self.types)
        self.access = access.Access(self.api, self.types)
        access.register_types(self.types)
        self.api._on_commit = self._on_commit
        self.nodes = NodeHeartbeat(self.api, self.types, (1 if simulate_workloads else 0) if nodes is None else nodes)
        self.simulator = (WorkloadSimulator(self.api, self.types, nodes=self.nodes) if simulate_workloads
                          else None)
        self.audit = AuditLog(audit_limit)
        self.bookmark_interval = bookmark_interval
        self.stopping = threading.Event()
        self._httpd = _HTTPServer((host, port), _Handler)
        self._httpd.apiserver = self
        self.ca, self._httpd.tls = _tls_context(host)
        self.host, self.port = host, self._httpd.server_address[1]
        self._thread: threading.Thread | None = None
        self.kubeconfig: str | None = None  # path of the first kubeconfig written
        self._tokens: dict[str, str] = {}  # user -> the random token its kubeconfigs carry
        self._tokens_lock = threading.Lock()
        self.admin_token = self.token_for(ADMIN_USER)
        self._bootstrap()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def secure_url(self) -> str:
        """The same port speaks TLS; kubectl sends credentials only over https."""
        return f"https://{self.host}:{self.port}"

    def _bootstrap(self) -> None:
        ns_rt = self.types.lookup("", "v1", "namespaces")
        assert ns_rt is not None
        for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.api.create(ns_rt, "", {"metadata": {"name": name}}, Request())
        for obj in access.bootstrap_policy():
            rt = self.types.for_kind(obj["apiVersion"], obj["kind"])
            assert rt is not None
            self.api.create(rt, "", obj, Request(manager="kube-apiserver"))
        self.nodes.register()

    def _on_commit(self, rt: ResourceType, event: Any) -> None:
        self.controllers.on_commit(rt, event)
        self.access.on_commit(rt, event)

    def start(self) -> "APIServer":
        self.controllers.start()
        self.nodes.start()
        if self.simulator is not None:
            self.simulator.start()
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="apiserver-http", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.controllers.start()
        self.nodes.start()
        if self.simulator is not None:
            self.simulator.start()
        self._httpd.serve_forever(poll_interval=0.2)

    def stop(self) -> None:
        self.stopping.set()
        self.store.close_watchers()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.controllers.stop()
        self.nodes.stop()
        if self.simulator is not None:
            self.simulator.stop()

    def token_for(self, user: str) -> str:
        """The random bearer token that authenticates as `user` (made on first use; `admin` is in system:masters,
        ServiceAccount usernames get their ServiceAccount groups)."""
        with self._tokens_lock:
            if user not in self._tokens:
                sa = split_service_account(user)
                if user == ADMIN_USER:
                    groups = ADMIN_GROUPS
                else:  # system:authenticated is added by the authenticator
                    groups = service_account_user(*sa)["groups"][:-1] if sa else []
                token = secrets.token_urlsafe(32)
                self.access.authn.add_token(token, user, groups)
                self._tokens[user] = token
            return self._tokens[user]

    def kubeconfig_document(self, user: str = ADMIN_USER, namespace: str = "default") -> dict[str, Any]:
        """A kubeconfig for `user`, carrying its token and the server's CA."""
        return {
            "apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": "velashard-dev", "cluster": {
                "server": self.secure_url,
                "certificate-authority-data": base64.b64encode(self.ca.cert_pem).decode()}}],
            "users": [{"name": user, "user": {"token": self.token_for(user)}}],
            "contexts": [{"name": "velashard-dev", "context": {"cluster": "velashard-dev", "user": user,
                                                                "namespace": namespace}}],
            "current-context": "velashard-dev",
        }

    def write_kubeconfig(self, path: str, user: str = ADMIN_USER) -> str:
        """Write a kubeconfig for `user`, mode 0600; the first one written becomes `self.kubeconfig`."""
        write_kubeconfig(path, self.kubeconfig_document(user))
        if self.kubeconfig is None:
            self.kubeconfig = path
        return path


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    apiserver: APIServer
    tls: ssl.SSLContext

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Plain HTTP and TLS share the port: a TLS handshake starts with byte 0x16."""
        try:
            request.settimeout(30)
            first = request.recv(1, socket.MSG_PEEK)
            request.settimeout(None)
            if first == b"\x16":
                request = self.tls.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            return
        super().finish_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that hang up (a closed watch, a killed process) are normal; anything else is logged."""
        import sys
        err = sys.exc_info()[1]
        if isinstance(err, (ConnectionError, TimeoutError, ssl.SSLError)):  # incl. TLS alerts from a dying client
            return
        log.exception("connection from %s failed", client_address)


def _http_version(text: str) -> tuple[int, int] | None:
    """(major, minor) of an `HTTP/x.y` version, or None if it is not one."""
    if not text.startswith("HTTP/"):
        return None
    parts = text[5:].split(".")
    if len(parts) != 2 or not all(p.isdigit() and len(p) <= 10 for p in parts):
        return None
    return int(parts[0]), int(parts[1])


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer
    server_version = "velashard-apiserver"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # the audit log records requests instead
        return

    def date_time_string(self, timestamp: float | None = None) -> str:
        return super().date_time_string(timestamp) if timestamp is not None else http_date()

    def parse_request(self) -> bool:
        """http.server's reading of the request line and head, with the headers read by headers.read_headers."""
        self.command = None  # type: ignore[assignment]
        self.request_version = version = self.default_request_version
        self.close_connection = True
        self.requestline = requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = requestline.split()
        if not words:
            return False
        if len(words) >= 3:
            version = words[-1]
            number = _http_version(version)
            if number is None:
                self.send_error(HTTPStatus.BAD_REQUEST, f"Bad request version ({version!r})")
                return False
            if number >= (2, 0):
                self.send_error(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, f"Invalid HTTP version ({version})")
                return False
            self.close_connection = number < (1, 1)
            self.request_version = version
        if not 2 <= len(words) <= 3:
            self.send_error(HTTPStatus.BAD_REQUEST, f"Bad request syntax ({requestline!r})")
            return False
        command, path = words[:2]
        if len(words) == 2:
            self.close_connection = True
            if command != "GET":
                self.send_error(HTTPStatus.BAD_REQUEST, f"Bad HTTP/0.9 request type ({command!r})")
                return False
        self.command, self.path = command, "/" + path.lstrip("/") if path.startswith("//") else path
        try:
            self.headers = read_headers(self.rfile)
        except http.client.LineTooLong as err:
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Line too long", str(err))
            return False
        except http.client.HTTPException as err:
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Too many headers", str(err))
            return False
        connection = (self.headers.get("Connection") or "").lower()
        if connection == "close":
            self.close_connection = True
        elif connection == "keep-alive":
            self.close_connection = False
        if (self.headers.get("Expect") or "").lower() == "100-continue" and self.request_version >= "HTTP/1.1":
            return self.handle_expect_100()
        return True

    # --- plumbing --------------------------------------------------------------------------------

    @property
    def apiserver(self) -> APIServer:
        return self.server.apiserver

    def _send(self, code: int, body: dict[str, Any] | None = None, raw: bytes | None = None,
              content_type: str = "application/json") -> None:
        payload = raw if raw is not None else dumps(body)
        if content_type == "application/json":
            payload += b"\n"  # kube-apiserver's encoder ends every JSON body with one; clients compare bodies as text
        self._code = code
        self._record_audit()  # before the client can read the answer, so a reader right after sees it
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-cache, private")
        for warning in getattr(self, "_warnings", ()):
            self.send_header("Warning", '299 - "%s"' % warning.replace("\\", "\\\\").replace('"', '\\"'))
        if self.close_connection:
            self.send_header("Connection", "close")
        # Head and body in one write (one TLS record): apart, every client read an answer in two calls.
        self._headers_buffer.append(b"\r\n")
        head, self._headers_buffer = b"".join(self._headers_buffer), []
        self.wfile.write(head if self.command == "HEAD" else head + payload)

    def _send_error(self, err: errors.APIError) -> None:
        self._send(err.code, err.status())

    def _read_raw_body(self) -> bytes:
        """The request body, read once; an unreadable one makes the connection close after the answer."""
        self._body_consumed = True
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            self.close_connection = True
            raise errors.APIError(411, "LengthRequired", "chunked request bodies are not supported: "
                                  "send Content-Length")
        length = self.headers.get("Content-Length")
        if not length:
            return b""
        try:
            size = int(length)
        except ValueError:
            self.close_connection = True
            raise errors.bad_request("invalid Content-Length")
        if size > MAX_BODY_BYTES:
            self.close_connection = True  # not worth reading; the client gets the answer, then EOF
            raise errors.APIError(413, "RequestEntityTooLarge", f"the request body is too large: {size} bytes, "
                                  f"limit {MAX_BODY_BYTES}")
        return self.rfile.read(size)

    def _discard_body(self) -> None:
        """Consume a body no handler read, so the next request on a kept-alive connection starts in sync."""
        if self._body_consumed:
            return
        try:
            self._read_raw_body()
        except errors.APIError:
            pass  # the connection is closed after this answer instead

    def _read_body(self, protobuf_kind: str = "") -> Any:
        """The decoded body; `protobuf_kind` names a review or token kind, decoded by review_protobuf."""
        data = self._read_raw_body()
        if not data.strip():
            return None
        content_type = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip().lower()
        if content_type == protobuf.MEDIA_TYPE and protobuf_kind:
            try:
                return review_protobuf.decode(data, protobuf_kind)
            except (review_protobuf.ProtobufError, UnicodeDecodeError) as err:
                raise errors.bad_request(f"error decoding the request body as {content_type}: {err}")
        if content_type == protobuf.MEDIA_TYPE:
            try:
                return protobuf.decode(data)
            except (protobuf.ProtobufError, UnicodeDecodeError, KeyError, ValueError) as err:
                raise errors.bad_request(f"error decoding the request body as {content_type}: {err}")
        if content_type not in _DECODABLE:
            raise errors.APIError(415, "UnsupportedMediaType", f'the body of the request was in an unknown format '
                                  f'("{content_type}") - accepted media types include: '
                                  f'{", ".join(sorted(_DECODABLE))}')
        try:
            if content_type in ("application/yaml", "application/apply-patch+yaml"):
                return yaml.safe_load(data)
            return jsoncodec.loads(data)
        except (ValueError, yaml.YAMLError) as err:
            raise errors.bad_request(f"error decoding the request body as {content_type}: {err}")

    def _dispatch(self) -> None:
        self._started = time.monotonic()
        self._body_consumed = False
        self._recorded = False
        self._code = 0
        # requestURI as Kubernetes' audit events have it: what a request refused before routing (a 401) was for.
        self._audit: dict[str, Any] = {"verb": _VERB_BY_METHOD.get(self.command, self.command.lower()),
                                       "resource": "", "subresource": "", "namespace": "", "name": "",
                                       "apiGroup": "", "requestURI": self.path}
        parts = urlsplit(self.path)
        self._query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        self._user = ANONYMOUS
        self._warnings: list[str] = []
        self._annotations: dict[str, str] = {}
        path = parts.path.rstrip("/") or "/"
        try:
            # In two steps, so that a refused impersonation is audited as its requester's.
            self._user = self.apiserver.access.authenticate(self.headers)
            self._user = self.apiserver.access.impersonate(self._user, self.headers)
            self._authorize_path(path)
            self._route(path)
        except errors.APIError as err:
            self._safe_error(err)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as err:  # never let a request kill the server; say what went wrong
            log.exception("request failed method=%s path=%s", self.command, self.path)
            self._safe_error(errors.internal(f"{type(err).__name__}: {err}"))
        if not self.close_connection:
            self._discard_body()
        self._record_audit()

    def _record_audit(self) -> None:
        if self._recorded or urlsplit(self.path).path.rstrip("/") == "/debug/audit":
            return
        self._recorded = True
        user = self._user or {}
        impersonated = {"impersonatedUser": {"username": user["username"], "groups": user["groups"]}} \
            if user.get("impersonator") else {}
        self.apiserver.audit.record(
            userAgent=self.headers.get("User-Agent", ""), user=user.get("impersonator") or user.get("username", ""),
            code=self._code, **impersonated,
            durationMs=round((time.monotonic() - self._started) * 1000, 3), **self._audit,
            **({"annotations": dict(self._annotations)} if self._annotations else {}))

    def _safe_error(self, err: errors.APIError) -> None:
        try:
            self._discard_body()
            self._send_error(err)
        except OSError:
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _dispatch

    # --- routing ---------------------------------------------------------------------------------

    def _authorize_path(self, path: str) -> None:
        """Requests outside the resource URLs (discovery, health, version) are authorized by path."""
        segments = [s for s in path.split("/") if s]
        if segments[:1] == ["api"] and len(segments) >= 3 or segments[:1] == ["apis"] and len(segments) >= 4:
            return  # a resource request: authorized once its route is known
        verb = "get" if self.command in ("GET", "HEAD") else self.command.lower()
        self.apiserver.access.check(self._user, self.apiserver.access.attributes(
            self._user, verb=verb, path=path, resource_request=False))

    def _authorize(self, route: _Route) -> None:
        q, verb = self._query, _VERB_BY_METHOD.get(self.command, "get")
        if self.command in ("GET", "HEAD"):
            watching = q.get("watch", "").lower() in ("true", "1")
            verb = "watch" if watching else ("get" if route.name is not None else "list")
        elif self.command == "DELETE" and route.name is None:
            verb = "deletecollection"
        namespace = route.namespace or (route.name or "" if route.rt.plural == "namespaces" and not route.rt.group
                                        else "")
        self.apiserver.access.check(self._user, self.apiserver.access.attributes(
            self._user, verb=verb, namespace=namespace, api_group=route.rt.group, resource=route.rt.plural,
            subresource=route.subresource or "", name=route.name or ""))

    def _route(self, path: str) -> None:
        srv = self.apiserver
        if path in ("/healthz", "/readyz", "/livez"):
            self._send(200, raw=b"ok", content_type="text/plain; charset=utf-8")
            return
        if path == "/version":
            self._send(200, {"major": "1", "minor": "32", "gitVersion": f"v1.32.0-velashard.{__version__}",
                             "gitCommit": "", "gitTreeState": "clean", "buildDate": "", "goVersion": "",
                             "compiler": "velashard", "platform": "python"})
            return
        if path == "/debug/audit":
            self._send(200, srv.audit.since(_int(self._query.get("since"), 0), _int(self._query.get("limit"), 0)))
            return
        segments = [s for s in path.split("/") if s]
        if segments[:2] == ["openapi", "v3"]:
            self._send(200, openapi_v3(srv.types, "/".join(segments[2:])))
            return
        if segments[:1] == ["api"]:
            if len(segments) == 1:
                self._send(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{srv.host}:{srv.port}"}]})
                return
            if segments[1] != "v1":
                raise _not_found_path(path)
            self._resources("", "v1", segments[2:], path)
            return
        if segments[:1] == ["apis"]:
            if len(segments) == 1:
                self._send(200, self._group_list())
                return
            group = segments[1]
            versions = srv.types.group_versions().get(group)
            if not versions:
                raise _not_found_path(path)
            if len(segments) == 2:
                self._send(200, _api_group(group, versions))
                return
            if segments[2] not in versions:
                raise _not_found_path(path)
            self._resources(group, segments[2], segments[3:], path)
            return
        raise _not_found_path(path)

    def _group_list(self) -> dict[str, Any]:
        groups = [_api_group(g, v) for g, v in sorted(self.apiserver.types.group_versions().items()) if g]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def _resources(self, group: str, version: str, segments: list[str], path: str) -> None:
        types = self.apiserver.types
        if not segments:
            if self.command != "GET":
                raise errors.method_not_allowed()
            resources = []
            for rt in types.resources_in(group, version):
                resources.extend(rt.discovery_entries())
            self._send(200, {"kind": "APIResourceList", "apiVersion": "v1",
                             "groupVersion": f"{group}/{version}" if group else version, "resources": resources})
            return
        route = self._parse_route(group, version, segments, path)
        self._audit.update(resource=route.rt.plural, subresource=route.subresource or "",
                           namespace=route.namespace or "", name=route.name or "", apiGroup=group)
        self._authorize(route)
        if route.name is None:
            self._collection(route)
        else:
            self._object(route)

    def _parse_route(self, group: str, version: str, segs: list[str], path: str) -> _Route:
        types = self.apiserver.types
        namespace: str | None = None
        if segs[0] == "namespaces" and len(segs) >= 3 and group == "" and segs[2] in ("status", "finalize"):
            rest = segs  # the namespace object's own subresources
        elif segs[0] == "namespaces" and len(segs) >= 3:
            namespace, rest = segs[1], segs[2:]
        else:
            rest = segs
        if len(rest) > 3:
            raise _not_found_path(path)
        rt = types.lookup(group, version, rest[0])
        if rt is None:
            raise _not_found_path(path)
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if namespace is not None and not rt.namespaced:
            raise _not_found_path(path)
        if rt.namespaced and name is not None and namespace is None:
            raise _not_found_path(path)
        if sub is not None and not (sub == "status" and rt.status_subresource
                                    or sub == "finalize" and rt.kind == "Namespace"
                                    or sub == "scale" and rt.group_resource in SCALABLE
                                    or sub == "token" and rt.kind == "ServiceAccount"):
            raise _not_found_path(path)
        return _Route(rt, namespace, name, sub)

    # --- collections -----------------------------------------------------------------------------

    def _collection(self, route: _Route) -> None:
        q = self._query
        api, rt = self.apiserver.api, route.rt
        if access.is_review(rt):
            if self.command != "POST":
                raise errors.method_not_allowed()
            self._send(201, self.apiserver.access.review(rt, route.namespace or "", self._read_body(rt.kind),
                                                             self._user))
            return
        if self.command in ("GET", "HEAD"):
            if q.get("watch", "").lower() in ("true", "1"):
                self._audit["verb"] = "watch"
                self._watch(route)
                return
            self._audit["verb"] = "list"
            limit = _int(q.get("limit"), 0)
            if limit < 0:
                raise errors.bad_request("limit must be a non-negative integer")
            listed = api.list(rt, route.namespace, q.get("labelSelector", ""), q.get("fieldSelector", ""), limit,
                              q.get("continue", ""))
            if "as=Table" in (self.headers.get("Accept") or ""):
                self._respond_objects(rt, listed.items, listed.metadata, {})
            else:
                self._send(200, raw=listed.encoded())
            return
        if self.command == "POST":
            self._audit["verb"] = "create"
            if rt.namespaced and route.namespace is None:
                raise errors.method_not_allowed(f"the server does not allow this method on the requested "
                                                f"resource: {rt.plural} must be created in a namespace")
            result = api.create(rt, route.namespace or "", self._read_body(), self._request())
            self._audit["name"] = result.body.get("metadata", {}).get("name", "")
            self._respond(result)
            return
        if self.command == "DELETE":
            self._audit["verb"] = "deletecollection"
            body = api.delete_collection(rt, route.namespace, q.get("labelSelector", ""),
                                         q.get("fieldSelector", ""), self._delete_options(), self._request())
            self._send(200, body)
            return
        raise errors.method_not_allowed()

    def _object(self, route: _Route) -> None:
        api, rt = self.apiserver.api, route.rt
        namespace = route.namespace or ""
        assert route.name is not None
        if route.subresource == "finalize" and self.command != "PUT" or (route.subresource == "token") != (
                self.command == "POST"):
            raise errors.method_not_allowed()
        if route.subresource == "scale":
            self._scale(route, namespace, route.name)
            return
        if route.subresource == "token":
            self._audit["verb"] = "create"
            self._send(201, self.apiserver.access.token_request(namespace, route.name,
                                                                   self._read_body("TokenRequest")))
            return
        if self.command in ("GET", "HEAD"):
            self._audit["verb"] = "get"
            obj = api.get(rt, namespace, route.name)
            self._respond_objects(rt, [obj], {"resourceVersion": obj["metadata"].get("resourceVersion", "")}, obj,
                                  single=True)
        elif self.command == "PUT":
            self._respond(api.update(rt, namespace, route.name, self._read_body(), self._request(),
                                     route.subresource))
        elif self.command == "PATCH":
            content_type = self.headers.get("Content-Type") or ""
            managed_fields.validate_patch_options(self._query.get("fieldManager"), self._query.get("force"),
                                                  content_type.startswith("application/apply-patch"))
            body = self._read_body()
            if body is None:
                raise errors.bad_request("the patch body is empty")
            self._respond(api.patch(rt, namespace, route.name, self.headers.get("Content-Type") or "", body,
                                    self._request(), route.subresource))
        elif self.command == "DELETE":
            if route.subresource:
                raise errors.method_not_allowed()
            self._respond(api.delete(rt, namespace, route.name, self._delete_options(), self._request()))
        else:
            raise errors.method_not_allowed()

    def _scale(self, route: _Route, namespace: str, name: str) -> None:
        api = self.apiserver.api
        if self.command in ("GET", "HEAD"):
            self._audit["verb"] = "get"
            self._send(200, scale.get(api, route.rt, namespace, name))
        elif self.command == "PUT":
            self._respond(scale.write(api, route.rt, namespace, name, self._request(), body=self._read_body()))
        elif self.command == "PATCH":
            patch = self._read_body()
            if patch is None:
                raise errors.bad_request("the patch body is empty")
            self._respond(scale.write(api, route.rt, namespace, name, self._request(), patch=patch,
                                      content_type=self.headers.get("Content-Type") or ""))
        else:
            raise errors.method_not_allowed()

    def _request(self) -> Request:
        dry_run = self._query.get("dryRun")
        if dry_run not in (None, "All"):
            raise errors.bad_request(f'unsupported dryRun value "{dry_run}": only "All" is supported')
        manager = managed_fields.manager_name(self._query.get("fieldManager"), self.headers.get("User-Agent") or "")
        return Request(user=self._user, dry_run=dry_run == "All", warnings=self._warnings,
                       annotations=self._annotations, manager=manager,
                       force=self._query.get("force", "").lower() == "true")

    def _delete_options(self) -> dict[str, Any]:
        body = self._read_body() or {}
        if not isinstance(body, dict):
            raise errors.bad_request("DeleteOptions must be a JSON object")
        q = self._query
        if "propagationPolicy" in q:
            body["propagationPolicy"] = q["propagationPolicy"]
        if "gracePeriodSeconds" in q:
            body["gracePeriodSeconds"] = _int(q["gracePeriodSeconds"], None)
        if "orphanDependents" in q:
            body["orphanDependents"] = q["orphanDependents"].lower() == "true"
        return body

    def _wants_protobuf(self, body: dict[str, Any]) -> bool:
        """Whether the client prefers Kubernetes protobuf and the answer is of a kind we encode."""
        first = (self.headers.get("Accept") or "").split(",")[0].split(";")[0].strip().lower()
        return first == protobuf.MEDIA_TYPE and protobuf.encodable(body.get("apiVersion", ""), body.get("kind", ""))

    def _respond(self, result: Result) -> None:
        if self._wants_protobuf(result.body):
            self._send(result.code, raw=protobuf.encode(result.body), content_type=protobuf.MEDIA_TYPE)
        elif result.raw is not None:
            self._send(result.code, raw=result.raw)
        else:
            self._send(result.code, result.body)

    def _respond_objects(self, rt: ResourceType, objects: list[dict[str, Any]], list_meta: dict[str, Any],
                         body: dict[str, Any], single: bool = False) -> None:
        accept = self.headers.get("Accept") or ""
        if "as=Table" in accept:
            version = "meta.k8s.io/v1" if "v=v1;" in accept.replace(" ", "") + ";" else "meta.k8s.io/v1beta1"
            include = self._query.get("includeObject", "Metadata")
            self._send(200, to_table(rt, objects, list_meta, include, version))
            return
        if single and self._wants_protobuf(body):
            self._send(200, raw=protobuf.encode(body), content_type=protobuf.MEDIA_TYPE)
            return
        self._send(200, body)

    # --- watch -----------------------------------------------------------------------------------

    def _watch(self, route: _Route) -> None:
        srv, rt, q = self.apiserver, route.rt, self._query
        matches = srv.api.matcher(rt, route.namespace, q.get("labelSelector", ""), q.get("fieldSelector", ""))
        rv_text = q.get("resourceVersion", "")
        since: int | None = None
        if rv_text not in ("", "0"):
            try:
                since = int(rv_text)
            except ValueError:
                raise errors.bad_request(f'invalid resource version "{rv_text}"')
        timeout = _int(q.get("timeoutSeconds"), 1800)
        bookmarks = q.get("allowWatchBookmarks", "").lower() in ("true", "1")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self._code = 200
        try:
            watcher = srv.store.watch(rt.group_resource, matches, since)
        except errors.APIError as err:
            self._chunk(b'{"type":"ERROR","object":' + dumps(err.status()) + b"}\n")
            self._chunk(b"")
            return
        deadline = time.monotonic() + max(timeout, 0)
        last_sent = time.monotonic()
        try:
            while not srv.stopping.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                lines = watcher.take(timeout=min(remaining, 1.0))
                if lines:
                    self._chunk(b"".join(conversion.watch_line(rt, line) for line in lines))
                    last_sent = time.monotonic()
                    # Let the next events pile up a moment: a writer wakes an idle watcher (a thread switch
                    # under the store's lock) for each event otherwise, for every watcher of the resource.
                    time.sleep(WATCH_BATCH_SECONDS)
                    continue
                if watcher.closed:
                    break
                if bookmarks and time.monotonic() - last_sent >= srv.bookmark_interval:
                    rv = srv.store.bookmark_rv(watcher)
                    if rv is not None:
                        self._chunk(dumps({"type": "BOOKMARK", "object": {
                            "kind": rt.kind, "apiVersion": rt.api_version,
                            "metadata": {"resourceVersion": str(rv)}}}) + b"\n")
                        last_sent = time.monotonic()
            self._chunk(b"")
        except OSError:
            self.close_connection = True
        finally:
            watcher.close()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")


def _tls_context(host: str) -> tuple[KeyPair, ssl.SSLContext]:
    ca = make_ca("velashard-dev-apiserver-ca")
    hosts = list(dict.fromkeys([host if host not in ("", "0.0.0.0", "::") else "127.0.0.1", "127.0.0.1",
                                "localhost", "kubernetes.default.svc"]))
    serving = make_serving_cert(ca, hosts)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory() as tmp:  # ssl loads keys from files only
        cert, key = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
        with open(cert, "wb") as fh:
            fh.write(serving.cert_pem + ca.cert_pem)
        with open(key, "wb") as fh:
            fh.write(serving.key_pem)
        context.load_cert_chain(cert, key)
    return ca, context


def openapi_v3(types: Registry, group_version_path: str) -> dict[str, Any]:
    """OpenAPI v3 discovery: PATCH takes fieldValidation (without it kubectl refuses to apply), and the
    schemas of the built-in kinds (for kubectl explain), derived from the official client's models.
    Custom resources' schemas are not published, so kubectl computes merge patches for them.
    """
    if not group_version_path:
        paths = {}
        for group, versions in types.group_versions().items():
            for version in versions:
                gv = f"apis/{group}/{version}" if group else f"api/{version}"
                paths[gv] = {"serverRelativeURL": f"/openapi/v3/{gv}?hash=velashard"}
        return {"paths": paths}
    parts = group_version_path.split("/")
    group, version = ("", parts[1]) if parts[0] == "api" else (parts[1] if len(parts) > 1 else "",
                                                               parts[2] if len(parts) > 2 else "")
    operations: dict[str, Any] = {}
    kinds = [(rt.group, rt.version, rt.kind) for rt in types.resources_in(group, version) if not rt.is_custom]
    if kinds:  # what every group-version document of kube-apiserver also carries
        kinds += [("", "v1", "Status"), ("meta.k8s.io", "v1", "DeleteOptions")]
        if any((g, rt_plural) in SCALABLE for g, _, rt_plural in
               [(rt.group, rt.version, rt.plural) for rt in types.resources_in(group, version)]):
            kinds.append(("autoscaling", "v1", "Scale"))
    for rt in types.resources_in(group, version):
        prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
        scope = "/namespaces/{namespace}" if rt.namespaced else ""
        operations[f"{prefix}{scope}/{rt.plural}/{{name}}"] = {"patch": {
            "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
                           {"name": "dryRun", "in": "query", "schema": {"type": "string"}}],
            "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": rt.kind},
            "responses": {"200": {"description": "OK"}}}}
    return {"openapi": "3.0.0", "info": {"title": "velashard embedded API server", "version": __version__},
            "paths": operations, "components": {"schemas": openapi_builtin.schemas_for(kinds)}}


def _api_group(group: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": entries,
            "preferredVersion": entries[0]}


def _not_found_path(path: str) -> errors.APIError:
    return errors.APIError(404, "NotFound", f"the server could not find the requested resource ({path})",
                           {"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]})


def _int(text: str | None, default: Any) -> Any:
    if text in (None, ""):
        return default
    try:
        return int(text)  # type: ignore[arg-type]
    except ValueError:
        raise errors.bad_request(f'invalid integer "{text}"')
