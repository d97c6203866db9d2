"""The shard-label guard: a ValidatingAdmissionPolicy and its binding, so the API server enforces it alone.

Rule: setting `controller.core.oam.dev/scheduled-shard-id` to a value it did not have (a create that sets
it, or an update that changes it) is denied unless
- the user is the controller's identity or a shard admin (by user name or group), or
- the app was unscheduled (a create, or an update of an app without the label) and the value is either
  the namespace's pin (its `controller.core.oam.dev/shard-id` label: not the user's choice) or the
  shard the mutating webhook assigned on this request (its annotation; the webhook strips one a user
  sent), and the app is not being drained.
Removing the label is allowed: the mutating webhook puts the old value back (if its proof holds).

While the master (its webhook) is down nobody strips a forged annotation, so a user who copies it gets a
label of their choice through this guard for a new or unscheduled app. The label runs nothing: the owning
shard runs only apps whose assignment carries the master's signature, and hands this one back to the
scheduler (sharding/proof.py). Moving a scheduled app stays denied whatever happens to the master; the
policy lives in the API server.

The Helm chart renders the same policy (helm/velashard/templates/shard-label-guard.yaml); a unit test
keeps the two identical.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from velashard.apis import labels

POLICY_NAME = "velashard-shard-label-guard"
# Applications and WorkflowRuns: both are placed on shards (velashard.apis.oam.SCHEDULED_RESOURCES).
RESOURCE_RULES = [{"apiGroups": ["core.oam.dev"], "apiVersions": [version], "operations": ["CREATE", "UPDATE"],
                   "resources": [plural], "scope": "Namespaced"}
                  for version, plural in (("v1beta1", "applications"), ("v1alpha1", "workflowruns"))]


def _str(text: str) -> str:
    return json.dumps(text)


def _value(obj: str, field: str, key: str) -> str:
    """CEL: obj.metadata.<field>[key] or '' when obj, the map or the key is missing."""
    guard = f"{obj} != null && has({obj}.metadata.{field}) && {_str(key)} in {obj}.metadata.{field}"
    return f"{guard} ? {obj}.metadata.{field}[{_str(key)}] : ''"


def policy_spec(privileged_users: Iterable[str], privileged_groups: Iterable[str] = ()) -> dict[str, Any]:
    # Lists as JSON, which is CEL too (and what Helm's toJson writes, so the chart's policy is the same text).
    users = json.dumps(list(dict.fromkeys(privileged_users)), separators=(",", ":"))
    groups = json.dumps(list(dict.fromkeys(privileged_groups)), separators=(",", ":"))
    return {
        "failurePolicy": "Fail",
        # Written out with the API server's defaults, so that re-installing finds nothing to change.
        "matchConstraints": {"matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {},
                             "resourceRules": RESOURCE_RULES},
        "variables": [
            {"name": "newShard", "expression": _value("object", "labels", labels.SCHEDULED_SHARD_ID)},
            {"name": "oldShard", "expression": _value("oldObject", "labels", labels.SCHEDULED_SHARD_ID)},
            {"name": "pinned", "expression": _value("namespaceObject", "labels", labels.SHARD_ID)},
            {"name": "assigned", "expression": _value("object", "annotations", labels.ASSIGNED_BY_WEBHOOK)},
            {"name": "draining", "expression": f"oldObject != null && has(oldObject.metadata.labels) && "
                                               f"{_str(labels.DRAIN)} in oldObject.metadata.labels"},
            {"name": "privileged", "expression": f"request.userInfo.username in {users} || "
                                                 f"request.userInfo.groups.exists(g, g in {groups})"},
            {"name": "what", "expression": "request.kind.kind == 'WorkflowRun' ? 'workflow run' : 'application'"},
        ],
        "validations": [{
            "expression": "variables.newShard == '' || variables.newShard == variables.oldShard || "
                          "variables.privileged || (variables.oldShard == '' && !variables.draining && "
                          "(variables.newShard == variables.pinned || variables.newShard == variables.assigned))",
            "message": f"only the controller and shard admins may set or change label {labels.SCHEDULED_SHARD_ID}",
            "messageExpression":
                "variables.oldShard != '' ? "
                "'user \"' + request.userInfo.username + '\" may not move ' + variables.what + ' \"' + request.name + "
                f"'\" from shard \"' + variables.oldShard + '\" to \"' + variables.newShard + '\" by changing "
                f"label {labels.SCHEDULED_SHARD_ID}: a move must also move its revisions and trackers; a shard "
                "admin runs `velashard reschedule ' + request.name + ' -n ' + request.namespace + ' --shard-id ' "
                "+ variables.newShard + '`' : "
                "'user \"' + request.userInfo.username + '\" may not choose shard \"' + variables.newShard + "
                f"'\" with label {labels.SCHEDULED_SHARD_ID}: the scheduler assigns shards (a namespace is pinned "
                f"with its {labels.SHARD_ID} label); leave the label out'",
        }],
    }


def guard_objects(privileged_users: Iterable[str], privileged_groups: Iterable[str] = (),
                  name: str = POLICY_NAME) -> tuple[dict[str, Any], dict[str, Any]]:
    """(ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding) with Deny as the action."""
    meta_labels = {"app.kubernetes.io/name": "velashard", "app.kubernetes.io/component": "shard-label-guard"}
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": name, "labels": meta_labels},
              "spec": policy_spec(privileged_users, privileged_groups)}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": name, "labels": meta_labels},
               "spec": {"policyName": name, "validationActions": ["Deny"]}}
    return policy, binding
