"""The core.oam.dev kinds: KubeVela's (v1beta1) and kubevela/workflow's WorkflowRun and Workflow (v1alpha1),
resources for the client and CustomResourceDefinitions to install them."""

from __future__ import annotations

from typing import Any

from velashard.kube.resources import Resource

GROUP = "core.oam.dev"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
SYSTEM_NAMESPACE = "vela-system"

APPLICATIONS = Resource(GROUP, VERSION, "applications", "Application")
APPLICATION_REVISIONS = Resource(GROUP, VERSION, "applicationrevisions", "ApplicationRevision")
RESOURCE_TRACKERS = Resource(GROUP, VERSION, "resourcetrackers", "ResourceTracker", namespaced=False)
COMPONENT_DEFINITIONS = Resource(GROUP, VERSION, "componentdefinitions", "ComponentDefinition")
TRAIT_DEFINITIONS = Resource(GROUP, VERSION, "traitdefinitions", "TraitDefinition")
POLICY_DEFINITIONS = Resource(GROUP, VERSION, "policydefinitions", "PolicyDefinition")
WORKFLOW_STEP_DEFINITIONS = Resource(GROUP, VERSION, "workflowstepdefinitions", "WorkflowStepDefinition")
DEFINITION_RESOURCES = {r.kind: r for r in (COMPONENT_DEFINITIONS, TRAIT_DEFINITIONS, POLICY_DEFINITIONS,
                                            WORKFLOW_STEP_DEFINITIONS)}
# kubevela/workflow's API: a workflow run without an Application, and the template it may refer to.
WORKFLOW_VERSION = "v1alpha1"
WORKFLOW_API_VERSION = f"{GROUP}/{WORKFLOW_VERSION}"
WORKFLOW_RUNS = Resource(GROUP, WORKFLOW_VERSION, "workflowruns", "WorkflowRun")
WORKFLOWS = Resource(GROUP, WORKFLOW_VERSION, "workflows", "Workflow")
# What the shards run, each labelled with its shard: the webhook, the scheduler and moves place both alike.
SCHEDULED_RESOURCES = (APPLICATIONS, WORKFLOW_RUNS)

_FREE = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_STRINGS = {"type": "array", "items": {"type": "string"}}

_TRAIT = {"type": "object", "required": ["type"], "properties": {"type": {"type": "string"}, "properties": _FREE}}
_COMPONENT = {"type": "object", "required": ["name", "type"], "properties": {
    "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63},
    "type": {"type": "string"}, "properties": _FREE, "dependsOn": _STRINGS,
    "traits": {"type": "array", "items": _TRAIT}}}
_STRING = {"type": "string"}
# KubeVela's InputItem and OutputItem: other fields are pruned, and an output without valueFrom is refused
_INPUTS = {"type": "array", "items": {"type": "object", "required": ["from"],
                                      "properties": {"from": _STRING, "parameterKey": _STRING}}}
_OUTPUTS = {"type": "array", "items": {"type": "object", "required": ["name", "valueFrom"],
                                       "properties": {"name": _STRING, "valueFrom": _STRING}}}
# KubeVela's WorkflowStep: a sub-step has every field but subSteps.
_SUB_STEP = {"type": "object", "required": ["type"], "properties": {
    "name": {"type": "string"}, "type": {"type": "string"}, "properties": _FREE, "dependsOn": _STRINGS,
    "if": {"type": "string"}, "timeout": {"type": "string"}, "inputs": _INPUTS, "outputs": _OUTPUTS, "meta": _FREE}}
_STEP = {"type": "object", "required": ["type"], "properties": {
    **_SUB_STEP["properties"], "subSteps": {"type": "array", "items": _SUB_STEP}}}
# kubevela/workflow's: a step may say how its sub-steps run (mode), and meta is {alias}.
_META = {"type": "object", "properties": {"alias": _STRING}}
_RUN_SUB_STEP = {**_SUB_STEP, "properties": {**_SUB_STEP["properties"], "meta": _META}}
_RUN_STEP = {"type": "object", "required": ["type"], "properties": {
    **_RUN_SUB_STEP["properties"], "mode": {"type": "string", "nullable": True},
    "subSteps": {"type": "array", "items": _RUN_SUB_STEP}}}
_MODE = {"type": "object", "properties": {"steps": _STRING, "subSteps": _STRING}}
_STEP_STATUS = {"type": "object", "required": ["id"], "properties": {
    "id": _STRING, "name": _STRING, "type": _STRING, "phase": _STRING, "message": _STRING, "reason": _STRING,
    "firstExecuteTime": {"type": "string", "format": "date-time"},
    "lastExecuteTime": {"type": "string", "format": "date-time"}}}
_WORKFLOW_RUN_SCHEMA = {"type": "object", "properties": {
    "spec": {"type": "object", "properties": {
        "context": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "mode": _MODE,
        "workflowSpec": {"type": "object", "properties": {"steps": {"type": "array", "items": _RUN_STEP}}},
        "workflowRef": _STRING}},
    "status": {"type": "object", "required": ["finished", "mode", "status", "suspend", "terminated"], "properties": {
        "conditions": {"type": "array", "items": {
            "type": "object", "required": ["lastTransitionTime", "reason", "status", "type"], "properties": {
                "lastTransitionTime": {"type": "string", "format": "date-time"}, "message": _STRING,
                "reason": _STRING, "status": _STRING, "type": _STRING}}},
        "contextBackend": {"type": "object", "properties": {
            k: _STRING for k in ("apiVersion", "fieldPath", "kind", "name", "namespace", "resourceVersion", "uid")}},
        "startTime": {"type": "string", "format": "date-time"}, "endTime": {"type": "string", "format": "date-time"},
        "finished": {"type": "boolean"}, "message": _STRING, "mode": _MODE, "status": _STRING,
        "suspend": {"type": "boolean"}, "suspendState": _STRING, "terminated": {"type": "boolean"},
        "steps": {"type": "array", "items": {"type": "object", "required": ["id"], "properties": {
            **_STEP_STATUS["properties"], "subSteps": {"type": "array", "items": _STEP_STATUS}}}}}}}}
# A Workflow is a template: mode and steps at its top level, no spec.
_WORKFLOW_SCHEMA = {"type": "object", "properties": {"mode": _MODE,
                                                     "steps": {"type": "array", "items": _RUN_STEP}}}
_APPLICATION_SCHEMA = {"type": "object", "properties": {
    "spec": {"type": "object", "required": ["components"], "properties": {
        "components": {"type": "array", "items": _COMPONENT},
        "policies": {"type": "array", "items": {"type": "object", "required": ["name", "type"], "properties": {
            "name": {"type": "string"}, "type": {"type": "string"}, "properties": _FREE}}},
        "workflow": {"type": "object", "properties": {"steps": {"type": "array", "items": _STEP},
                                                      "mode": _FREE}}}},
    "status": _FREE}}
_DEFINITION_SCHEMA = {"type": "object", "properties": {
    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
        "workload": _FREE, "schematic": _FREE, "status": _FREE, "appliesToWorkloads": _STRINGS}},
    "status": _FREE}}
_PRESERVED = {"type": "object", "properties": {"spec": _FREE, "status": _FREE}}


def _crd(plural: str, kind: str, short: list[str], schema: dict[str, Any], scope: str = "Namespaced",
         columns: list[dict[str, Any]] | None = None, version_name: str = VERSION,
         status: bool = True) -> dict[str, Any]:
    version: dict[str, Any] = {"name": version_name, "served": True, "storage": True}
    if status:
        version["subresources"] = {"status": {}}
    version["schema"] = {"openAPIV3Schema": schema}
    if columns:
        version["additionalPrinterColumns"] = columns
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{GROUP}"},
            "spec": {"group": GROUP, "scope": scope,
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List",
                               "shortNames": short, "categories": ["oam"]},
                     "versions": [version]}}


_AGE = {"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"}

CRDS: list[dict[str, Any]] = [
    _crd("applications", "Application", ["app"], _APPLICATION_SCHEMA, columns=[
        {"name": "COMPONENT", "type": "string", "jsonPath": ".spec.components[*].name"},
        {"name": "TYPE", "type": "string", "jsonPath": ".spec.components[*].type"},
        {"name": "PHASE", "type": "string", "jsonPath": ".status.status"},
        {"name": "HEALTHY", "type": "boolean", "jsonPath": ".status.services[*].healthy"},
        {"name": "STATUS", "type": "string", "jsonPath": ".status.services[*].message"}, _AGE]),
    _crd("applicationrevisions", "ApplicationRevision", ["apprev"], _PRESERVED, columns=[
        {"name": "REVISION", "type": "integer", "jsonPath": ".spec.revision"},
        {"name": "HASH", "type": "string", "jsonPath": ".spec.hash"}, _AGE]),
    _crd("resourcetrackers", "ResourceTracker", ["rt"], _PRESERVED, scope="Cluster", columns=[_AGE]),
    _crd("componentdefinitions", "ComponentDefinition", ["comp"], _DEFINITION_SCHEMA, columns=[
        {"name": "WORKLOAD-KIND", "type": "string", "jsonPath": ".spec.workload.definition.kind"},
        {"name": "DESCRIPTION", "type": "string",
         "jsonPath": ".metadata.annotations.definition\\.oam\\.dev/description"}, _AGE]),
    _crd("traitdefinitions", "TraitDefinition", ["trait"], _DEFINITION_SCHEMA, columns=[
        {"name": "APPLIES-TO", "type": "string", "jsonPath": ".spec.appliesToWorkloads"},
        {"name": "DESCRIPTION", "type": "string",
         "jsonPath": ".metadata.annotations.definition\\.oam\\.dev/description"}, _AGE]),
    _crd("policydefinitions", "PolicyDefinition", ["def-policy"], _DEFINITION_SCHEMA, columns=[
        {"name": "DESCRIPTION", "type": "string",
         "jsonPath": ".metadata.annotations.definition\\.oam\\.dev/description"}, _AGE]),
    _crd("workflowstepdefinitions", "WorkflowStepDefinition", ["workflowstep"], _DEFINITION_SCHEMA, columns=[
        {"name": "DESCRIPTION", "type": "string",
         "jsonPath": ".metadata.annotations.definition\\.oam\\.dev/description"}, _AGE]),
    _crd("workflowruns", "WorkflowRun", ["wr"], _WORKFLOW_RUN_SCHEMA, version_name=WORKFLOW_VERSION, columns=[
        {"name": "PHASE", "type": "string", "jsonPath": ".status.status"}, _AGE]),
    _crd("workflows", "Workflow", [], _WORKFLOW_SCHEMA, version_name=WORKFLOW_VERSION, status=False),
]
