"""The admission webhooks' Flask app: the admission paths (parse, decide with webhook/decisions.py, answer), metrics
and health. Built in gunicorn's worker (webhook/server.py), never imported by the arbiter."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any, Callable, Mapping

from flask import Flask, Response, request
from prometheus_client import CONTENT_TYPE_LATEST

from velashard.observability import WEBHOOK_LATENCY, metrics_text
from velashard.sharding.placement import PlacementState, place
from velashard.webhook.decisions import (MutationContext, ReviewError, ValidationContext, mutate, parse_review,
                                         validate, validate_definition)
from velashard.webhook.paths import DEFINITIONS_PATH, MUTATING_PATH, VALIDATING_PATH

log = logging.getLogger("velashard.webhook")

MAX_REVIEW_BYTES = 4 * 1024 * 1024


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

    def handle(name: str, decide: Any) -> Response:
        started = time.perf_counter()
        try:
            body = request.get_data(cache=False)
            if len(body) > MAX_REVIEW_BYTES:
                return _error(413, f"the AdmissionReview is larger than {MAX_REVIEW_BYTES} bytes")
            review = parse_review(body)
            answer = decide(review)
        except ReviewError as err:
            return _error(400, f"malformed AdmissionReview: {err}")
        except Exception:  # a bug must not become a 5xx: answer 400 (a failed call under the policy) and log it
            log.exception("webhook decision failed", extra={"fields": {"webhook": name}})
            return _error(400, "the webhook could not decide on this request; see the controller's log")
        finally:
            WEBHOOK_LATENCY.labels(webhook=name).observe(time.perf_counter() - started)
        return app.response_class(_dumps(answer), status=200, mimetype="application/json")

    @app.post(MUTATING_PATH)
    def mutating() -> Response:
        return handle("mutating", lambda req: mutate(req, mutation))

    @app.post(VALIDATING_PATH)
    def validating() -> Response:
        return handle("validating", lambda req: validate(req, validation))

    @app.post(DEFINITIONS_PATH)
    def validating_definitions() -> Response:
        return handle("definitions", validate_definition)

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

    return app


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _error(code: int, message: str) -> Response:
    return Response(_dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                            "message": message}), status=code, mimetype="application/json")
