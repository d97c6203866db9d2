"""`velashard install`: install or upgrade the CRDs and built-in definitions."""

from __future__ import annotations

import argparse

from velashard.cli.flags import client as cli_client
from velashard.kube import errors


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Only the global flags (--kubeconfig)."""


def run(args: argparse.Namespace) -> int:
    from velashard.core.install import install

    client = cli_client(args.kubeconfig, shard_id="install")
    try:
        install(client, report=print)
    except errors.KubeError as err:
        print(f"velashard install: {err}")
        return 1
    return 0
