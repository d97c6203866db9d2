"""`velashard dev`: the embedded cluster with a master and N shards, and a live view, until Ctrl-C."""

from __future__ import annotations

import argparse
import errno
import signal
import threading

from velashard.cli.usage import UsageError
from velashard.workflow.egress import parse_allowed


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shards", type=int, default=2, help="slave shards to run (default 2)")
    parser.add_argument("--apps", type=int, default=0, help="sample applications to create (default 0)")
    parser.add_argument("--dir", default=".velashard", help="where kubeconfig, processes.json and logs go")
    parser.add_argument("--port", type=int, default=0, help="API server port (default: a free one)")
    parser.add_argument("--workflow-http-allow", default="", metavar="ADDRESS[:PORT],...",
                        help="servers on this machine that workflow steps may call (the chart's workflow.http.allow; "
                             "loopback is refused otherwise), e.g. 127.0.0.1:8080")
    parser.add_argument("--dashboard-port", type=int, default=0,
                        help="port of the dashboard on 127.0.0.1 (default: a free one)")
    parser.add_argument("--set", dest="values", action="append", default=[], metavar="KEY=VALUE",
                        help="a chart value, as Helm's --set takes it (dotted keys, e.g. replicaCount=2 or "
                             "sharding.scheduler=consistent-hash; repeatable), over dev's own")


def parse_values(items: list[str]) -> dict:
    """Helm's --set KEY=VALUE for scalars: dotted keys make nested maps, values read as YAML scalars (2, true, a)."""
    import yaml

    values: dict = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key or any(not part for part in key.split(".")):
            raise UsageError(f"--set {item!r}: expected KEY=VALUE, e.g. replicaCount=2")
        try:
            value = yaml.safe_load(raw) if raw else ""
        except yaml.YAMLError:
            value = raw
        if isinstance(value, (dict, list)):
            value = raw  # Helm's --set takes scalars here; lists and maps are its own syntax
        *parents, leaf = key.split(".")
        node = values
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise UsageError(f"--set {item!r}: {part} is already a value, not a map")
            node = child
        node[leaf] = value
    return values


def run(args: argparse.Namespace) -> int:
    from velashard.dev.run import run_dev

    if not 0 <= args.shards <= 20:
        raise UsageError(f"--shards {args.shards}: must be between 0 and 20")
    if args.apps < 0:
        raise UsageError(f"--apps {args.apps}: must not be negative")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: must be between 0 and 65535")
    allow = [item.strip() for item in args.workflow_http_allow.split(",") if item.strip()]
    for item in allow:
        try:
            parse_allowed(item)
        except ValueError as err:
            raise UsageError(f"--workflow-http-allow: {err}")
    values = parse_values(args.values)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        return run_dev(args.shards, args.apps, args.dir, args.port, stop=stop, log_format=args.log_format,
                       log_level=args.log_level, http_allow=allow, dashboard_port=args.dashboard_port,
                       values=values)
    except OSError as err:
        if err.errno == errno.EADDRINUSE:
            raise UsageError(f"--port {args.port}: the port is in use (another velashard dev?); choose another, "
                             "or leave --port out for a free one")
        raise UsageError(f"cannot start: {err}")
