"""`velashard reschedule` and `velashard shards`: move an app between shards, and see the shards."""

from __future__ import annotations

import argparse
import os
from datetime import datetime, timezone

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.cli.flags import client as cli_client
from velashard.cli.usage import UsageError
from velashard.apis.validation import is_valid_label_value
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.resources import LEASES, PODS
from velashard.sharding.discovery import POD_SELECTOR, ready_pods_by_shard
from velashard.sharding.keys import SIGNING_KEY_SECRET, SigningKeyError, load_or_create_signing_key
from velashard.sharding.loads import APPS_ANNOTATION, LEASE_LABEL
from velashard.sharding.move import set_shard
from velashard.sharding.proof import Signer

DEFAULT_NAMESPACE = os.environ.get("POD_NAMESPACE", "vela-system")


def add_reschedule_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("app", help="application name")
    parser.add_argument("-n", "--namespace", default="default", help="the application's namespace")
    parser.add_argument("--shard-id", required=True, help="the shard to move the application to")
    parser.add_argument("--force", action="store_true", help="move even to an unknown or unavailable shard")
    parser.add_argument("--controller-namespace", default=DEFAULT_NAMESPACE,
                        help="where the shard pods run (default $POD_NAMESPACE or vela-system)")


def run_reschedule(args: argparse.Namespace) -> int:
    problems = is_valid_label_value(args.shard_id)
    if problems or not args.shard_id:
        raise UsageError(f"--shard-id {args.shard_id!r}: {problems[0] if problems else 'must not be empty'}")
    client = cli_client(args.kubeconfig)
    try:
        app = client.get(APPLICATIONS, args.app, args.namespace)
    except errors.NotFound:
        raise UsageError(f"application {args.namespace}/{args.app} not found")
    ready = ready_pods_by_shard(client.list(PODS, args.controller_namespace, label_selector=POD_SELECTOR)["items"])
    if not args.force and ready.get(args.shard_id, 0) == 0:
        state = "has no Ready pod" if args.shard_id in ready else "is unknown"
        raise UsageError(f"shard {args.shard_id!r} {state} in namespace {args.controller_namespace}; "
                         f"use --force to move the application anyway")
    current = (app["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID)
    if current == args.shard_id:
        print(f"application {args.namespace}/{args.app} is already on shard {args.shard_id}")
        return 0
    signer = admin_signer(client, args.controller_namespace)
    try:
        set_shard(client, app, args.shard_id, "manual", signer)
    except errors.Conflict:
        raise UsageError(f"application {args.namespace}/{args.app} changed while moving it; run the command again")
    print(f"application {args.namespace}/{args.app} moved from {current or '(unscheduled)'} to {args.shard_id}, "
          "with its revisions and resource trackers")
    return 0


def admin_signer(client: KubeClient, namespace: str) -> Signer:
    """The master's signing key, for an admin's tool that sets a shard: its assignments need a proof too."""
    try:
        return load_or_create_signing_key(client, namespace)
    except errors.Forbidden as err:
        raise UsageError(f"cannot read the shard signing key (Secret {namespace}/{SIGNING_KEY_SECRET}), which proves "
                         f"the shards you set: shard admins need get on it (the chart grants it to "
                         f"sharding.shardAdmins, once the master has made it): {err}")
    except SigningKeyError as err:
        raise UsageError(str(err))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--controller-namespace", default=DEFAULT_NAMESPACE,
                        help="where the shard pods run (default $POD_NAMESPACE or vela-system)")


def _age(stamp: str | None) -> str:
    if not stamp:
        return "-"
    try:
        then = datetime.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    except ValueError:
        return "-"
    return f"{int((datetime.now(timezone.utc) - then).total_seconds())}s ago"


def run(args: argparse.Namespace) -> int:
    client = cli_client(args.kubeconfig)
    pods = client.list(PODS, args.controller_namespace, label_selector=POD_SELECTOR)["items"]
    ready = ready_pods_by_shard(pods)
    leases = client.list(LEASES, args.controller_namespace)["items"]
    loads = {(l["metadata"].get("labels") or {}).get(LEASE_LABEL): l for l in leases
             if (l["metadata"].get("labels") or {}).get(LEASE_LABEL)}
    leaders = {l["metadata"]["name"]: (l.get("spec") or {}).get("holderIdentity") or "-" for l in leases}
    totals: dict[str, int] = {}
    for pod in pods:
        shard = pod["metadata"]["labels"][labels.SHARD_ID]
        totals[shard] = totals.get(shard, 0) + 1
    rows = [("SHARD", "READY", "LEADER", "APPS", "HEARTBEAT", "AVAILABLE")]
    for shard in sorted(set(ready) | set(loads)):
        load = loads.get(shard) or {}
        apps = (load.get("metadata", {}).get("annotations") or {}).get(APPS_ANNOTATION, "-")
        available = ready.get(shard, 0) > 0 and shard != labels.MASTER_SHARD_ID
        rows.append((shard, f"{ready.get(shard, 0)}/{totals.get(shard, 0)}", leaders.get(f"velashard-{shard}", "-"),
                     apps, _age((load.get("spec") or {}).get("renewTime")),
                     "yes" if available else ("master" if shard == labels.MASTER_SHARD_ID else "no")))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip())
    return 0
