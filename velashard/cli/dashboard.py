"""`velashard dashboard`: the web UI on 127.0.0.1, reading the cluster with your own kubeconfig, until Ctrl-C."""

from __future__ import annotations

import argparse
import errno
import signal
import sys
import threading

from velashard.cli.flags import client as cli_client, duration
from velashard.cli.shards import DEFAULT_NAMESPACE
from velashard.cli.usage import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=8090, help="port on 127.0.0.1 (default 8090; 0: a free one)")
    parser.add_argument("-n", "--namespace", action="append", default=[],
                        help="read applications in this namespace only (repeat for more); default: every namespace, "
                             "which you must be allowed to list")
    parser.add_argument("--controller-namespace", default=DEFAULT_NAMESPACE,
                        help="where the shard pods and Leases are (default $POD_NAMESPACE or vela-system)")
    parser.add_argument("--stuck-after", type=duration, default=300.0,
                        help="an app not converged for longer needs attention (Go duration, default 5m)")


def run(args: argparse.Namespace) -> int:
    from velashard.dashboard.live import Hub
    from velashard.dashboard.server import Dashboard
    from velashard.dashboard.sources import Sources, may
    from velashard.apis.oam import APPLICATIONS

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: must be between 0 and 65535")
    client = cli_client(args.kubeconfig, shard_id="dashboard")
    namespaces = sorted(set(args.namespace)) or None
    for ns in namespaces or [None]:
        if not may(client, "list", APPLICATIONS, ns):
            where = f"in namespace {ns}" if ns else "in every namespace"
            raise UsageError(f"you may not list applications {where}; name the namespaces you may read with "
                             "--namespace")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    hub = Hub().start()
    sources = Sources(client, namespaces, args.controller_namespace, hub)
    sources.start()
    dashboard = Dashboard(client, sources, args.stuck_after)
    try:
        dashboard.serve(args.port, lambda url: print(f"velashard dashboard: {url}", flush=True), stop)
    except OSError as err:
        if err.errno == errno.EADDRINUSE:
            raise UsageError(f"--port {args.port}: the port is in use; choose another, or 0 for a free one")
        raise UsageError(f"cannot serve: {err}")
    finally:
        hub.stop()
        sources.stop()
    print("velashard dashboard: stopped", file=sys.stderr)
    return 0
