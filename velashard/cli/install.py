"""`velashard install`: install or upgrade the CRDs and built-in definitions."""

from __future__ import annotations

import argparse

from velashard.cli.flags import client as cli_client
from velashard.kube import errors


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The global flags (--kubeconfig), and what the shard-label guard trusts."""
    parser.add_argument("--enable-sharding", action="store_true",
                        help="also install the shard-label guard (a ValidatingAdmissionPolicy): only the controller "
                             "and shard admins may set or change an app's controller.core.oam.dev/scheduled-shard-id")
    parser.add_argument("--controller-identity", default="system:serviceaccount:vela-system:vela-core",
                        help="the user the master runs as (default system:serviceaccount:vela-system:vela-core)")
    parser.add_argument("--shard-admin-users", default="", help="comma-separated users who may move applications")
    parser.add_argument("--shard-admin-groups", default="", help="comma-separated groups who may move applications")


def run(args: argparse.Namespace) -> int:
    from velashard.core.install import install

    client = cli_client(args.kubeconfig, shard_id="install")
    try:
        users = [args.controller_identity] + [u for u in args.shard_admin_users.split(",") if u] \
            if args.enable_sharding else None
        install(client, report=print, shard_guard_users=users,
                shard_guard_groups=[g for g in args.shard_admin_groups.split(",") if g])
    except errors.KubeError as err:
        print(f"velashard install: {err}")
        return 1
    return 0
