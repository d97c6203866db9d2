"""`velashard workflow suspend|resume|terminate|restart|rollback|logs NAME`: operate an application's workflow, or a
WorkflowRun, as `vela workflow` does: it looks for an application of that name first, then for a WorkflowRun
(`--type app|workflow` says which). The status operations are velashard.workflow.operations; this module reads and
writes."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any, Callable

import urllib3

from velashard.apis.oam import APPLICATION_REVISIONS, APPLICATIONS, WORKFLOW_RUNS, WORKFLOWS
from velashard.cli.flags import client as cli_client
from velashard.cli.usage import UsageError
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.resources import CONFIGMAPS, PODS
from velashard.workflow import operations, runs
from velashard.workflow.spec import Workflow, parse_workflow
from velashard.workflow.store import backend_ref, context_name
from velashard.workflow.providers.util import LOG_CONFIG, LOG_DATA

ACTIONS = ("suspend", "resume", "terminate", "restart", "rollback", "logs")
PUBLISH_VERSION = "app.oam.dev/publishVersion"
TYPES = {"app": APPLICATIONS, "workflow": WORKFLOW_RUNS}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=ACTIONS, help="what to do to the workflow")
    parser.add_argument("app", help="the application's (or the WorkflowRun's) name")
    parser.add_argument("-n", "--namespace", default="default")
    parser.add_argument("--step", default="", help="suspend, resume or restart from this step only; logs of it")
    parser.add_argument("-t", "--type", choices=sorted(TYPES), default="",
                        help="app or workflow (a WorkflowRun); by default an application of that name, else a run")


@dataclass
class Target:
    """What the operation acts on: an application (its status.workflow) or a WorkflowRun (its whole status)."""
    resource: Any
    obj: dict[str, Any]

    @property
    def is_run(self) -> bool:
        return self.resource is WORKFLOW_RUNS

    @property
    def what(self) -> str:
        meta = self.obj["metadata"]
        return f'{"workflow run" if self.is_run else "application"} {meta["namespace"]}/{meta["name"]}'

    def workflow(self) -> dict[str, Any] | None:
        status = self.obj.get("status") or {}
        if self.is_run:
            return runs.engine_status(status) or None
        return status.get("workflow")


def _target(client: KubeClient, args: argparse.Namespace) -> Target:
    kinds = [TYPES[args.type]] if args.type else [APPLICATIONS, WORKFLOW_RUNS]
    for resource in kinds:
        try:
            return Target(resource, client.get(resource, args.app, args.namespace))
        except errors.NotFound:
            continue
    if args.type:
        raise UsageError(f'{"workflow run" if args.type == "workflow" else "application"} '
                         f"{args.namespace}/{args.app} not found")
    raise UsageError(f"application {args.namespace}/{args.app} not found (nor a WorkflowRun of that name)")


CONFLICT_RETRIES = 5


class _Changed(Exception):
    """The object changed between our read and our write (the controller wrote its status): read it again."""


def _write(client: KubeClient, target: Target, workflow: dict[str, Any] | None) -> None:
    """status.workflow (a run: its status) replaced as a whole (a merge patch would merge the steps' list item by
    item); a run's conditions and mode stay."""
    status = dict(target.obj.get("status") or {})
    if target.is_run:
        kept = {k: status[k] for k in ("conditions", "mode") if k in status}
        status = {**runs.EMPTY_STATUS, **kept, **(workflow or {})}
        if workflow is None:
            status = dict(runs.EMPTY_STATUS)  # KubeVela's restart: an empty status, a new run
    elif workflow is None:
        status.pop("workflow", None)
    else:
        status["workflow"] = workflow
    try:
        client.update_status(target.resource, dict(target.obj, status=status))
    except errors.Conflict:
        raise _Changed() from None


def _operate(client: KubeClient, args: argparse.Namespace, act: Callable[[Target], bool]) -> bool:
    """Read the object and act on it, again when the controller wrote it meanwhile (as `vela` retries)."""
    for _ in range(CONFLICT_RETRIES):
        try:
            return act(_target(client, args))
        except _Changed:
            continue
    raise UsageError(f"{args.namespace}/{args.app} keeps changing; try again")


def run(args: argparse.Namespace) -> int:
    client = cli_client(args.kubeconfig)
    step = f" from step {args.step}" if args.step else ""
    seen: dict[str, str] = {}

    def act(target: Target) -> bool:
        seen["what"] = target.what
        workflow = target.workflow()
        if args.action == "suspend":
            _write(client, target, operations.suspend(workflow, args.step))
        elif args.action == "resume":
            resumed = operations.resume(workflow, args.step)
            if resumed is None:
                return False
            _write(client, target, resumed)
        elif args.action == "terminate":
            _write(client, target, operations.terminate(workflow))
        elif args.action == "restart":
            restart(client, target, workflow, args.step)
        elif args.action == "rollback":
            if target.is_run:
                raise UsageError("can not rollback a WorkflowRun")
            rollback(client, target.obj, workflow)
        else:
            logs(client, target.obj, args.step)
        return True

    try:
        done = _operate(client, args, act)
    except operations.OperationError as err:
        raise UsageError(f'{seen.get("what", args.app)}: {err}') from None
    if args.action == "resume" and not done:
        print(f"workflow {args.app} is not suspended.")
    elif args.action in ("suspend", "resume", "terminate", "restart"):
        print(f"Successfully {args.action} workflow: {args.app}{step}")
    return 0


def _spec(client: KubeClient, target: Target) -> Workflow:
    try:
        if not target.is_run:
            return parse_workflow(target.obj.get("spec") or {})
        name = runs.template_name(target.obj)
        template = None
        if name:
            try:
                template = client.get(WORKFLOWS, name, target.obj["metadata"]["namespace"])
            except errors.NotFound:
                template = None
        return runs.workflow_of(target.obj, template)
    except ValueError as err:
        raise UsageError(str(err)) from None


def restart(client: KubeClient, target: Target, workflow: dict[str, Any] | None, step: str) -> None:
    """The whole run anew, or from a failed step: its status and what it and the steps after it output cleared.
    A WorkflowRun restarted whole loses its context too (KubeVela deletes its ConfigMap)."""
    backend = (workflow or {}).get("contextBackend")
    if not step:
        operations.suspend(workflow)  # refuses a workflow that never ran
        if target.is_run and backend and backend.get("name"):
            try:
                client.delete(CONFIGMAPS, backend["name"], backend.get("namespace"))
            except errors.NotFound:
                pass
        _write(client, target, None)
        return
    status, outputs = operations.restart_from(workflow, _spec(client, target), step)
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
    _write(client, target, status)


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
    status = app.get("status") or {}
    backend = (status.get("workflow") or status).get("contextBackend") or {}
    try:
        configmap = client.get(CONFIGMAPS, backend.get("name") or context_name(meta["name"]), meta["namespace"])
    except errors.NotFound:
        raise UsageError(f"{meta['namespace']}/{meta['name']} has no workflow logs") from None
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
