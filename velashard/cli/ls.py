"""`velashard ls [-n NS | -A]`: applications as `vela ls` lists them, one row per component, with the shard each
app is on as the last column."""

from __future__ import annotations

import argparse
import sys

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.cli.appstatus import go_time, table
from velashard.cli.flags import client as cli_client
from velashard.kube import errors

HEADER = ("APP", "COMPONENT", "TYPE", "TRAITS", "PHASE", "HEALTHY", "STATUS", "CREATED-TIME", "SHARD")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--namespace", default="default", help="the namespace to list (default: default)")
    parser.add_argument("-A", "--all-namespaces", action="store_true", help="list applications in every namespace")
    parser.add_argument("-l", "--selector", default="", help="label selector, e.g. -l key1=value1,key2=value2")


def rows(apps: list[dict], all_namespaces: bool) -> list[tuple[str, ...]]:
    out = [(("NAMESPACE",) if all_namespaces else ()) + HEADER]
    for a in sorted(apps, key=lambda a: (a["metadata"]["namespace"], a["metadata"]["name"])):
        meta, status = a["metadata"], a.get("status") or {}
        shard = (meta.get("labels") or {}).get(labels.SCHEDULED_SHARD_ID) or "-"
        created, phase = go_time(meta.get("creationTimestamp")), status.get("status") or ""
        services = {s.get("name"): s for s in status.get("services") or []}
        components = (a.get("spec") or {}).get("components") or []
        lead = (meta["namespace"],) if all_namespaces else ()
        if not components:
            out.append(lead + (meta["name"], "", "", "", phase, "", "", created, shard))
        for i, c in enumerate(components):
            name = meta["name"] if i == 0 else ("└─" if i == len(components) - 1 else "├─")
            svc = services.get(c.get("name"))
            health = ("healthy" if svc.get("healthy") else "unhealthy") if svc else ""
            out.append(lead + (name, c.get("name", ""), c.get("type", ""),
                               ",".join(t.get("type", "") for t in c.get("traits") or []), phase, health,
                               (svc or {}).get("message", ""), created, shard))
    return out


def run(args: argparse.Namespace) -> int:
    client = cli_client(args.kubeconfig)
    try:
        apps, _ = client.list_all(APPLICATIONS, None if args.all_namespaces else args.namespace,
                                  label_selector=args.selector or None)
    except errors.KubeError as err:
        print(f"Error: {err}", file=sys.stderr)
        return 1
    print(table(rows(apps, args.all_namespaces)))
    return 0
