"""`velashard addon list | enable NAME key=value ... [--dry-run] | disable NAME`."""

from __future__ import annotations

import argparse

import yaml

from velashard.apis.oam import APPLICATIONS
from velashard.cli.flags import client as cli_client
from velashard.cli.shards import DEFAULT_NAMESPACE, admin_signer
from velashard.cli.usage import UsageError
from velashard.core.addons import AddonError, list_addons, load_addon, parse_parameters
from velashard.kube import errors
from velashard.kube.apply import upsert
from velashard.sharding.placement import shard_of
from velashard.sharding.proof import with_proof


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("list", help="list the addons")
    enable = sub.add_parser("enable", help="enable an addon")
    enable.add_argument("name")
    enable.add_argument("parameters", nargs="*", metavar="key=value")
    enable.add_argument("--dry-run", action="store_true", help="print what would be applied")
    enable.add_argument("--controller-namespace", default=DEFAULT_NAMESPACE,
                        help="where the controller keeps its shard signing key, which proves the shard an addon "
                             "pins its applications to (default $POD_NAMESPACE or vela-system)")
    disable = sub.add_parser("disable", help="disable an addon (deletes what it created)")
    disable.add_argument("name")


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "list":
            for addon in list_addons():
                print(f'{addon.name:<28} {addon.metadata.get("version", ""):<8} {addon.metadata.get("description", "")}')
            return 0
        addon = load_addon(args.name)
        if args.action == "enable":
            objects = addon.render(parse_parameters(args.parameters, addon))
            if args.dry_run:
                print(yaml.safe_dump_all(objects, sort_keys=False), end="")
                return 0
            client = cli_client(args.kubeconfig)
            if any(shard_of(obj) for obj in objects):
                signer = admin_signer(client, args.controller_namespace)
                objects = [with_proof(obj, signer) for obj in objects]
            for obj in objects:
                result = upsert(client, APPLICATIONS, obj)
                print(f'application {obj["metadata"]["namespace"]}/{obj["metadata"]["name"]} {result}')
            print(f"addon {addon.name} enabled")
            return 0
        client = cli_client(args.kubeconfig)
        for obj in addon.render({}):
            try:
                client.delete(APPLICATIONS, obj["metadata"]["name"], obj["metadata"]["namespace"])
                print(f'application {obj["metadata"]["namespace"]}/{obj["metadata"]["name"]} deleted')
            except errors.NotFound:
                print(f'application {obj["metadata"]["namespace"]}/{obj["metadata"]["name"]} was not enabled')
        print(f"addon {addon.name} disabled")
        return 0
    except AddonError as err:
        raise UsageError(str(err))
