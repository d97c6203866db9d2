"""`velashard resume APP -n NS`: resume an application's suspended workflow (`velashard workflow resume`)."""

from __future__ import annotations

import argparse

from velashard.apis.oam import APPLICATIONS
from velashard.cli.flags import client as cli_client
from velashard.cli.usage import UsageError
from velashard.kube import errors
from velashard.workflow import operations


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("app", help="application name")
    parser.add_argument("-n", "--namespace", default="default")


def run(args: argparse.Namespace) -> int:
    client = cli_client(args.kubeconfig)
    try:
        app = client.get(APPLICATIONS, args.app, args.namespace)
    except errors.NotFound:
        raise UsageError(f"application {args.namespace}/{args.app} not found")
    try:
        resumed = operations.resume((app.get("status") or {}).get("workflow"))
    except operations.OperationError as err:
        raise UsageError(f"application {args.namespace}/{args.app}: {err}") from None
    if resumed is None:
        print(f"application {args.namespace}/{args.app} is not suspended")
        return 0
    client.update_status(APPLICATIONS, dict(app, status={**(app.get("status") or {}), "workflow": resumed}))
    print(f"application {args.namespace}/{args.app} resumed")
    return 0
