"""Built-in trait definitions: KubeVela's names, parameters and defaults; our own templates. The traits
that patch the workload and its pods live here; those that add objects of their own, in object_traits.py.

A trait's template yields `patch` (merged into the workload; strategic merge unless `patchType`
says otherwise) and/or `outputs` (extra objects).
"""

from __future__ import annotations

from typing import Any

from velashard.core.catalog.object_traits import OBJECT_TRAITS
from velashard.core.catalog.schema import (ENV, HOST_ALIASES, INT, MAP, PROBE, STR, STRS, arr, bool_default, d,
                                           enum, obj, str_default)

_TARGET = {"containerName": d(str_default(""), "Container to change; empty means the first")}
# The container a trait changes: parameter.containerName, or the first container when it is empty.
_HEAD = """
{% set containers = context.output.spec.template.spec.containers %}
{% set target = (parameter.containerName | default("")) or containers[0].name %}
"""


def _container_patch(body: str) -> str:
    return _HEAD + """
patch:
  spec:
    template:
      spec:
        containers:
        - name: {{ target | toyaml }}
""" + body


_POD_PATCH = """
patch:
  spec:
    template:
      spec:
"""

_HANDLER = obj({"exec": obj({"command": STRS}, ("command",)),
                "httpGet": obj({"path": STR, "port": INT, "host": STR, "scheme": enum("HTTP", "HTTPS"),
                                "httpHeaders": arr(obj({"name": STR, "value": STR}, ("name", "value")))}, ("port",)),
                "tcpSocket": obj({"port": INT, "host": STR}, ("port",))})

_AFFINITY_TERMS = arr({"type": "object"})
_TOLERATION = obj({"key": STR, "operator": enum("Equal", "Exists", default="Equal"), "value": STR,
                   "effect": enum("NoSchedule", "PreferNoSchedule", "NoExecute"), "tolerationSeconds": INT})

TRAITS: list[dict[str, Any]] = [
    {"name": "scaler", "description": "Sets the number of replicas.",
     "template": "\npatch:\n  spec:\n    replicas: {{ parameter.replicas }}\n",
     "parameters": obj({"replicas": d({"type": "integer", "minimum": 0, "default": 1}, "Number of replicas")})},
    OBJECT_TRAITS["gateway"],
    OBJECT_TRAITS["expose"],
    OBJECT_TRAITS["cpuscaler"],
    {"name": "sidecar", "description": "Adds a sidecar container to the workload's pods.",
     "template": _POD_PATCH + """        containers:
        - name: {{ parameter.name | toyaml }}
          image: {{ parameter.image | toyaml }}
{% for key, field in [("cmd", "command"), ("args", "args"), ("env", "env"), ("livenessProbe", "livenessProbe"),
                      ("readinessProbe", "readinessProbe")] %}
{% if parameter[key] is defined %}
          {{ field }}: {{ parameter[key] | toyaml }}
{% endif %}
{% endfor %}
{% if parameter.volumes is defined %}
          volumeMounts:
{% for v in parameter.volumes %}
          - {mountPath: {{ v.path | toyaml }}, name: {{ v.name | toyaml }}}
{% endfor %}
{% endif %}
""", "parameters": obj({"name": d(STR, "Name of the sidecar container"), "image": d(STR, "Image of the sidecar"),
                        "cmd": d(STRS, "Command"), "args": d(STRS, "Arguments"), "env": d(ENV, "Environment"),
                        "volumes": d(arr(obj({"name": STR, "path": STR}, ("name", "path"))), "Shared volumes to mount"),
                        "livenessProbe": d(PROBE, "Liveness probe"), "readinessProbe": d(PROBE, "Readiness probe")},
                       ("name", "image"))},
    {"name": "init-container", "description": "Adds an init container sharing an emptyDir volume with the main "
                                              "container.",
     "template": _HEAD + _POD_PATCH + """        containers:
        - name: {{ target | toyaml }}
          volumeMounts: [{name: {{ parameter.mountName | toyaml }}, mountPath: {{ parameter.appMountPath | toyaml }}}]
        initContainers:
        - name: {{ parameter.name | toyaml }}
          image: {{ parameter.image | toyaml }}
          imagePullPolicy: {{ parameter.imagePullPolicy | toyaml }}
{% for key, field in [("cmd", "command"), ("args", "args"), ("env", "env")] %}
{% if parameter[key] is defined %}
          {{ field }}: {{ parameter[key] | toyaml }}
{% endif %}
{% endfor %}
          volumeMounts: {{ ([{"name": parameter.mountName, "mountPath": parameter.initMountPath}]
                            + parameter.extraVolumeMounts) | toyaml }}
        volumes: [{name: {{ parameter.mountName | toyaml }}, emptyDir: {}}]
""", "parameters": obj({"name": d(STR, "Name of the init container"), "image": d(STR, "Image of the init container"),
                        "imagePullPolicy": d(enum("IfNotPresent", "Always", "Never", default="IfNotPresent"),
                                             "Image pull policy"),
                        "cmd": d(STRS, "Command"), "args": d(STRS, "Arguments"), "env": d(ENV, "Environment"),
                        "mountName": d(str_default("workdir"), "Name of the shared volume"),
                        "appMountPath": d(STR, "Where the main container mounts the shared volume"),
                        "initMountPath": d(STR, "Where the init container mounts the shared volume"),
                        "extraVolumeMounts": d({**arr(obj({"name": STR, "mountPath": STR}, ("name", "mountPath"))),
                                                "default": []}, "More mounts for the init container")},
                       ("name", "image", "appMountPath", "initMountPath"))},
    OBJECT_TRAITS["storage"],
    {"name": "labels", "description": "Adds labels to the workload and its pods.", "template": """
patch:
  metadata:
    labels: {{ parameter | toyaml }}
{% if context.output.spec is defined and context.output.spec.template is defined %}
  spec:
    template:
      metadata:
        labels: {{ parameter | toyaml }}
{% elif context.output.spec is defined and context.output.spec.jobTemplate is defined %}
  spec:
    jobTemplate:
      metadata:
        labels: {{ parameter | toyaml }}
      spec:
        template:
          metadata:
            labels: {{ parameter | toyaml }}
{% endif %}
""", "parameters": {"type": "object", "additionalProperties": {"type": ["string", "null"]}}},
    {"name": "annotations", "description": "Adds annotations to the workload and its pods.", "template": """
patch:
  metadata:
    annotations: {{ parameter | toyaml }}
{% if context.output.spec is defined and context.output.spec.template is defined %}
  spec:
    template:
      metadata:
        annotations: {{ parameter | toyaml }}
{% elif context.output.spec is defined and context.output.spec.jobTemplate is defined %}
  spec:
    jobTemplate:
      metadata:
        annotations: {{ parameter | toyaml }}
      spec:
        template:
          metadata:
            annotations: {{ parameter | toyaml }}
{% endif %}
""", "parameters": {"type": "object", "additionalProperties": {"type": ["string", "null"]}}},
    {"name": "env", "description": "Sets, replaces or unsets environment variables of a container.",
     "template": _container_patch("""
{% set current = (containers | selectattr("name", "equalto", target) | first).env | default([]) %}
{% set keep = [] if parameter.replace else current | rejectattr("name", "in", parameter.env.keys() | list)
              | rejectattr("name", "in", parameter.unset) | list %}
          env:
          - {"$patch": "replace"}
{% for e in keep + (parameter.env | dictsort | map("list") | map("zip_env") | list) %}
          - {{ e | toyaml }}
{% endfor %}
"""), "parameters": obj({"env": d({**MAP, "default": {}}, "Variables to set"),
                          "replace": d(bool_default(False), "Replace all existing variables"),
                          "unset": d({**STRS, "default": []}, "Variables to remove"), **_TARGET})},
    {"name": "command", "description": "Sets or edits the command and arguments of a container (a delArgs entry "
                                       "ending in '=' or '-' removes every argument it prefixes).",
     "template": _container_patch("""
{% set current = (containers | selectattr("name", "equalto", target) | first) %}
{% set args = parameter.args if parameter.args is defined else (current.args | default([])) %}
{% set args = drop_args(args, parameter.delArgs | default([])) + (parameter.addArgs | default([])) %}
{% if parameter.command is defined %}
          command: {{ parameter.command | toyaml }}
{% endif %}
          args: {{ args | toyaml }}
"""), "parameters": obj({"command": d(STRS, "Command to set"), "args": d(STRS, "Arguments to set"),
                          "addArgs": d(STRS, "Arguments to append"), "delArgs": d(STRS, "Arguments to remove"),
                          **_TARGET})},
    {"name": "container-image", "description": "Sets the image (and pull policy) of a container.",
     "template": _container_patch("""
          image: {{ parameter.image | toyaml }}
{% if parameter.imagePullPolicy %}
          imagePullPolicy: {{ parameter.imagePullPolicy | toyaml }}
{% endif %}
"""), "parameters": obj({"image": d(STR, "Image of the container"),
                          "imagePullPolicy": d(enum("", "IfNotPresent", "Always", "Never", default=""),
                                               "Image pull policy (empty keeps it)"), **_TARGET}, ("image",))},
    {"name": "container-ports", "description": "Adds or changes ports of a container.",
     "template": _container_patch("""
          ports: {{ parameter.ports | toyaml }}
"""), "parameters": obj({"ports": d(arr(obj({"containerPort": INT, "protocol": enum("TCP", "UDP", "SCTP",
                                                                                     default="TCP"),
                                                "hostPort": INT, "hostIP": STR}, ("containerPort",))),
                                     "Ports of the container"), **_TARGET}, ("ports",))},
    {"name": "resource", "description": "Sets resource requests and limits of a container.",
     "template": _container_patch("""
{% set amounts = pick(parameter, "cpu", "memory") %}
          resources:
            requests: {{ (parameter.requests | default(amounts)) | toyaml }}
            limits: {{ (parameter.limits | default(amounts)) | toyaml }}
"""), "parameters": obj({"cpu": d({"type": ["string", "number"]}, "CPU request and limit"),
                          "memory": d(STR, "Memory request and limit"),
                          "requests": d(obj({"cpu": {"type": ["string", "number"]}, "memory": STR}), "Requests"),
                          "limits": d(obj({"cpu": {"type": ["string", "number"]}, "memory": STR}), "Limits"),
                          **_TARGET})},
    {"name": "hostalias", "description": "Adds entries to the pods' hosts file.",
     "template": _POD_PATCH + "        hostAliases: {{ parameter.hostAliases | toyaml }}\n",
     "parameters": obj({"hostAliases": d(HOST_ALIASES, "ip and hostnames")}, ("hostAliases",))},
    {"name": "affinity", "description": "Sets pod affinity, anti-affinity, node affinity and tolerations.",
     "template": _POD_PATCH + """
{% set out = {} %}
{% for kind in ["podAffinity", "podAntiAffinity"] %}
{% if parameter[kind] is defined %}
{% set part = {} %}
{% if parameter[kind].required is defined %}
{% set _ = part.update({"requiredDuringSchedulingIgnoredDuringExecution": parameter[kind].required}) %}
{% endif %}
{% if parameter[kind].preferred is defined %}
{% set _ = part.update({"preferredDuringSchedulingIgnoredDuringExecution": parameter[kind].preferred}) %}
{% endif %}
{% set _ = out.update({kind: part}) %}
{% endif %}
{% endfor %}
{% if parameter.nodeAffinity is defined %}
{% set part = {} %}
{% if parameter.nodeAffinity.required is defined %}
{% set _ = part.update({"requiredDuringSchedulingIgnoredDuringExecution": parameter.nodeAffinity.required}) %}
{% endif %}
{% if parameter.nodeAffinity.preferred is defined %}
{% set _ = part.update({"preferredDuringSchedulingIgnoredDuringExecution": parameter.nodeAffinity.preferred}) %}
{% endif %}
{% set _ = out.update({"nodeAffinity": part}) %}
{% endif %}
{% if out %}
        affinity: {{ out | toyaml }}
{% endif %}
{% if parameter.tolerations is defined %}
        tolerations: {{ parameter.tolerations | toyaml }}
{% endif %}
""", "parameters": obj({
        "podAffinity": d(obj({"required": _AFFINITY_TERMS, "preferred": _AFFINITY_TERMS}), "Pod affinity"),
        "podAntiAffinity": d(obj({"required": _AFFINITY_TERMS, "preferred": _AFFINITY_TERMS}), "Pod anti-affinity"),
        "nodeAffinity": d(obj({"required": {"type": "object"}, "preferred": _AFFINITY_TERMS}), "Node affinity"),
        "tolerations": d(arr(_TOLERATION), "Tolerations")})},
    {"name": "topologyspreadconstraints", "description": "Spreads pods across topology domains.",
     "template": _POD_PATCH + "        topologySpreadConstraints: {{ parameter.constraints | toyaml }}\n",
     "parameters": obj({"constraints": d(arr(obj({
         "maxSkew": INT, "topologyKey": STR,
         "whenUnsatisfiable": enum("DoNotSchedule", "ScheduleAnyway", default="DoNotSchedule"),
         "labelSelector": {"type": "object"}, "minDomains": INT, "matchLabelKeys": STRS,
         "nodeAffinityPolicy": enum("Honor", "Ignore", default="Honor"),
         "nodeTaintsPolicy": enum("Honor", "Ignore", default="Honor")},
         ("maxSkew", "topologyKey", "labelSelector"))), "Constraints")}, ("constraints",))},
    {"name": "securitycontext", "description": "Sets the security context of a container.",
     "template": _container_patch("""
{% set ctx = pick(parameter, "allowPrivilegeEscalation", "readOnlyRootFilesystem", "privileged", "runAsNonRoot",
                  "runAsUser", "runAsGroup") %}
{% set caps = {} %}
{% if parameter.addCapabilities is defined %}{% set _ = caps.update({"add": parameter.addCapabilities}) %}{% endif %}
{% if parameter.dropCapabilities is defined %}{% set _ = caps.update({"drop": parameter.dropCapabilities}) %}{% endif %}
{% if caps %}{% set _ = ctx.update({"capabilities": caps}) %}{% endif %}
          securityContext: {{ ctx | toyaml }}
"""), "parameters": obj({"addCapabilities": d(STRS, "Capabilities to add"),
                          "dropCapabilities": d(STRS, "Capabilities to drop"),
                          "allowPrivilegeEscalation": d(bool_default(False), "Allow privilege escalation"),
                          "readOnlyRootFilesystem": d(bool_default(False), "Read-only root filesystem"),
                          "privileged": d(bool_default(False), "Privileged container"),
                          "runAsNonRoot": d(bool_default(True), "Must run as a non-root user"),
                          "runAsUser": d(INT, "User id"), "runAsGroup": d(INT, "Group id"), **_TARGET})},
    {"name": "podsecuritycontext", "description": "Sets the security context of the pods.",
     "template": _POD_PATCH + """        securityContext: {{ pick(parameter, "appArmorProfile", "fsGroup", "runAsGroup",
            "runAsUser", "runAsNonRoot", "seccompProfile", "seLinuxOptions", "supplementalGroups", "sysctls")
            | toyaml }}
""", "parameters": obj({"appArmorProfile": d(obj({"type": enum("RuntimeDefault", "Unconfined", "Localhost"),
                                                   "localhostProfile": STR}, ("type",)), "AppArmor profile"),
                        "fsGroup": d(INT, "Group owning mounted volumes"), "runAsGroup": d(INT, "Group id"),
                        "runAsUser": d(INT, "User id"), "runAsNonRoot": d(bool_default(True), "Must run as non-root"),
                        "seccompProfile": d(obj({"type": enum("RuntimeDefault", "Unconfined", "Localhost"),
                                                 "localhostProfile": STR}, ("type",)), "Seccomp profile"),
                        "seLinuxOptions": d({"type": "object"}, "SELinux options"),
                        "supplementalGroups": d(arr(INT), "Supplemental groups"),
                        "sysctls": d(arr(obj({"name": STR, "value": STR}, ("name", "value"))), "Sysctls")})},
    {"name": "startup-probe", "description": "Adds a startup probe to a container.",
     "template": _container_patch("""
          startupProbe: {{ pick(parameter, "exec", "httpGet", "grpc", "tcpSocket", "initialDelaySeconds",
                             "periodSeconds", "timeoutSeconds", "successThreshold", "failureThreshold",
                             "terminationGracePeriodSeconds") | toyaml }}
"""), "parameters": obj({**PROBE["properties"], "grpc": d(obj({"port": INT, "service": STR}, ("port",)), "gRPC check"),
                          "terminationGracePeriodSeconds": d(INT, "Grace period after a failed probe"),
                          **_TARGET})},
    {"name": "lifecycle", "description": "Adds postStart and preStop hooks to the workload's containers.",
     "template": _HEAD + _POD_PATCH + """        containers:
{% for c in containers %}
        - name: {{ c.name | toyaml }}
          lifecycle: {{ pick(parameter, "postStart", "preStop") | toyaml }}
{% endfor %}
""", "parameters": obj({"postStart": d(_HANDLER, "Hook after the container starts"),
                        "preStop": d(_HANDLER, "Hook before the container stops")})},
    {"name": "service-account", "description": "Runs the pods as a service account (optionally creating it).",
     "template": _POD_PATCH + """        serviceAccountName: {{ parameter.name | toyaml }}
{% if parameter.create %}
outputs:
  service-account:
    apiVersion: v1
    kind: ServiceAccount
    metadata:
      name: {{ parameter.name | toyaml }}
{% endif %}
""", "parameters": obj({"name": d(STR, "Name of the service account"),
                        "create": d(bool_default(False), "Create the service account")}, ("name",))},
    {"name": "service-binding", "description": "Binds keys of secrets to environment variables of the first "
                                               "container.",
     "template": """
{% set target = context.output.spec.template.spec.containers[0].name %}
patch:
  spec:
    template:
      spec:
        containers:
        - name: {{ target | toyaml }}
          env:
{% for env, ref in parameter.envMappings | dictsort %}
          - {name: {{ env | toyaml }}, valueFrom: {secretKeyRef: {name: {{ ref.secret | toyaml }},
             key: {{ (ref.key | default(env)) | toyaml }}}}}
{% endfor %}
""", "parameters": obj({"envMappings": d({"type": "object", "minProperties": 1, "additionalProperties": obj(
         {"secret": STR, "key": STR}, ("secret",))}, "Variable name -> secret and key (key defaults to the name)")},
         ("envMappings",))},
    {"name": "json-patch", "description": "Applies RFC 6902 operations to the workload.",
     "template": "\npatch: {{ parameter.operations | toyaml }}\n", "patchType": "json-patch",
     "parameters": obj({"operations": d(arr({"type": "object", "required": ["op", "path"]}), "The operations")},
                       ("operations",))},
    {"name": "json-merge-patch", "description": "Applies an RFC 7386 merge patch (the properties) to the workload.",
     "template": "\npatch: {{ parameter | toyaml }}\n", "patchType": "json-merge-patch",
     "parameters": {"type": "object", "additionalProperties": True}},
    {"name": "k8s-update-strategy", "description": "Sets the update strategy of a Deployment, StatefulSet or "
                                                   "DaemonSet.",
     "template": """
{% set s = parameter.strategy %}
{% set rolling = s.rollingStrategy | default({}) %}
patch:
  spec:
{% if parameter.targetKind == "Deployment" %}
    strategy:
      type: {{ s.type | toyaml }}
{% if s.type == "RollingUpdate" %}
      rollingUpdate: {maxSurge: {{ rolling.maxSurge | default("25%") | toyaml }},
                      maxUnavailable: {{ rolling.maxUnavailable | default("25%") | toyaml }}}
{% endif %}
{% else %}
    updateStrategy:
      type: {{ s.type | toyaml }}
{% if s.type == "RollingUpdate" and parameter.targetKind == "StatefulSet" %}
      rollingUpdate: {partition: {{ rolling.partition | default(0) }}}
{% elif s.type == "RollingUpdate" %}
      rollingUpdate: {maxSurge: {{ rolling.maxSurge | default(0) | toyaml }},
                      maxUnavailable: {{ rolling.maxUnavailable | default(1) | toyaml }}}
{% endif %}
{% endif %}
""", "parameters": obj({"targetAPIVersion": d(str_default("apps/v1"), "apiVersion of the workload"),
                        "targetKind": d(enum("Deployment", "StatefulSet", "DaemonSet", default="Deployment"),
                                        "kind of the workload"),
                        "strategy": d({**obj({"type": enum("RollingUpdate", "Recreate", "OnDelete",
                                                           default="RollingUpdate"),
                                              "rollingStrategy": obj({"maxSurge": {"type": ["string", "integer"]},
                                                                      "maxUnavailable": {"type": ["string",
                                                                                                  "integer"]},
                                                                      "partition": INT})}),
                                       "default": {}}, "Update strategy")})},
]
