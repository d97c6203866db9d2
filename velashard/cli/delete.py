"""`velashard delete APP [-n NS] [-y] [--wait=true|false]`: delete an application as `vela delete` does; by
default it waits until the app is gone, that is until the controller has garbage-collected what it made."""

from __future__ import annotations

import argparse
import sys
import time

from velashard.apis.oam import APPLICATIONS
from velashard.cli.flags import GoBool, client as cli_client, duration
from velashard.kube import errors

POLL = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("app", help="application name")
    parser.add_argument("-n", "--namespace", default="default")
    parser.add_argument("-y", "--yes", action="store_true", help="assume yes: do not ask for confirmation")
    parser.add_argument("-w", "--wait", action=GoBool, default=True,
                        help="wait until the application and what it made are deleted (default true)")
    parser.add_argument("--timeout", type=duration, default=300.0, help="how long --wait waits (default 5m)")


def _ask(question: str) -> bool:
    try:
        answer = input(f"{question} (y/n)")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def run(args: argparse.Namespace) -> int:
    client = cli_client(args.kubeconfig)
    where = f"{args.namespace}/{args.app}"
    try:
        app = client.get(APPLICATIONS, args.app, args.namespace)
    except errors.NotFound:
        print(f"application {where} already deleted")
        return 0
    except errors.KubeError as err:
        print(f"Error: failed to get application {where}: {err}", file=sys.stderr)
        return 1
    if not args.yes and not _ask(f"Are you sure to delete the application {where}"):
        print(f"skip deleting application {where}")
        return 0
    print(f"Start deleting application {where}")
    try:
        if not app["metadata"].get("deletionTimestamp"):
            client.delete(APPLICATIONS, args.app, args.namespace)
        deadline = time.monotonic() + args.timeout
        while args.wait:
            try:
                client.get(APPLICATIONS, args.app, args.namespace)
            except errors.NotFound:
                break  # its finalizer held it until its resources were collected
            if time.monotonic() > deadline:
                print(f"Error: timed out waiting for application {where} to be deleted", file=sys.stderr)
                return 1
            time.sleep(POLL)
    except errors.NotFound:
        pass
    except errors.KubeError as err:
        print(f"Error: failed to delete application {where}: {err}", file=sys.stderr)
        return 1
    print(f"Delete application {where} succeeded")
    return 0
