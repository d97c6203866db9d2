"""`velashard resume APP -n NS`: resume an application's suspended workflow."""

from __future__ import annotations

import argparse

from velashard.apis.oam import APPLICATIONS
from velashard.cli.flags import client as cli_client
from velashard.cli.usage import UsageError
from velashard.kube import errors


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("app", help="application name")
    parser.add_argument("-n", "--namespace", default="default")


def run(args: argparse.Namespace) -> int:
    client = cli_client(args.kubeconfig)
    try:
        app = client.get(APPLICATIONS, args.app, args.namespace)
    except errors.NotFound:
        raise UsageError(f"application {args.namespace}/{args.app} not found")
    workflow = (app.get("status") or {}).get("workflow") or {}
    if not workflow.get("suspend"):
        print(f"application {args.namespace}/{args.app} is not suspended")
        return 0
    client.patch_status(APPLICATIONS, args.app, {"status": {"workflow": {"suspend": False}}}, args.namespace)
    print(f"application {args.namespace}/{args.app} resumed")
    return 0
