"""`velashard workflow suspend|resume|terminate|restart|rollback|logs APP`: operate an application's workflow as
`vela workflow` does. The status operations are velashard.workflow.operations; this module reads and writes."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable

import urllib3

from velashard.apis.oam import APPLICATION_REVISIONS, APPLICATIONS
from velashard.cli.flags import client as cli_client
from velashard.cli.usage import UsageError
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.resources import CONFIGMAPS, PODS
from velashard.workflow import operations
from velashard.workflow.spec import parse_workflow
from velashard.workflow.store import backend_ref, context_name
from velashard.workflow.providers.util import LOG_CONFIG, LOG_DATA

ACTIONS = ("suspend", "resume", "terminate", "restart", "rollback", "logs")
PUBLISH_VERSION = "app.oam.dev/publishVersion"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=ACTIONS, help="what to do to the workflow")
    parser.add_argument("app", help="application name")
    parser.add_argument("-n", "--namespace", default="default")
    parser.add_argument("--step", default="", help="suspend, resume or restart from this step only; logs of it")


def _app(client: KubeClient, args: argparse.Namespace) -> dict[str, Any]:
    try:
        return client.get(APPLICATIONS, args.app, args.namespace)
    except errors.NotFound:
        raise UsageError(f"application {args.namespace}/{args.app} not found") from None


CONFLICT_RETRIES = 5


class _Changed(Exception):
    """The app changed between our read and our write (the controller wrote its status): read it again."""


def _write(client: KubeClient, app: dict[str, Any], workflow: dict[str, Any] | None) -> None:
    """status.workflow replaced as a whole (a merge patch would merge the steps' list item by item)."""
    status = dict(app.get("status") or {})
    if workflow is None:
        status.pop("workflow", None)
    else:
        status["workflow"] = workflow
    try:
        client.update_status(APPLICATIONS, dict(app, status=status))
    except errors.Conflict:
        raise _Changed() from None


def _operate(client: KubeClient, args: argparse.Namespace, act: Callable[[dict[str, Any]], bool]) -> bool:
    """Read the app and act on it, again when the controller wrote it meanwhile (as `vela` retries)."""
    for _ in range(CONFLICT_RETRIES):
        try:
            return act(_app(client, args))
        except _Changed:
            continue
    raise UsageError(f"application {args.namespace}/{args.app} keeps changing; try again")


def run(args: argparse.Namespace) -> int:
    client = cli_client(args.kubeconfig)
    where = f"{args.namespace}/{args.app}"
    step = f" from step {args.step}" if args.step else ""

    def act(app: dict[str, Any]) -> bool:
        workflow = (app.get("status") or {}).get("workflow")
        if args.action == "suspend":
            _write(client, app, operations.suspend(workflow, args.step))
        elif args.action == "resume":
            resumed = operations.resume(workflow, args.step)
            if resumed is None:
                return False
            _write(client, app, resumed)
        elif args.action == "terminate":
            _write(client, app, operations.terminate(workflow))
        elif args.action == "restart":
            restart(client, app, workflow, args.step)
        elif args.action == "rollback":
            rollback(client, app, workflow)
        else:
            logs(client, app, args.step)
        return True

    try:
        done = _operate(client, args, act)
    except operations.OperationError as err:
        raise UsageError(f"application {where}: {err}") from None
    if args.action == "resume" and not done:
        print(f"workflow {args.app} is not suspended.")
    elif args.action in ("suspend", "resume", "terminate", "restart"):
        print(f"Successfully {args.action} workflow: {args.app}{step}")
    return 0


def restart(client: KubeClient, app: dict[str, Any], workflow: dict[str, Any] | None, step: str) -> None:
    """The whole run anew, or from a failed step: its status and what it and the steps after it output cleared."""
    if not step:
        operations.suspend(workflow)  # refuses an app whose workflow never ran
        _write(client, app, None)
        return
    try:
        spec = parse_workflow(app.get("spec") or {})
    except ValueError as err:
        raise UsageError(str(err)) from None
    status, outputs = operations.restart_from(workflow, spec, step)
    backend = (workflow or {}).get("contextBackend")
    if backend and backend.get("name"):
        cleared = {s.get("id") for s in _statuses(workflow) if s.get("name") not in
                   {x.get("name") for x in _statuses(status)}}
        try:
            configmap = client.get(CONFIGMAPS, backend["name"], backend.get("namespace"))
        except errors.NotFound:
            configmap = None
        if configmap is not None:
            data = dict(configmap.get("data") or {})
            variables = json.loads(data.get("vars") or "{}")
            for name in outputs:
                variables.pop(name, None)
            data = {k: v for k, v in data.items() if k.split(".")[0] not in cleared}
            data["vars"] = json.dumps(variables, sort_keys=True)
            try:
                written = client.update(CONFIGMAPS, dict(configmap, data=data))
            except errors.Conflict:
                raise _Changed() from None
            status["contextBackend"] = backend_ref(written)
    _write(client, app, status)


def _statuses(workflow: dict[str, Any] | None) -> list[dict[str, Any]]:
    return [s for top in (workflow or {}).get("steps") or [] for s in (top, *(top.get("subSteps") or []))]


def rollback(client: KubeClient, app: dict[str, Any], workflow: dict[str, Any] | None) -> None:
    """Back to the spec of the latest revision; with a publishVersion, to the revision published before it."""
    if workflow and not (workflow.get("terminated") or workflow.get("suspend") or workflow.get("finished")):
        raise UsageError("can not rollback a running workflow")
    meta = app["metadata"]
    current = (meta.get("annotations") or {}).get(PUBLISH_VERSION)
    latest = ((app.get("status") or {}).get("latestRevision") or {}).get("name")
    if not latest:
        raise UsageError(f"the latest revision is not set: {meta['name']}")
    revisions = sorted(client.list_all(APPLICATION_REVISIONS, meta["namespace"],
                                       f"app.oam.dev/name={meta['name']}")[0],
                       key=lambda r: (r.get("spec") or {}).get("revision", 0), reverse=True)
    if current:
        target = next((r for r in revisions if _published(r) and _published(r) != current), None)
        if target is None:
            raise UsageError(f"no revision of {meta['name']} was published before {current}")
    else:
        target = next((r for r in revisions if r["metadata"]["name"] == latest), None)
        if target is None:
            raise UsageError(f"failed to get the latest revision: {latest}")
    recorded = (target.get("spec") or {}).get("application") or {}
    app = dict(app, spec=recorded.get("spec") or {})
    if current:
        app["metadata"] = dict(meta, annotations={**(meta.get("annotations") or {}), PUBLISH_VERSION:
                                                  _published(target)})
    try:
        client.update(APPLICATIONS, app)
    except errors.Conflict:
        raise _Changed() from None
    print(f"Successfully rollback workflow to revision {target['metadata']['name']}: {meta['name']}")


def _published(revision: dict[str, Any]) -> str:
    recorded = ((revision.get("spec") or {}).get("application") or {}).get("metadata") or {}
    return (recorded.get("annotations") or {}).get(PUBLISH_VERSION, "")


def logs(client: KubeClient, app: dict[str, Any], step: str) -> None:
    """What the steps logged (util.#Log data), and the logs of where they said theirs are (a URL, pods)."""
    meta = app["metadata"]
    backend = ((app.get("status") or {}).get("workflow") or {}).get("contextBackend") or {}
    try:
        configmap = client.get(CONFIGMAPS, backend.get("name") or context_name(meta["name"]), meta["namespace"])
    except errors.NotFound:
        raise UsageError(f"application {meta['namespace']}/{meta['name']} has no workflow logs") from None
    data = configmap.get("data") or {}
    config = json.loads(data.get(LOG_CONFIG) or "{}")
    logged = json.loads(data.get(LOG_DATA) or "{}")
    steps = [step] if step else sorted(set(config) | set(logged))
    if step and step not in config and step not in logged:
        raise UsageError(f"step {step} has no logs")
    for name in steps:
        print(f"--- step {name}")
        if name in logged:
            print(logged[name])
        source = (config.get(name) or {}).get("source") or {}
        if source.get("url"):
            print(_fetch(source["url"]))
        for resource in source.get("resources") or []:
            _pod_logs(client, resource, meta["namespace"])


def _fetch(url: str) -> str:
    try:
        response = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(total=10)).request("GET", url)
    except (urllib3.exceptions.HTTPError, OSError) as err:
        return f"(cannot read {url}: {err})"
    return response.data.decode("utf-8", "replace")


def _pod_logs(client: KubeClient, resource: dict[str, Any], namespace: str) -> None:
    namespace = resource.get("namespace") or namespace
    if resource.get("name"):
        names = [resource["name"]]
    else:
        selector = ",".join(f"{k}={v}" for k, v in sorted((resource.get("labelSelector") or {}).items()))
        names = [p["metadata"]["name"] for p in client.list_all(PODS, namespace, selector or None)[0]]
    for name in names:
        try:
            response = client.request("get", "GET", PODS.path(namespace, name) + "/log", stream=True)
            sys.stdout.write(response.read().decode("utf-8", "replace") + "\n")
        except errors.KubeError as err:
            print(f"(logs of pod {namespace}/{name} are not available: {err.message})")
