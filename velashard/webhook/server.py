"""The admission webhook server: gunicorn serving the Flask app (webhook/app.py) over HTTPS, threaded.

The master runs it as a child process (`python -m velashard.webhook.server ...`), because gunicorn's
arbiter wants a main thread and forks its workers; each worker builds its own app and shard discovery after
the fork, so no thread or lock crosses a fork. The arbiter only supervises: Flask, the app and what it needs
are imported in the worker, which keeps the arbiter some 15 MiB smaller.
"""

from __future__ import annotations

import argparse
import gc
import signal
import sys
from typing import Any

from gunicorn.app.base import BaseApplication

from velashard.core.authors import AuthConfig
from velashard.observability import setup_logging
from velashard.sharding.proof import Signer
from velashard.sharding.strategies import STRATEGIES
from velashard.webhook.lifetime import die_with_parent, set_parent_death_signal
from velashard.webhook.tls import ReloadingContext
from velashard.webhook.worker import worker_class


class GunicornServer(BaseApplication):
    """gunicorn embedded: the app is built in the worker, after the fork."""

    def __init__(self, factory: Any, options: dict[str, Any]):
        self._factory = factory
        self._options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self._options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        return self._factory()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="velashard-webhook")
    p.add_argument("--kubeconfig")
    p.add_argument("--bind", required=True)
    p.add_argument("--certfile", required=True)
    p.add_argument("--keyfile", required=True)
    p.add_argument("--signing-key-file", default=None,
                   help="PEM Ed25519 private key that proves the shards this webhook assigns (sharding; without "
                        "it the webhook schedules nothing)")
    p.add_argument("--authenticate-applications", action="store_true",
                   help="record who writes each Application (app.oam.dev/username and app.oam.dev/group)")
    p.add_argument("--authentication-with-user", default="true", choices=["true", "false"])
    p.add_argument("--authentication-group-pattern", default=AuthConfig().group_pattern)
    p.add_argument("--controller-users", default="",
                   help="comma-separated users whose writes never change an app's recorded author")
    p.add_argument("--namespace", required=True)
    p.add_argument("--schedulable-shards", default="")
    p.add_argument("--shard-scheduler", choices=STRATEGIES, default="round-robin")
    p.add_argument("--disable-auto-schedule", action="store_true")
    p.add_argument("--validate-components", action="store_true")
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--worker-class", default=None,
                   help="gunicorn's worker class (default: velashard's for the gunicorn releases it was tested with, "
                        "else gthread; hack/bench_webhook.py --compare-workers measures them side by side)")
    p.add_argument("--http-parser", default=None, help="gunicorn's http_parser setting (gunicorn 25 and later)")
    p.add_argument("--log-format", default="text")
    p.add_argument("--parent-pid", type=int, default=0, help="exit when this process (the master) ends")
    args = p.parse_args(argv)
    setup_logging("master", args.log_format, "info")
    if args.parent_pid:
        die_with_parent(args.parent_pid)
    signer = None
    if args.signing_key_file:
        with open(args.signing_key_file, "rb") as fh:
            signer = Signer.from_pem(fh.read())
    auth = AuthConfig(enabled=True, with_user=args.authentication_with_user == "true",
                      group_pattern=args.authentication_group_pattern) if args.authenticate_applications else None

    def factory() -> Any:
        # In the worker, after the fork: the arbiter never imports the app and what it needs.
        from velashard.kube.client import KubeClient
        from velashard.kube.manager import Manager
        from velashard.sharding.discovery import ShardDiscovery
        from velashard.webhook.app import create_app, make_pick
        from velashard.webhook.decisions import MutationContext, ValidationContext
        from velashard.webhook.lookups import ClusterLookups, NamespacePins

        client = KubeClient.from_kubeconfig(args.kubeconfig, shard_id="master", component="velashard-webhook")
        lookups = ClusterLookups(client, args.namespace)
        pick = None
        if signer is not None:
            manager = Manager(client, "master")
            static = [s for s in args.schedulable_shards.split(",") if s] or None
            discovery = ShardDiscovery(manager, args.namespace, static)
            pins = NamespacePins(manager, lookups)
            manager.start_controllers()
            pick = make_pick(args.shard_scheduler, discovery.available, lookups.loads, pins.shard_for)
        mutation = MutationContext(pick=pick, signer=signer, auto_schedule=not args.disable_auto_schedule,
                                   auth=auth, controllers=tuple(u for u in args.controller_users.split(",") if u))
        validation = ValidationContext(check_components=lookups.check_components if args.validate_components
                                       else None)
        app = create_app(mutation, validation)
        # What start-up built (modules, Flask, the client) lives as long as the worker: frozen, it is never walked
        # again, where the worker's first full collection would otherwise hold every admission call for some 20 ms.
        gc.collect()
        gc.freeze()
        return app

    # One thread per busy connection (webhook/worker.py); idle connections are kept 75 s, longer than the API
    # server keeps an idle one (30 s), so that it never sends a request on one this side just closed. No access
    # log and no request hooks: the worker answers most admission calls without gunicorn's request machinery.
    GunicornServer(factory, {"bind": args.bind, "workers": 1, "threads": args.threads, "keepalive": 75,
                             "worker_class": args.worker_class or worker_class(),
                             **({"http_parser": args.http_parser} if args.http_parser else {}),
                             "certfile": args.certfile, "keyfile": args.keyfile, "accesslog": None,
                             # A new connection is served from the files as they are now (webhook/tls.py).
                             "ssl_context": ReloadingContext(),
                             "errorlog": "-", "loglevel": "warning", "timeout": 30, "graceful_timeout": 5,
                             "proc_name": "velashard-webhook",
                             # Workers go with the arbiter even if it is killed without a chance to stop them.
                             "post_fork": lambda _arbiter, _worker: set_parent_death_signal(signal.SIGKILL)}).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
