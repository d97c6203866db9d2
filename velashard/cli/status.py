"""`velashard status APP [-n NS] [--tree] [--endpoint]`: an application's status as `vela status` shows it, with
the shard it is on and whom it acts as."""

from __future__ import annotations

import argparse
import sys

from velashard.apis.oam import APPLICATION_REVISIONS, APPLICATIONS, RESOURCE_TRACKERS
from velashard.cli import appstatus
from velashard.cli.flags import client as cli_client
from velashard.core.tracker import tracker_name
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.resources import Resource

INGRESSES = Resource("networking.k8s.io", "v1", "ingresses", "Ingress")
SERVICES = Resource("", "v1", "services", "Service")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("app", help="application name")
    parser.add_argument("-n", "--namespace", default="default", help="the application's namespace")
    parser.add_argument("-t", "--tree", action="store_true", help="display the application resources into tree "
                                                                   "structure")
    parser.add_argument("-p", "--endpoint", action="store_true", help="show all service endpoints of the "
                                                                       "application")


def _types(client: KubeClient, app: dict) -> dict[str, str]:
    """Component name -> type, from the revision last deployed (what policies made of it), else the app."""
    spec = app.get("spec") or {}
    revision = ((app.get("status") or {}).get("latestRevision") or {}).get("name")
    if revision:
        try:
            rev = client.get(APPLICATION_REVISIONS, revision, app["metadata"]["namespace"])
            spec = ((rev.get("spec") or {}).get("application") or {}).get("spec") or spec
        except errors.KubeError:
            pass
    return {c.get("name", ""): c.get("type", "") for c in spec.get("components") or []}


def run(args: argparse.Namespace) -> int:
    client = cli_client(args.kubeconfig)
    try:
        app = client.get(APPLICATIONS, args.app, args.namespace)
    except errors.NotFound:
        print(f'Error: applications.core.oam.dev "{args.app}" not found', file=sys.stderr)
        return 1
    except errors.KubeError as err:
        print(f"Error: {err}", file=sys.stderr)
        return 1
    if args.tree:
        try:
            tracker = client.get(RESOURCE_TRACKERS, tracker_name(app))
        except errors.NotFound:
            tracker = None
        sys.stdout.write(appstatus.tree(tracker))
        return 0
    if args.endpoint:
        objects = []
        for res in (SERVICES, INGRESSES):
            try:
                objects += client.list(res, args.namespace,
                                       label_selector=f"app.oam.dev/name={args.app}")["items"]
            except errors.NotFound:
                continue
        print(f"Please access {args.app} from the following endpoints:")
        sys.stdout.write(appstatus.boxed(("Cluster", "Component", "Ref(Kind/Namespace/Name)", "Endpoint", "Inner"),
                                         [tuple(e) for e in appstatus.endpoints(app, objects)]))
        return 0
    sys.stdout.write(appstatus.about(app) + appstatus.workflow(app) + appstatus.services(app, _types(client, app)))
    return 0
