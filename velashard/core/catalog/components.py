"""Built-in component definitions: KubeVela's names, parameters and defaults; our own templates."""

from __future__ import annotations

from typing import Any

from velashard.core.catalog.schema import (INT, MAP, STR, arr, bool_default, container_parameters, d,
                                           enum, int_default, obj, str_default)

# Pod metadata and spec for the webservice family; `indent` is filled in per workload kind.
_POD = """
{% set pod_labels = dict(parameter.labels | default({})) %}
{% if parameter.addRevisionLabel | default(false) %}
{% set _ = pod_labels.update({"app.oam.dev/revision": context.revision}) %}
{% endif %}
{% set _ = pod_labels.update({"app.oam.dev/name": context.appName, "app.oam.dev/component": context.name}) %}
metadata:
  labels: {{ pod_labels | toyaml }}
{% if parameter.annotations is defined %}
  annotations: {{ parameter.annotations | toyaml }}
{% endif %}
spec:
{% if restart is defined %}
  restartPolicy: {{ restart | toyaml }}
{% endif %}
  containers:
  - name: {{ context.name | toyaml }}
    image: {{ parameter.image | toyaml }}
{% if container_ports(parameter) %}
    ports: {{ container_ports(parameter) | toyaml }}
{% endif %}
{% if parameter.imagePullPolicy is defined %}
    imagePullPolicy: {{ parameter.imagePullPolicy | toyaml }}
{% endif %}
{% if parameter.cmd is defined %}
    command: {{ parameter.cmd | toyaml }}
{% endif %}
{% if parameter.args is defined %}
    args: {{ parameter.args | toyaml }}
{% endif %}
{% if parameter.env is defined %}
    env: {{ parameter.env | toyaml }}
{% endif %}
{% if resources(parameter) %}
    resources: {{ resources(parameter) | toyaml }}
{% endif %}
{% if volume_mounts(parameter) %}
    volumeMounts: {{ volume_mounts(parameter) | toyaml }}
{% endif %}
{% if parameter.livenessProbe is defined %}
    livenessProbe: {{ parameter.livenessProbe | toyaml }}
{% endif %}
{% if parameter.readinessProbe is defined %}
    readinessProbe: {{ parameter.readinessProbe | toyaml }}
{% endif %}
{% if parameter.hostAliases is defined %}
  hostAliases: {{ parameter.hostAliases | toyaml }}
{% endif %}
{% if parameter.imagePullSecrets is defined %}
  imagePullSecrets: {{ name_refs(parameter.imagePullSecrets) | toyaml }}
{% endif %}
{% if pod_volumes(parameter) %}
  volumes: {{ pod_volumes(parameter) | toyaml }}
{% endif %}
"""


def _indent(text: str, spaces: int) -> str:
    pad = " " * spaces
    return "\n".join(pad + line if line.strip() and not line.startswith("{%") else line
                     for line in text.strip("\n").splitlines()) + "\n"


_SERVICE = """
{% set exposed = service_ports(parameter) %}
{% if exposed %}
outputs:
  {{ service_key }}:
    apiVersion: v1
    kind: Service
    metadata:
      name: {{ context.name | toyaml }}
    spec:
      selector: {"app.oam.dev/component": {{ context.name | toyaml }}}
      ports: {{ exposed | toyaml }}
      type: {{ parameter.exposeType | toyaml }}
{% endif %}
"""


def _pod_workload(api_version: str, kind: str, service_key: str | None, spec_extra: str = "") -> str:
    head = f"""
output:
  apiVersion: {api_version}
  kind: {kind}
  spec:
    selector:
      matchLabels: {{"app.oam.dev/component": {{{{ context.name | toyaml }}}}}}
{spec_extra}    template:
"""
    text = head + _indent(_POD, 6)
    if service_key:
        text += "{% set service_key = \"" + service_key + "\" %}" + _SERVICE
    return text


_TASK = """
{% set restart = parameter.restart %}
output:
  apiVersion: batch/v1
  kind: Job
  spec:
    parallelism: {{ parameter.count }}
    completions: {{ parameter.count }}
    template:
""" + _indent(_POD, 6)

_CRON_TASK = """
{% set restart = parameter.restart %}
output:
  apiVersion: batch/v1
  kind: CronJob
  spec:
    schedule: {{ parameter.schedule | toyaml }}
    concurrencyPolicy: {{ parameter.concurrencyPolicy | toyaml }}
    suspend: {{ parameter.suspend | toyaml }}
    successfulJobsHistoryLimit: {{ parameter.successfulJobsHistoryLimit }}
    failedJobsHistoryLimit: {{ parameter.failedJobsHistoryLimit }}
{% if parameter.startingDeadlineSeconds is defined %}
    startingDeadlineSeconds: {{ parameter.startingDeadlineSeconds }}
{% endif %}
    jobTemplate:
      metadata:
        labels: {{ dict(parameter.labels | default({}), **{"app.oam.dev/name": context.appName,
                  "app.oam.dev/component": context.name}) | toyaml }}
{% if parameter.annotations is defined %}
        annotations: {{ parameter.annotations | toyaml }}
{% endif %}
      spec:
        parallelism: {{ parameter.count }}
        completions: {{ parameter.count }}
{% if parameter.ttlSecondsAfterFinished is defined %}
        ttlSecondsAfterFinished: {{ parameter.ttlSecondsAfterFinished }}
{% endif %}
{% if parameter.activeDeadlineSeconds is defined %}
        activeDeadlineSeconds: {{ parameter.activeDeadlineSeconds }}
{% endif %}
        backoffLimit: {{ parameter.backoffLimit }}
        template:
""" + _indent(_POD, 10)

_K8S_OBJECTS = """
output: {{ parameter.objects[0] | toyaml }}
{% if parameter.objects | length > 1 %}
outputs:
{% for o in parameter.objects[1:] %}
  objects-{{ loop.index }}: {{ o | toyaml }}
{% endfor %}
{% endif %}
"""

_RAW = """
output: {{ parameter | toyaml }}
"""

# Health rules over the live workload (sandboxed Jinja expressions), KubeVela's healthPolicy in our words.
_REPLICAS_HEALTH = ("(context.output.status.readyReplicas | default(0)) == (context.output.spec.replicas | default(1))"
                    " and (context.output.status.updatedReplicas | default(0)) == (context.output.spec.replicas"
                    " | default(1)) and (context.output.status.replicas | default(0)) == (context.output.spec.replicas"
                    " | default(1)) and (context.output.status.observedGeneration | default(0)) >="
                    " (context.output.metadata.generation | default(0))")
_DAEMON_HEALTH = ("(context.output.status.numberReady | default(0)) == (context.output.status.desiredNumberScheduled"
                  " | default(0)) and (context.output.status.observedGeneration | default(0)) >="
                  " (context.output.metadata.generation | default(0))")
_TASK_HEALTH = "(context.output.status.succeeded | default(0)) == (context.output.spec.parallelism | default(1))"


def _with(base: dict[str, Any], **props: Any) -> dict[str, Any]:
    return {**base, "properties": {**base["properties"], **props}}


def _without(base: dict[str, Any], *names: str) -> dict[str, Any]:
    return {**base, "properties": {k: v for k, v in base["properties"].items() if k not in names}}


_TASK_PARAMS = _with(_without(container_parameters(), "hostAliases"),
                     count=d(int_default(1), "Number of pods to run in parallel"),
                     restart=d(enum("Never", "OnFailure", default="Never"), "Restart policy of the job's pods"))

_CRON_PARAMS = _with(
    container_parameters(args=False),
    schedule=d(STR, "Schedule in cron format"),
    startingDeadlineSeconds=d(INT, "Deadline in seconds for starting a missed run"),
    suspend=d(bool_default(False), "Suspend subsequent runs"),
    concurrencyPolicy=d(enum("Allow", "Forbid", "Replace", default="Allow"), "How concurrent runs are treated"),
    successfulJobsHistoryLimit=d(int_default(3), "Finished jobs to keep"),
    failedJobsHistoryLimit=d(int_default(1), "Failed jobs to keep"),
    count=d(int_default(1), "Number of pods to run in parallel"),
    restart=d(str_default("Never"), "Restart policy of the job's pods (Never or OnFailure)"),
    ttlSecondsAfterFinished=d(INT, "Lifetime of a finished job"),
    activeDeadlineSeconds=d(INT, "How long a job may be active"),
    backoffLimit=d(int_default(6), "Retries before a job is marked failed"))
_CRON_PARAMS["required"] = ["image", "schedule"]

_REF_OBJECT = obj({"apiVersion": STR, "kind": STR, "group": STR, "resource": STR, "name": STR, "namespace": STR,
                   "cluster": STR, "labelSelector": MAP, "selector": MAP})

COMPONENTS: list[dict[str, Any]] = [
    {"name": "webservice", "workload": "apps/v1/Deployment", "health": _REPLICAS_HEALTH,
     "description": "A long-running, scalable, containerized service with a stable endpoint (Deployment, plus a "
                    "Service for exposed ports).",
     "template": _pod_workload("apps/v1", "Deployment", "webserviceExpose"),
     "parameters": container_parameters(ports=True)},
    {"name": "worker", "workload": "apps/v1/Deployment", "health": _REPLICAS_HEALTH,
     "description": "A long-running, scalable, containerized workload without a network endpoint.",
     "template": _pod_workload("apps/v1", "Deployment", None),
     "parameters": _without(container_parameters(), "hostAliases")},
    {"name": "task", "workload": "batch/v1/Job", "health": _TASK_HEALTH,
     "description": "A containerized job that runs to completion.", "template": _TASK, "parameters": _TASK_PARAMS},
    {"name": "cron-task", "workload": "batch/v1/CronJob",
     "description": "A containerized job run on a cron schedule.", "template": _CRON_TASK, "parameters": _CRON_PARAMS},
    {"name": "daemon", "workload": "apps/v1/DaemonSet", "health": _DAEMON_HEALTH,
     "description": "A containerized daemon on every node (DaemonSet, plus a Service for exposed ports).",
     "template": _pod_workload("apps/v1", "DaemonSet", "daemonExpose"),
     "parameters": container_parameters(ports=True)},
    {"name": "statefulset", "workload": "apps/v1/StatefulSet", "health": _REPLICAS_HEALTH,
     "description": "A stateful, scalable, containerized service such as a database (StatefulSet, plus a Service for "
                    "exposed ports).",
     "template": _pod_workload("apps/v1", "StatefulSet", "statefulsetsExpose",
                               "    serviceName: {{ context.name | toyaml }}\n"),
     "parameters": _with(container_parameters(ports=True),
                         exposeType=d(enum("ClusterIP", "NodePort", "LoadBalancer", default="ClusterIP"),
                                      "Type of the Service for exposed ports"))},
    {"name": "k8s-objects", "description": "Literal Kubernetes objects; the first is the workload.",
     "template": _K8S_OBJECTS,
     "parameters": obj({"objects": d(arr({"type": "object", "required": ["apiVersion", "kind"]}, minItems=1),
                                     "The objects to apply")}, ("objects",))},
    {"name": "raw", "description": "One literal Kubernetes object (the properties) as the workload.",
     "template": _RAW, "parameters": {"type": "object", "required": ["apiVersion", "kind"],
                                      "additionalProperties": True}},
    {"name": "ref-objects", "description": "Copies of existing objects, by resource and name or label selector.",
     "template": "", "refObjects": True,
     "parameters": obj({"objects": d(arr(_REF_OBJECT, minItems=1), "The objects to copy")}, ("objects",))},
]
