"""`velashard dry-run -f app.yaml`: print the objects an Application renders to and what each step of its workflow
would do, without applying anything."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

from velashard.apis import labels
from velashard.apis.oam import API_VERSION, SYSTEM_NAMESPACE
from velashard.cli.definitions import load_definitions, read_definition_files
from velashard.cli.usage import UsageError
from velashard.core.defcheck import definition_problem
from velashard.core.deffile import TYPES
from velashard.core.policies import with_overrides
from velashard.core.definitions import Definitions, lookup_order
from velashard.core.rendered import RenderError
from velashard.core.rendering import REF_OBJECTS, render_app
from velashard.core.templates import app_context
from velashard.cue import plain
from velashard.workflow.executor import plan
from velashard.workflow.spec import parse_workflow


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--file", required=True, action="append",
                        help="application file ('-' for stdin); repeat for several")
    parser.add_argument("-d", "--definition", action="append", default=[],
                        help="definition files (.cue in the vela def format, or .yaml) or folders of them, used "
                             "over the others; repeat for several")
    parser.add_argument("-n", "--namespace", default="default", help="namespace of apps that name none")
    parser.add_argument("--kubeconfig", help="read the definitions from this cluster")
    parser.add_argument("--offline", action="store_true",
                        help="use velashard's built-in definitions instead of a cluster's")


def _documents(path: str) -> list[dict[str, Any]]:
    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror or err}")
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        raise UsageError(f"{path} is not valid YAML: {err}")
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict) or "kind" not in doc:
            raise UsageError(f"{path}: document {i + 1} is not a Kubernetes object (no kind)")
    return docs


def _definitions(args: argparse.Namespace, extra: list[dict[str, Any]], namespace: str) -> Definitions:
    """The definitions an app in `namespace` renders with, as the controller resolves them: the cluster's in its
    namespace, then in vela-system (or the built-in ones), with the files given over both."""
    if args.offline:
        found = load_definitions(True, None, SYSTEM_NAMESPACE, "--offline")
    else:
        found = [d for where in lookup_order(namespace)
                 for d in load_definitions(False, args.kubeconfig, where, "--offline")]
    found += [{**d, "metadata": {**d["metadata"], "namespace": namespace}} for d in extra]
    return Definitions.from_objects(*[[d for d in found if d["kind"] == kind] for kind in (
        "ComponentDefinition", "TraitDefinition", "PolicyDefinition")], namespace=namespace,
        steps=[d for d in found if d["kind"] == "WorkflowStepDefinition"])


def _steps(app: dict[str, Any], defs: Definitions) -> str:
    """What each step of an explicit workflow would do: the actions of its template, with their parameters as
    far as they are known before anything runs (one that needs an earlier action's result says so)."""
    meta = app["metadata"]
    try:
        workflow = parse_workflow(app.get("spec") or {})
    except ValueError as err:
        raise UsageError(f"application {meta['namespace']}/{meta['name']}: {err}")
    if workflow.default:
        return ""
    basic = {**app_context(app, 1), "name": meta["name"]}
    out = []
    for planned in plan(app, workflow, basic, lambda kind, _ns: defs.steps.get(kind),
                        list((app.get("spec") or {}).get("components") or [])):
        out.append(f"---\n# Application({meta['name']}) -- WorkflowStep({planned.name}, {planned.type})\n---\n")
        if planned.problem:
            out.append(f"# {planned.problem}\n\n")
            continue
        actions = [{"action": a.action, "field": a.where,
                    **({"parameters": plain(a.params)} if not a.unknown else
                       {"parameters": f"known when the step runs ({a.unknown})"})} for a in planned.actions]
        out.append(yaml.safe_dump(actions, sort_keys=False) + "\n" if actions else "# no actions\n\n")
    return "".join(out)


def run(args: argparse.Namespace) -> int:
    docs = [doc for path in args.file for doc in _documents(path)]
    extra = read_definition_files(args.definition)
    extra += [d for d in docs if d["kind"] in TYPES]
    apps = [d for d in docs if d["kind"] == "Application"]
    if not apps:
        raise UsageError(f"no Application ({API_VERSION}) in {', '.join(args.file)}")
    for d in extra:
        if not isinstance(d.get("metadata"), dict) or not d["metadata"].get("name"):
            raise UsageError(f"a {d['kind']} has no metadata.name")
        problem = definition_problem(d)
        if problem:
            raise UsageError(f'{d["kind"]} "{d["metadata"]["name"]}": {problem[1]}')
    by_namespace: dict[str, Definitions] = {}
    out = []
    for app in apps:
        meta = app.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name"):
            raise UsageError("an Application has no metadata.name")
        meta.setdefault("namespace", args.namespace)
        if meta["namespace"] not in by_namespace:
            by_namespace[meta["namespace"]] = _definitions(args, extra, meta["namespace"])
        defs = by_namespace[meta["namespace"]]
        try:
            rendered = render_app(with_overrides(app), defs, 1)
        except RenderError as err:
            raise UsageError(f"application {meta['namespace']}/{meta['name']}: {err}")
        for comp in rendered.components:
            out.append(f"---\n# Application({meta['name']}) -- Component({comp.name})\n---\n")
            if REF_OBJECTS in comp.workload:
                out.append("# ref-objects: the referenced objects are read from the cluster when applied\n\n")
                continue
            out.append("---\n".join(yaml.safe_dump(obj, sort_keys=False) for obj in comp.objects) + "\n")
        for obj in rendered.policy_objects:
            policy = obj["metadata"]["labels"][labels.APP_COMPONENT]
            out.append(f"---\n# Application({meta['name']}) -- Policy({policy})\n---\n")
            out.append(yaml.safe_dump(obj, sort_keys=False) + "\n")
        out.append(_steps(app, defs))
    sys.stdout.write("".join(out))
    return 0
