"""`velashard def list|show`: the component and trait definitions, from the cluster or the built-ins."""

from __future__ import annotations

import argparse
from typing import Any

from velashard.apis.oam import COMPONENT_DEFINITIONS, SYSTEM_NAMESPACE, TRAIT_DEFINITIONS
from velashard.cli.usage import UsageError
from velashard.core.builtins import builtin_definitions
from velashard.core.catalog.describe import definition_schema, parameter_tables, render_table

_DESCRIPTION = "definition.oam.dev/description"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="{list,show}")
    for name, help_text in (("list", "list definitions"), ("show", "show a definition's parameters as tables")):
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == "show":
            p.add_argument("name", help="definition name, e.g. webservice or gateway")
        else:
            p.add_argument("-t", "--type", choices=("component", "trait"), help="only this kind of definition")
        p.add_argument("-n", "--namespace", default=SYSTEM_NAMESPACE,
                       help=f"namespace of the definitions (default {SYSTEM_NAMESPACE})")
        p.add_argument("--kubeconfig", help="read the definitions from this cluster")
        p.add_argument("--builtin", action="store_true",
                       help="use velashard's built-in definitions instead of a cluster's")


def load_definitions(builtin: bool, kubeconfig: str | None, namespace: str,
                     offline_flag: str = "--builtin") -> list[dict[str, Any]]:
    """Component definitions first, then trait definitions."""
    if builtin:
        return builtin_definitions()
    from velashard.kube import errors
    from velashard.kube.client import KubeClient

    try:
        client = KubeClient.from_kubeconfig(kubeconfig, shard_id="cli", component="velashard-cli")
    except Exception as err:
        raise UsageError(f"cannot load Kubernetes configuration: {err} (use {offline_flag} to work offline)")
    try:
        found: list[dict[str, Any]] = []
        for res in (COMPONENT_DEFINITIONS, TRAIT_DEFINITIONS):
            items, _ = client.list_all(res, namespace)
            found.extend({**item, "kind": res.kind} for item in items)
        return found
    except errors.KubeError as err:
        raise UsageError(f"cannot read definitions from the cluster: {err}")
    except OSError as err:
        raise UsageError(f"cannot reach the cluster: {err} (use {offline_flag} to work offline)")


def _kind_name(definition: dict[str, Any]) -> str:
    return "component" if definition["kind"] == "ComponentDefinition" else "trait"


def run(args: argparse.Namespace) -> int:
    definitions = load_definitions(args.builtin, args.kubeconfig, args.namespace)
    if args.action == "list":
        rows = [(d["metadata"]["name"], _kind_name(d), d["metadata"].get("namespace", ""),
                 (d["metadata"].get("annotations") or {}).get(_DESCRIPTION, ""))
                for d in definitions if args.type in (None, _kind_name(d))]
        print(render_table(("NAME", "TYPE", "NAMESPACE", "DESCRIPTION"), rows))
        return 0
    matches = [d for d in definitions if d["metadata"]["name"] == args.name]
    if not matches:
        known = ", ".join(sorted({d["metadata"]["name"] for d in definitions}))
        raise UsageError(f'no definition named "{args.name}" (known: {known})')
    for definition in matches:
        description = (definition["metadata"].get("annotations") or {}).get(_DESCRIPTION, "")
        print(f"# {definition['metadata']['name']} ({_kind_name(definition)}): {description}")
        for table in parameter_tables(definition_schema(definition)):
            print()
            print(f"## {table.path}" if table.path else "## Properties")
            print(render_table(("NAME", "DESCRIPTION", "TYPE", "REQUIRED", "DEFAULT"),
                               [(r.name, r.description, r.type, str(r.required).lower(), r.default)
                                for r in table.rows]))
    return 0
