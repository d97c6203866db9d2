"""`velashard def init|vet|render|apply|get|list|show|edit|del`: X-Definitions in KubeVela's `vela def` file
format (a CUE file: one metadata field plus `template: {...}`), offline or against a cluster."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from typing import Any

import yaml

from velashard.apis.oam import DEFINITION_RESOURCES, SYSTEM_NAMESPACE
from velashard.cli.usage import UsageError
from velashard.core.builtins import builtin_definitions
from velashard.core.defcheck import definition_problem
from velashard.core.deffile import DESCRIPTION, KINDS, TYPES, DefFileError, parse_def_file, to_def_file
from velashard.core.describe import parameter_tables, render_table
from velashard.core.definitions import lookup_order
from velashard.cue import CueError

_ACTIONS = {
    "init": "print (or write with -o) a new definition file to start from",
    "vet": "check definition files: they parse and their CUE compiles",
    "render": "print the X-Definition YAML of definition files",
    "apply": "create or update definitions from .cue or .yaml files (or folders of them)",
    "get": "print a definition in the vela def file format",
    "list": "list definitions",
    "show": "show a definition's parameters as tables",
    "edit": "edit a definition in $EDITOR (vela def format) and apply it",
    "del": "delete a definition",
}
_SKELETONS = {
    "component": """\toutput: {
\t\tapiVersion: "apps/v1"
\t\tkind:       "Deployment"
\t\tspec: {
\t\t\tselector: matchLabels: "app.oam.dev/component": context.name
\t\t\ttemplate: {
\t\t\t\tmetadata: labels: "app.oam.dev/component": context.name
\t\t\t\tspec: containers: [{name: context.name, image: parameter.image}]
\t\t\t}
\t\t}
\t}
\tparameter: {
\t\t// +usage=Container image to run
\t\timage: string
\t}
""",
    "trait": """\tpatch: spec: replicas: parameter.replicas
\tparameter: {
\t\t// +usage=Number of replicas
\t\treplicas: *1 | int
\t}
""",
    "policy": """\tparameter: {}
""",
    "workflow-step": """\tparameter: {}
""",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="{" + ",".join(_ACTIONS) + "}")
    for name, help_text in _ACTIONS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == "init":
            p.add_argument("name", help="name of the new definition")
            p.add_argument("-t", "--type", required=True, choices=tuple(KINDS), help="kind of definition")
            p.add_argument("--desc", default="", help="description")
            p.add_argument("-o", "--output", help="write to this file instead of printing")
            continue
        if name in ("vet", "render", "apply"):
            p.add_argument("files", nargs="+", metavar="FILE", help=".cue (vela def) or .yaml files, or folders")
        if name == "render":
            p.add_argument("-o", "--output", help="write the YAML to this file instead of printing")
        if name in ("get", "show", "edit", "del"):
            p.add_argument("name", help="definition name, e.g. webservice or gateway")
        if name in ("get", "list", "show", "edit", "del"):
            p.add_argument("-t", "--type", choices=tuple(KINDS), help="only this kind of definition")
        if name in ("apply", "get", "list", "show", "edit", "del"):
            shown = f"the definition an app in this namespace uses: the namespace's, else {SYSTEM_NAMESPACE}'s"
            p.add_argument("-n", "--namespace", default=SYSTEM_NAMESPACE, help=(
                shown if name == "show" else "namespace of the definitions") + f" (default {SYSTEM_NAMESPACE})")
            p.add_argument("--kubeconfig", help="the cluster to read or write")
        if name in ("get", "list", "show"):
            p.add_argument("--builtin", action="store_true",
                           help="use velashard's built-in definitions instead of a cluster's")
        if name == "apply":
            p.add_argument("--dry-run", action="store_true", help="print what would be applied, apply nothing")
        if name == "del":
            p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")


def _client(kubeconfig: str | None, offline_flag: str = "--builtin") -> Any:
    from velashard.kube.client import KubeClient
    try:
        return KubeClient.from_kubeconfig(kubeconfig, shard_id="cli", component="velashard-cli")
    except Exception as err:
        hint = f" (use {offline_flag} to work offline)" if offline_flag else ""
        raise UsageError(f"cannot load Kubernetes configuration: {err}{hint}")


def _cluster_call(fn: Any, offline_flag: str = "") -> Any:
    from velashard.kube import errors
    try:
        return fn()
    except errors.KubeError as err:
        raise UsageError(f"the cluster refused: {err}")
    except OSError as err:
        hint = f" (use {offline_flag} to work offline)" if offline_flag else ""
        raise UsageError(f"cannot reach the cluster: {err}{hint}")


def load_definitions(builtin: bool, kubeconfig: str | None, namespace: str,
                     offline_flag: str = "--builtin") -> list[dict[str, Any]]:
    """Every definition: components, traits, policies, workflow steps."""
    if builtin:
        return builtin_definitions()
    client = _client(kubeconfig, offline_flag)

    def read() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for kind, res in DEFINITION_RESOURCES.items():
            items, _ = client.list_all(res, namespace)
            found.extend({**item, "kind": kind} for item in items)
        return found
    return _cluster_call(read, offline_flag)


def read_definition_files(paths: list[str]) -> list[dict[str, Any]]:
    """X-Definitions from .cue files in the vela def format and from YAML files (folders: their .cue, .yaml,
    .yml files). UsageError names the file, and line and column where known."""
    files: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            files.extend(os.path.join(path, n) for n in sorted(os.listdir(path))
                         if n.endswith((".cue", ".yaml", ".yml")))
        else:
            files.append(path)
    found = []
    for path in files:
        try:
            text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
        except OSError as err:
            raise UsageError(f"cannot read {path}: {err.strerror or err}")
        if path.endswith(".cue"):
            try:
                found.append(parse_def_file(text, path))
            except DefFileError as err:
                raise UsageError(str(err))
            continue
        try:
            docs = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as err:
            raise UsageError(f"{path} is not valid YAML: {err}")
        for i, doc in enumerate(docs):
            if not isinstance(doc, dict) or doc.get("kind") not in TYPES:
                raise UsageError(f"{path}: document {i + 1} is not a definition (kind one of {', '.join(TYPES)})")
            if not isinstance(doc.get("metadata"), dict) or not doc["metadata"].get("name"):
                raise UsageError(f"{path}: document {i + 1} ({doc['kind']}) has no metadata.name")
            found.append(doc)
    return found


def _vetted(definitions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for d in definitions:
        problem = definition_problem(d)
        if problem:
            raise UsageError(f'{d["kind"]} "{d["metadata"]["name"]}": {problem[1]}')
    return definitions


def _kind_name(definition: dict[str, Any]) -> str:
    return TYPES.get(definition.get("kind", ""), "")


def _matching(definitions: list[dict[str, Any]], name: str, kind: str | None) -> dict[str, Any]:
    matches = [d for d in definitions if d["metadata"]["name"] == name and kind in (None, _kind_name(d))]
    if not matches:
        known = ", ".join(sorted({d["metadata"]["name"] for d in definitions})) or "none"
        raise UsageError(f'no definition named "{name}" (known: {known})')
    if len(matches) > 1:
        raise UsageError(f'"{name}" names a {" and a ".join(_kind_name(d) for d in matches)}: choose one with -t')
    return matches[0]


def _init(args: argparse.Namespace) -> int:
    attributes = {"component": '\t\tworkload: definition: {apiVersion: "apps/v1", kind: "Deployment"}\n'
                               '\t\tworkload: type: "deployments.apps"\n',
                  "trait": '\t\tappliesToWorkloads: ["deployments.apps"]\n\t\tpodDisruptive: true\n'}.get(args.type, "")
    desc = args.desc.replace("\\", "\\\\").replace('"', '\\"')
    text = (f'"{args.name}": {{\n\ttype: "{args.type}"\n\tannotations: {{}}\n\tlabels: {{}}\n'
            f'\tdescription: "{desc}"\n\tattributes: {{\n{attributes}\t}}\n}}\n'
            f"template: {{\n{_SKELETONS[args.type]}}}\n")
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"definition {args.name} written to {args.output}")
    else:
        sys.stdout.write(text)
    return 0


def _apply(args: argparse.Namespace, definitions: list[dict[str, Any]]) -> int:
    from velashard.kube.apply import upsert
    if args.dry_run:
        sys.stdout.write("---\n".join(yaml.safe_dump(d, sort_keys=False) for d in definitions))
        return 0
    client = _client(args.kubeconfig, "")
    for d in definitions:
        d["metadata"]["namespace"] = args.namespace
        outcome = _cluster_call(lambda d=d: upsert(client, DEFINITION_RESOURCES[d["kind"]], d))
        print(f'{d["kind"].lower()}/{d["metadata"]["name"]} {outcome}')
        if d["kind"] == "WorkflowStepDefinition" and definition_problem(d):
            print(f'  note: {definition_problem(d)[1]}', file=sys.stderr)  # type: ignore[index]
    return 0


def _edit(args: argparse.Namespace) -> int:
    definition = _matching(load_definitions(False, args.kubeconfig, args.namespace, ""), args.name, args.type)
    try:
        text = to_def_file(definition)
    except DefFileError as err:
        raise UsageError(str(err))
    editor = os.environ.get("EDITOR") or os.environ.get("VISUAL") or "vi"
    with tempfile.NamedTemporaryFile("w", suffix=f"-{args.name}.cue", delete=False, encoding="utf-8") as fh:
        fh.write(text)
        path = fh.name
    try:
        if subprocess.call([*editor.split(), path]) != 0:
            raise UsageError(f"the editor ({editor}) failed; nothing applied")
        with open(path, encoding="utf-8") as fh:
            edited = fh.read()
    finally:
        os.unlink(path)
    if edited == text:
        print("no changes")
        return 0
    try:
        changed = parse_def_file(edited, f"{args.name}.cue", args.namespace)
    except DefFileError as err:
        raise UsageError(f"{err} (nothing applied)")
    if changed["metadata"]["name"] != args.name:
        raise UsageError("the definition's name cannot change in an edit (nothing applied)")
    return _apply(argparse.Namespace(dry_run=False, kubeconfig=args.kubeconfig, namespace=args.namespace),
                  _vetted([changed]))


def _delete(args: argparse.Namespace) -> int:
    client = _client(args.kubeconfig, "")
    definition = _matching(load_definitions(False, args.kubeconfig, args.namespace, ""), args.name, args.type)
    kind = definition["kind"]
    if not args.yes and sys.stdin.isatty():
        answer = input(f'Delete {kind} "{args.name}" in {args.namespace}? [y/N] ')
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing deleted")
            return 0
    _cluster_call(lambda: client.delete(DEFINITION_RESOURCES[kind], args.name, args.namespace))
    print(f"{kind.lower()}/{args.name} deleted")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.action == "init":
        return _init(args)
    if args.action in ("vet", "render", "apply"):
        definitions = _vetted(read_definition_files(args.files))
        if args.action == "vet":
            for d in definitions:
                note = definition_problem(d)
                print(f'{d["kind"]} "{d["metadata"]["name"]}": ' + (note[1] if note else "valid"))
            return 0
        if args.action == "render":
            text = "---\n".join(yaml.safe_dump(d, sort_keys=False) for d in definitions)
            if args.output:
                with open(args.output, "w", encoding="utf-8") as fh:
                    fh.write(text)
            else:
                sys.stdout.write(text)
            return 0
        return _apply(args, definitions)
    if args.action == "edit":
        return _edit(args)
    if args.action == "del":
        return _delete(args)
    if args.action == "show" and not args.builtin:
        _show(_resolved(args))
        return 0
    definitions = load_definitions(args.builtin, args.kubeconfig, args.namespace)
    if args.action == "list":
        rows = [(d["metadata"]["name"], _kind_name(d), d["metadata"].get("namespace", ""),
                 (d["metadata"].get("annotations") or {}).get(DESCRIPTION, ""))
                for d in definitions if args.type in (None, _kind_name(d))]
        print(render_table(("NAME", "TYPE", "NAMESPACE", "DESCRIPTION"), rows))
        return 0
    definition = _matching(definitions, args.name, args.type)
    if args.action == "get":
        try:
            sys.stdout.write(to_def_file(definition))
        except DefFileError as err:
            raise UsageError(str(err))
        return 0
    _show(definition)
    return 0


def _resolved(args: argparse.Namespace) -> dict[str, Any]:
    """The definition named so that an app in the namespace uses: the namespace's own, else vela-system's (the
    controller's order, and `vela show`'s)."""
    seen: list[dict[str, Any]] = []
    for where in lookup_order(args.namespace):
        found = load_definitions(False, args.kubeconfig, where)
        if any(d["metadata"]["name"] == args.name and args.type in (None, _kind_name(d)) for d in found):
            return _matching(found, args.name, args.type)
        seen += found
    return _matching(seen, args.name, args.type)  # says that there is none, and which there are


def _show(definition: dict[str, Any]) -> None:
    meta = definition["metadata"]
    description = (meta.get("annotations") or {}).get(DESCRIPTION, "")
    print(f"# {meta['name']} ({_kind_name(definition)}, namespace {meta.get('namespace') or SYSTEM_NAMESPACE}): "
          f"{description}")
    try:
        tables = parameter_tables(definition)
    except CueError as err:  # a definition in the cluster may not compile: say so instead of a traceback
        raise UsageError(f"cannot read the parameters of {meta['name']}: {err}")
    for table in tables:
        print()
        print(f"## {table.path}" if table.path else "## Properties")
        print(render_table(("NAME", "DESCRIPTION", "TYPE", "REQUIRED", "DEFAULT"),
                           [(r.name, r.description, r.type, str(r.required).lower(), r.default)
                            for r in table.rows]))
