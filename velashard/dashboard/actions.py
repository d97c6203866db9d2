"""What the dashboard's buttons do, sent with the user's own credentials: resume, terminate or restart an app's
workflow (velashard.workflow.operations, as `velashard workflow` does), or reschedule it to another shard
(sharding/move.py, signed with the master's key, which only shard admins may read). A refusal is the API
server's, shown to the user as it said it."""

from __future__ import annotations

from typing import Any

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.sharding.keys import SIGNING_KEY_SECRET, SigningKeyError, load_signing_key
from velashard.sharding.move import set_shard
from velashard.workflow import operations

ACTIONS = {"resume": "Resume the workflow", "terminate": "Terminate the workflow",
           "restart": "Restart the workflow from the beginning", "reschedule": "Move the app to another shard"}
CONFLICT_RETRIES = 5


class ActionError(Exception):
    """What to tell the user: the API server's refusal, or why the action does not apply."""


def _workflow_write(client: KubeClient, app: dict[str, Any], action: str) -> str:
    workflow = (app.get("status") or {}).get("workflow")
    if action == "resume":
        changed = operations.resume(workflow)
        if changed is None:
            return "the workflow is not suspended"
    elif action == "terminate":
        changed = operations.terminate(workflow)
    else:
        operations.suspend(workflow)  # refuses a workflow that never ran, as `velashard workflow restart` does
        changed = None
    status = dict(app.get("status") or {})
    if changed is None:
        status.pop("workflow", None)
    else:
        status["workflow"] = changed
    client.update_status(APPLICATIONS, dict(app, status=status))
    return {"resume": "workflow resumed", "terminate": "workflow terminated", "restart": "workflow restarted"}[action]


def run(client: KubeClient, namespace: str, name: str, action: str, shard: str = "",
        controller_namespace: str = "vela-system") -> str:
    """Do `action` to the app; returns what was done, or raises ActionError with what the user must know."""
    if action not in ACTIONS:
        raise ActionError(f"unknown action {action!r}")
    try:
        for _ in range(CONFLICT_RETRIES):
            app = client.get(APPLICATIONS, name, namespace)
            try:
                if action == "reschedule":
                    return _reschedule(client, app, shard, controller_namespace)
                return _workflow_write(client, app, action)
            except errors.Conflict:
                continue  # the controller wrote the app meanwhile: read it again, as `vela` does
        raise ActionError(f"application {namespace}/{name} keeps changing; try again")
    except operations.OperationError as err:
        raise ActionError(str(err)) from None
    except errors.KubeError as err:
        raise ActionError(f"the API server refused: {err}") from None


def _reschedule(client: KubeClient, app: dict[str, Any], shard: str, controller_namespace: str) -> str:
    current = (app["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID)
    if not shard:
        raise ActionError("choose a shard to move the app to")
    if shard == current:
        return f"the app is already on shard {shard}"
    try:
        signer = load_signing_key(client, controller_namespace)
    except errors.NotFound:
        raise ActionError(f"the master has not made its signing key (Secret {controller_namespace}/"
                          f"{SIGNING_KEY_SECRET}) yet") from None
    except SigningKeyError as err:
        raise ActionError(str(err)) from None
    set_shard(client, app, shard, "manual", signer)
    return f"moved from {current or '(unscheduled)'} to {shard}, with its revisions and resource trackers"
