"""`velashard up -f FILE [-n NS] [--wait [--timeout 300s]]`: apply an Application from a file (or `-` for stdin)
as `vela up -f` does; with --wait, until it runs (exit 0) or fails, is terminated or times out (exit 1)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import yaml

from velashard.apis.oam import APPLICATIONS
from velashard.cli.flags import GoBool, client as cli_client, duration
from velashard.cli.usage import UsageError
from velashard.kube import errors
from velashard.kube.client import KubeClient

DEPLOYED = ("workflowSuspending", "running")
FAILED = ("workflowTerminated", "workflowFailed")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--file", required=True, help="the Application file ('-': standard input)")
    parser.add_argument("-n", "--namespace", default="", help="the namespace (default: the file's, else default)")
    parser.add_argument("-w", "--wait", action=GoBool, help="wait for the app to be healthy until --timeout")
    parser.add_argument("--timeout", type=duration, default=300.0, help="how long --wait waits (default 300s)")


def load(path: str, namespace: str) -> dict[str, Any]:
    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
        docs = [d for d in yaml.safe_load_all(text) if d]
    except OSError as err:
        raise UsageError(f"{path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise UsageError(f"File format is illegal, only support vela appfile format or OAM Application object yaml: "
                         f"{err}") from None
    if len(docs) != 1 or not isinstance(docs[0], dict) or docs[0].get("kind") != "Application":
        raise UsageError(f"{path}: expected one Application (core.oam.dev/v1beta1)")
    app = docs[0]
    meta = app.setdefault("metadata", {})
    if not meta.get("name"):
        raise UsageError(f"{path}: the Application has no metadata.name")
    if namespace and meta.get("namespace") and meta["namespace"] != namespace:
        raise UsageError(f"application namespace {meta['namespace']} is different from the namespace {namespace} "
                         "specified by flag")
    meta["namespace"] = meta.get("namespace") or namespace or "default"
    return app


def apply(client: KubeClient, app: dict[str, Any]) -> dict[str, Any]:
    """Create it, or update the one there (its spec, labels and annotations from the file; what others set kept)."""
    meta = app["metadata"]
    try:
        return client.create(APPLICATIONS, app)
    except errors.AlreadyExists:
        pass
    for _ in range(5):
        live = client.get(APPLICATIONS, meta["name"], meta["namespace"])
        live["spec"] = app.get("spec") or {}
        for key in ("labels", "annotations"):
            if meta.get(key):
                live["metadata"][key] = {**(live["metadata"].get(key) or {}), **meta[key]}
        try:
            return client.update(APPLICATIONS, live)
        except errors.Conflict:
            continue
    raise UsageError(f"application {meta['namespace']}/{meta['name']} keeps changing; try again")


def wait(client: KubeClient, namespace: str, name: str, timeout: float) -> int:
    start = time.monotonic()
    while True:
        time.sleep(1)
        phase = ((client.get(APPLICATIONS, name, namespace).get("status") or {}).get("status")) or ""
        if phase in DEPLOYED:
            print("\n✅Application Deployed Successfully!")
            return 0
        if phase in FAILED:
            print("\n❌Application Deployment Failed!")
            print(f"Please run the following command to check details: \n   velashard status {name} -n {namespace}")
            return 1
        if phase == "deleting":
            print("\n❌Application is in the deleting process!")
            return 1
        if time.monotonic() - start > timeout:
            print("\n❌ Timeout waiting Application to be healthy!")
            return 1


def run(args: argparse.Namespace) -> int:
    app = load(args.file, args.namespace)
    client = cli_client(args.kubeconfig)
    meta = app["metadata"]
    print("Applying an application in vela K8s object format...")
    try:
        apply(client, app)
    except errors.KubeError as err:
        print(f"Error: {err}", file=sys.stderr)
        return 1
    where = meta["name"] + ("" if meta["namespace"] == "default" else f" -n {meta['namespace']}")
    print("✅ App has been deployed 🚀🚀🚀\n"
          f"      App status: velashard status {where}\n"
          f"        Endpoint: velashard status {where} --endpoint")
    print(f"Application {meta['namespace']}/{meta['name']} applied.")
    return wait(client, meta["namespace"], meta["name"], args.timeout) if args.wait else 0
