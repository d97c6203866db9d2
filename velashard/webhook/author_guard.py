"""The author guard: a ValidatingAdmissionPolicy that keeps an Application's recorded author true while the
master (whose mutating webhook records it) is down, enforced by the API server alone.

For anyone but the controller and shard admins, a request is denied when
- it carries `app.oam.dev/service-account-name` (KubeVela refuses it while applications are authenticated), or
- it creates an app, changes an app's spec, or touches its author annotations, and the annotations it leaves
  do not name the requester (`request.userInfo`: the username, with --authentication-with-user, and the groups
  that match the group pattern, as the webhook records them).
An app with no author recorded at all may be created and changed (it acts as the default user, whose rights
the platform admin sets); an author once recorded cannot be stripped. With the master up this never denies a
plain write: the webhook has already recorded the requester.

The Helm chart renders the same policy (helm/velashard/templates/author-guard.yaml); a unit test keeps the
two identical.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from velashard.apis import labels
from velashard.core.authors import AuthConfig, SERVICE_ACCOUNT_REFUSED
from velashard.sharding.guard import RESOURCE_RULES

POLICY_NAME = "velashard-author-guard"


def _str(text: str) -> str:
    return json.dumps(text)


def _annotation(obj: str, key: str) -> str:
    """CEL: obj.metadata.annotations[key], or '' when obj, the map or the key is missing."""
    return (f"{obj} != null && has({obj}.metadata.annotations) && {_str(key)} in {obj}.metadata.annotations ? "
            f"{obj}.metadata.annotations[{_str(key)}] : ''")


def _recorded(obj: str) -> str:
    return (f"{obj} != null && has({obj}.metadata.annotations) && ({_str(labels.APP_USERNAME)} in "
            f"{obj}.metadata.annotations || {_str(labels.APP_GROUP)} in {obj}.metadata.annotations)")


def policy_spec(config: AuthConfig, privileged_users: Iterable[str],
                privileged_groups: Iterable[str] = ()) -> dict[str, Any]:
    users = json.dumps(list(dict.fromkeys(privileged_users)), separators=(",", ":"))
    groups = json.dumps(list(dict.fromkeys(privileged_groups)), separators=(",", ":"))
    expected_user = "request.userInfo.username" if config.with_user else "''"
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {},
                             "resourceRules": RESOURCE_RULES},
        "variables": [
            {"name": "newUser", "expression": _annotation("object", labels.APP_USERNAME)},
            {"name": "newGroup", "expression": _annotation("object", labels.APP_GROUP)},
            {"name": "oldUser", "expression": _annotation("oldObject", labels.APP_USERNAME)},
            {"name": "oldGroup", "expression": _annotation("oldObject", labels.APP_GROUP)},
            {"name": "recorded", "expression": _recorded("object")},
            {"name": "wasRecorded", "expression": _recorded("oldObject")},
            {"name": "expectedUser", "expression": expected_user},
            {"name": "expectedGroup", "expression": "request.userInfo.groups.filter(g, g.matches("
                                                    f"{_str(config.group_regex())})).join(',')"},
            {"name": "specChanged", "expression": "oldObject == null || (has(object.spec) ? object.spec : {}) != "
                                                  "(has(oldObject.spec) ? oldObject.spec : {})"},
            {"name": "authorChanged", "expression": "variables.newUser != variables.oldUser || variables.newGroup "
                                                    "!= variables.oldGroup || variables.recorded != "
                                                    "variables.wasRecorded"},
            {"name": "privileged", "expression": f"request.userInfo.username in {users} || "
                                                 f"request.userInfo.groups.exists(g, g in {groups})"},
            {"name": "what", "expression": "request.kind.kind == 'WorkflowRun' ? 'workflow run' : 'application'"},
        ],
        "validations": [
            {"expression": f"variables.privileged || !(has(object.metadata.annotations) && "
                           f"{_str(labels.APP_SERVICE_ACCOUNT)} in object.metadata.annotations)",
             "message": SERVICE_ACCOUNT_REFUSED, "reason": "Forbidden"},
            {"expression": "variables.privileged || !(variables.specChanged || variables.authorChanged) || "
                           "(variables.recorded && variables.newUser == variables.expectedUser && "
                           "variables.newGroup == variables.expectedGroup) || "
                           "(!variables.recorded && !variables.wasRecorded)",
             "message": f"the author annotations {labels.APP_USERNAME} and {labels.APP_GROUP} must name the user "
                        "who writes the application",
             "messageExpression":
                 "variables.recorded && !variables.authorChanged ? "
                 "'user \"' + request.userInfo.username + '\" may not change ' + variables.what + ' \"' + "
                 "request.name + "
                 "'\": its recorded author is \"' + variables.newUser + '\" (groups \"' + variables.newGroup + "
                 "'\"), and only the author may change it while the admission webhook that records authors is "
                 "unreachable; try again once the controller is back' : "
                 "variables.recorded ? "
                 "'user \"' + request.userInfo.username + '\" may not record \"' + variables.newUser + "
                 "'\" (groups \"' + variables.newGroup + '\") as the author of ' + variables.what + ' \"' + "
                 "request.name + "
                 f"'\": leave annotations {labels.APP_USERNAME} and {labels.APP_GROUP} out, the controller "
                 "records who writes it' : "
                 "'user \"' + request.userInfo.username + '\" may not remove the recorded author of ' + "
                 "variables.what + ' \"' + request.name + '\"'",
             "reason": "Forbidden"},
        ],
    }


def guard_objects(config: AuthConfig, privileged_users: Iterable[str], privileged_groups: Iterable[str] = (),
                  name: str = POLICY_NAME) -> tuple[dict[str, Any], dict[str, Any]]:
    """(ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding) with Deny as the action."""
    meta_labels = {"app.kubernetes.io/name": "velashard", "app.kubernetes.io/component": "author-guard"}
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": name, "labels": meta_labels},
              "spec": policy_spec(config, privileged_users, privileged_groups)}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": name, "labels": meta_labels},
               "spec": {"policyName": name, "validationActions": ["Deny"]}}
    return policy, binding
