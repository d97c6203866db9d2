"""The admission webhook server: a Flask app served over HTTPS by gunicorn (threaded workers).

The master runs it as a child process (`python -m velashard.webhook.server ...`), because gunicorn's
arbiter wants a main thread and forks its workers; each worker builds its own shard discovery after
the fork, so no thread or lock crosses a fork.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from typing import Any, Callable, Mapping

from flask import Flask, Response, request
from gunicorn.app.base import BaseApplication

from velashard.kube.client import KubeClient
from velashard.kube.manager import Manager
from prometheus_client import CONTENT_TYPE_LATEST

from velashard.observability import WEBHOOK_LATENCY, metrics_text, setup_logging
from velashard.sharding.discovery import ShardDiscovery
from velashard.sharding.placement import PlacementState, place
from velashard.sharding.proof import Signer
from velashard.sharding.strategies import STRATEGIES, pinned_shard
from velashard.webhook.lifetime import die_with_parent, set_parent_death_signal
from velashard.webhook.lookups import ClusterLookups
from velashard.webhook.decisions import (MutationContext, ReviewError, ValidationContext, mutate, parse_review,
                                         validate, validate_definition)

log = logging.getLogger("velashard.webhook")

MUTATING_PATH = "/mutating-core-oam-dev-v1beta1-applications"
VALIDATING_PATH = "/validating-core-oam-dev-v1beta1-applications"
DEFINITIONS_PATH = "/validating-core-oam-dev-v1beta1-definitions"
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
    import json
    return json.dumps(obj, separators=(",", ":"))


def _error(code: int, message: str) -> Response:
    return Response(_dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                            "message": message}), status=code, mimetype="application/json")


class GunicornServer(BaseApplication):
    """gunicorn embedded: the app is built in the worker, after the fork."""

    def __init__(self, factory: Any, options: dict[str, Any]):
        self._factory = factory
        self._options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self._options.items():
            self.cfg.set(key, value)

    def load(self) -> Flask:
        return self._factory()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="velashard-webhook")
    p.add_argument("--kubeconfig")
    p.add_argument("--bind", required=True)
    p.add_argument("--certfile", required=True)
    p.add_argument("--keyfile", required=True)
    p.add_argument("--signing-key-file", required=True,
                   help="PEM Ed25519 private key that proves the shards this webhook assigns")
    p.add_argument("--namespace", required=True)
    p.add_argument("--schedulable-shards", default="")
    p.add_argument("--shard-scheduler", choices=STRATEGIES, default="round-robin")
    p.add_argument("--disable-auto-schedule", action="store_true")
    p.add_argument("--validate-components", action="store_true")
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--log-format", default="text")
    p.add_argument("--parent-pid", type=int, default=0, help="exit when this process (the master) ends")
    args = p.parse_args(argv)
    setup_logging("master", args.log_format, "info")
    if args.parent_pid:
        die_with_parent(args.parent_pid)
    with open(args.signing_key_file, "rb") as fh:
        signer = Signer.from_pem(fh.read())

    def factory() -> Flask:
        client = KubeClient.from_kubeconfig(args.kubeconfig, shard_id="master", component="velashard-webhook")
        manager = Manager(client, "master")
        static = [s for s in args.schedulable_shards.split(",") if s] or None
        discovery = ShardDiscovery(manager, args.namespace, static)
        manager.start_controllers()
        lookups = ClusterLookups(client, args.namespace)
        pick = make_pick(args.shard_scheduler, discovery.available, lookups.loads,
                         lambda namespace: pinned_shard(lookups.namespace(namespace)))
        mutation = MutationContext(pick=pick, signer=signer, auto_schedule=not args.disable_auto_schedule)
        validation = ValidationContext(check_components=lookups.check_components if args.validate_components
                                       else None)
        return create_app(mutation, validation)

    # One thread per busy connection (webhook/worker.py); idle connections are kept 75 s, longer than the API
    # server keeps an idle one (30 s), so that it never sends a request on one this side just closed.
    GunicornServer(factory, {"bind": args.bind, "workers": 1, "threads": args.threads, "keepalive": 75,
                             "worker_class": "velashard.webhook.worker.StickyThreadWorker",
                             "certfile": args.certfile, "keyfile": args.keyfile, "accesslog": None,
                             "errorlog": "-", "loglevel": "warning", "timeout": 30, "graceful_timeout": 5,
                             "proc_name": "velashard-webhook",
                             # Workers go with the arbiter even if it is killed without a chance to stop them.
                             "post_fork": lambda _arbiter, _worker: set_parent_death_signal(signal.SIGKILL)}).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
