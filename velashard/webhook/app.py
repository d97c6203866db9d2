"""The admission webhooks' Flask app: the admission paths (parse, decide with webhook/decisions.py, answer), metrics
and health. Built in gunicorn's worker (webhook/server.py), never imported by the arbiter."""

from __future__ import annotations

import json
import logging
import threading
import time
from http import HTTPStatus
from typing import Any, Callable, Iterable, Mapping

from flask import Flask, Response, request
from prometheus_client import CONTENT_TYPE_LATEST

from velashard.observability import WEBHOOK_LATENCY, metrics_text
from velashard.sharding.placement import PlacementState, place
from velashard.webhook.decisions import (MutationContext, ReviewError, ValidationContext, mutate, parse_review,
                                         validate, validate_definition)
from velashard.webhook.paths import DEFINITIONS_PATH, MAX_REVIEW_BYTES, MUTATING_PATH, VALIDATING_PATH

log = logging.getLogger("velashard.webhook")


def make_pick(strategy: str, available: Callable[[], list[str]], loads: Callable[[], Mapping[str, int]],
              pin_for: Callable[[str], str | None]) -> Callable[[dict[str, Any]], str | None]:
    """The mutating webhook's shard choice: placement over the current shards, loads and namespace pin, with
    one placement state shared by every admission request of this process, so that its own picks count."""
    lock = threading.Lock()
    state = PlacementState(strategy)

    def pick(app: dict[str, Any]) -> str | None:
        nonlocal state
        namespace = (app.get("metadata") or {}).get("namespace") or ""
        current = loads() if strategy == "least-loaded" else None
        pin, shards = pin_for(namespace), available()
        with lock:
            shard, state = place(app, shards, current, pin, state)
        return shard

    return pick


def create_app(mutation: MutationContext, validation: ValidationContext) -> Flask:
    app = Flask("velashard-webhook")

    @app.get("/metrics")
    def metrics() -> Response:
        return Response(metrics_text(), mimetype=CONTENT_TYPE_LATEST.split(";")[0])

    @app.get("/healthz")
    def healthz() -> Response:
        return app.response_class("ok\n", mimetype="text/plain")

    @app.errorhandler(404)
    def not_found(_err: Any) -> Response:
        return _error(404, f"no webhook at {request.path}")

    @app.errorhandler(405)
    def not_allowed(_err: Any) -> Response:
        return _error(405, f"{request.method} is not allowed at {request.path}; webhooks take POST")

    paths = AdmissionPaths(app.wsgi_app, {
        MUTATING_PATH: ("mutating", lambda req: mutate(req, mutation)),
        VALIDATING_PATH: ("validating", lambda req: validate(req, validation)),
        DEFINITIONS_PATH: ("definitions", validate_definition)})
    app.wsgi_app = paths  # type: ignore[method-assign]
    app.admission_paths = paths  # type: ignore[attr-defined]
    return app


class AdmissionPaths:
    """WSGI in front of Flask for the admission paths, which every create and update of an app waits on: a body in,
    a decision out, without Flask's request context, URL map and response object (0.22 ms a call with them,
    0.07 without). Everything else (metrics, health, unknown paths) is Flask's. The webhook worker
    (webhook/worker.py) calls `answer` directly for the plain requests of a kept-alive connection."""

    def __init__(self, rest: Callable[..., Iterable[bytes]],
                 routes: Mapping[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]]):
        self._rest = rest
        self._routes = routes
        self.paths = frozenset(routes)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or ""
        if path not in self._routes:
            return self._rest(environ, start_response)
        method = environ.get("REQUEST_METHOD") or ""
        body = environ["wsgi.input"].read(MAX_REVIEW_BYTES + 1) if method == "POST" else b""
        code, answer, headers = self.answer(path, method, body)
        start_response(f"{code} {HTTPStatus(code).phrase}", headers)
        return [answer]

    def answer(self, path: str, method: str, body: bytes) -> tuple[int, bytes, list[tuple[str, str]]]:
        """The status, body and headers that answer `method` at the admission path `path` with `body`."""
        if method != "POST":
            return _answer(405, _error_body(405, f"{method} is not allowed at {path}; webhooks take POST"),
                           [("Allow", "POST")])
        if len(body) > MAX_REVIEW_BYTES:
            return _answer(413, _error_body(413, f"the AdmissionReview is larger than {MAX_REVIEW_BYTES} bytes"))
        name, decide = self._routes[path]
        started = time.perf_counter()
        try:
            answer = _dumps(decide(parse_review(body))).encode()
        except ReviewError as err:
            return _answer(400, _error_body(400, f"malformed AdmissionReview: {err}"))
        except Exception:  # a bug must not become a 5xx: answer 400 (a failed call under the policy) and log it
            log.exception("webhook decision failed", extra={"fields": {"webhook": name}})
            return _answer(400, _error_body(
                400, "the webhook could not decide on this request; see the controller's log"))
        finally:
            WEBHOOK_LATENCY.labels(webhook=name).observe(time.perf_counter() - started)
        return _answer(200, answer)


def _answer(code: int, body: bytes,
            headers: list[tuple[str, str]] | None = None) -> tuple[int, bytes, list[tuple[str, str]]]:
    return code, body, [("Content-Type", "application/json"), ("Content-Length", str(len(body))), *(headers or [])]


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _error_body(code: int, message: str) -> bytes:
    return _dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                   "message": message}).encode()


def _error(code: int, message: str) -> Response:
    return Response(_error_body(code, message), status=code, mimetype="application/json")
