"""`velashard apiserver`: run the embedded Kubernetes API server in the foreground."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from velashard.cli.usage import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1); anything but a loopback address or "
                             "localhost needs --allow-remote")
    parser.add_argument("--allow-remote", action="store_true",
                        help="allow --host to be reachable from other machines (e.g. 0.0.0.0)")
    parser.add_argument("--token-auth-file", metavar="FILE",
                        help='also accept the static tokens in FILE, kube-apiserver\'s format: '
                             'token,user,uid,"group1,group2" per line (tokens of at least 16 characters)')
    parser.add_argument("--port", type=int, default=6443, help="port to listen on; 0 picks a free one")
    parser.add_argument("--kubeconfig-out", metavar="FILE", help="write a kubeconfig for this server to FILE")
    parser.add_argument("--watch-history", type=int, default=10_000, metavar="N",
                        help="events kept for watches that resume from a resourceVersion; older ones get 410 Expired")
    parser.add_argument("--simulate-workloads", action="store_true",
                        help="give Deployments, StatefulSets, DaemonSets and Jobs the status their controllers would,"
                             " and schedule and run Pods on simulated nodes")
    parser.add_argument("--nodes", type=int, default=None, metavar="N",
                        help="simulated nodes to register, with heartbeat Leases "
                             "(default 1 with --simulate-workloads, else 0)")
    parser.add_argument("--service-endpoint", action="append", default=[], metavar="NS/NAME=HOST:PORT",
                        help="where a Service named by a webhook's clientConfig.service is reached (repeatable; a "
                             "Service given more than once is reached at each, a connection at one chosen at random)")


def parse_service_endpoints(values: list[str]) -> dict[str, list[str]]:
    endpoints: dict[str, list[str]] = {}
    for value in values:
        ref, sep, address = value.partition("=")
        host, colon, port = address.rpartition(":")
        if not sep or ref.count("/") != 1 or not all(ref.split("/")) or not colon or not host or not port.isdigit():
            raise UsageError(f"--service-endpoint {value!r}: expected NS/NAME=HOST:PORT, e.g. "
                             f"vela-system/vela-webhook=127.0.0.1:9443")
        endpoints.setdefault(ref, []).append(address)
    return endpoints


def _read_token_file(path: str) -> list[tuple[str, str, str, list[str]]]:
    from velashard.apiserver.auth.authn import read_token_file

    try:
        return read_token_file(path)
    except OSError as err:
        raise UsageError(f"--token-auth-file {path}: {err.strerror or err}")
    except ValueError as err:
        raise UsageError(f"--token-auth-file {err}")


def run(args: argparse.Namespace) -> int:
    from velashard.heap import freeze_survivors
    from velashard.apiserver.http.server import APIServer, is_loopback

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: must be between 0 and 65535")
    if args.watch_history < 1:
        raise UsageError(f"--watch-history {args.watch_history}: must be at least 1")
    if args.nodes is not None and not 0 <= args.nodes <= 250:
        raise UsageError(f"--nodes {args.nodes}: must be between 0 and 250")
    endpoints = parse_service_endpoints(args.service_endpoint)
    if not is_loopback(args.host) and not args.allow_remote:
        raise UsageError(f"--host {args.host}: reachable from other machines; add --allow-remote to listen there "
                         f"anyway (or use 127.0.0.1)")
    static_tokens = _read_token_file(args.token_auth_file) if args.token_auth_file else []
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        server = APIServer(host=args.host, port=args.port, watch_history=args.watch_history,
                           simulate_workloads=args.simulate_workloads, service_endpoints=endpoints,
                           nodes=args.nodes, allow_remote=args.allow_remote)
    except OSError as err:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {err.strerror or err}")
    for token, user, uid, groups in static_tokens:
        server.access.authn.add_token(token, user, groups, uid)
    if args.kubeconfig_out:
        server.write_kubeconfig(args.kubeconfig_out)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    freeze_survivors()
    server.start()
    print(f"velashard apiserver listening on {server.url}", flush=True)
    stop.wait()
    server.stop()
    return 0
