"""`velashard install`: install or upgrade the CRDs and built-in definitions."""

from __future__ import annotations

import argparse

from velashard.cli.usage import UsageError
from velashard.kube import errors
from velashard.kube.client import KubeClient


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, else $KUBECONFIG or ~/.kube/config)")


def run(args: argparse.Namespace) -> int:
    from velashard.core.install import install

    try:
        client = KubeClient.from_kubeconfig(args.kubeconfig, shard_id="install", component="velashard-cli")
    except Exception as err:  # a config problem is the user's to fix
        raise UsageError(f"cannot load Kubernetes configuration: {err}")
    try:
        install(client, report=print)
    except errors.KubeError as err:
        print(f"velashard install: {err}")
        return 1
    return 0
