"""Built-in trait definitions: KubeVela's names, parameters and defaults; our own templates.

A trait's template yields `patch` (merged into the workload; strategic merge unless `patchType`
says otherwise) and/or `outputs` (extra objects).
"""

from __future__ import annotations

from typing import Any

from velashard.core.catalog.schema import (ENV, HOST_ALIASES, INT, MAP, PROBE, STR, STRS, arr,
                                           bool_default, d, enum, int_default, obj, str_default)

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

_STORAGE = """
{% set mounts = [] %}{% set devices = [] %}{% set volumes = [] %}{% set env = [] %}
{% for v in parameter.pvc | default([]) %}
{% set _ = volumes.append({"name": v.name, "persistentVolumeClaim": {"claimName": v.name}}) %}
{% if v.volumeMode == "Filesystem" %}
{% set _ = mounts.append(dict({"name": v.name, "mountPath": v.mountPath}, **pick(v, "subPath"))) %}
{% elif v.volumeMode == "Block" %}
{% set _ = devices.append({"name": v.name, "devicePath": v.mountPath}) %}
{% endif %}
{% endfor %}
{% for kind in ["configMap", "secret"] %}
{% for v in parameter[kind] | default([]) %}
{% set source = dict({"defaultMode": v.defaultMode}, **pick(v, "items")) %}
{% set _ = source.update({"name": v.name} if kind == "configMap" else {"secretName": v.name}) %}
{% set _ = volumes.append({"name": v.name, kind: source}) %}
{% if v.mountPath is defined %}
{% set _ = mounts.append(dict({"name": v.name, "mountPath": v.mountPath, "readOnly": v.readOnly},
                              **pick(v, "subPath"))) %}
{% endif %}
{% set ref = "configMapKeyRef" if kind == "configMap" else "secretKeyRef" %}
{% if v.mountToEnv is defined %}
{% set _ = env.append({"name": v.mountToEnv.envName,
                       "valueFrom": {ref: {"name": v.name, "key": v.mountToEnv[kind ~ "Key"]}}}) %}
{% endif %}
{% for m in v.mountToEnvs | default([]) %}
{% set _ = env.append({"name": m.envName, "valueFrom": {ref: {"name": v.name, "key": m[kind ~ "Key"]}}}) %}
{% endfor %}
{% endfor %}
{% endfor %}
{% for v in parameter.emptyDir | default([]) %}
{% set _ = volumes.append({"name": v.name, "emptyDir": {"medium": v.medium}}) %}
{% set _ = mounts.append(dict({"name": v.name, "mountPath": v.mountPath}, **pick(v, "subPath"))) %}
{% endfor %}
{% for v in parameter.hostPath | default([]) %}
{% set _ = volumes.append({"name": v.name, "hostPath": dict({"path": v.path}, **pick(v, "type"))}) %}
{% set _ = mounts.append(dict({"name": v.name, "mountPath": v.mountPath}, **pick(v, "subPath"))) %}
{% endfor %}
{% set target = context.output.spec.template.spec.containers[0].name %}
patch:
  spec:
    template:
      spec:
        containers:
        - name: {{ target | toyaml }}
{% if mounts %}
          volumeMounts: {{ mounts | toyaml }}
{% endif %}
{% if devices %}
          volumeDevices: {{ devices | toyaml }}
{% endif %}
{% if env %}
          env: {{ env | toyaml }}
{% endif %}
{% if volumes %}
        volumes: {{ volumes | toyaml }}
{% endif %}
{% set claims = (parameter.pvc | default([])) | rejectattr("mountOnly") | list %}
{% set maps = (parameter.configMap | default([])) | rejectattr("mountOnly") | list %}
{% set secrets = (parameter.secret | default([])) | rejectattr("mountOnly") | list %}
{% if claims or maps or secrets %}
outputs:
{% for v in claims %}
  pvc-{{ v.name }}:
    apiVersion: v1
    kind: PersistentVolumeClaim
    metadata:
      name: {{ v.name | toyaml }}
    spec:
      accessModes: {{ v.accessModes | toyaml }}
      volumeMode: {{ v.volumeMode | toyaml }}
      resources: {{ v.resources | toyaml }}
{% for key in ["storageClassName", "volumeName", "dataSource", "dataSourceRef", "selector"] %}
{% if v[key] is defined %}
      {{ key }}: {{ v[key] | toyaml }}
{% endif %}
{% endfor %}
{% endfor %}
{% for v in maps %}
  configmap-{{ v.name }}:
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: {{ v.name | toyaml }}
{% if v.data is defined %}
    data: {{ v.data | toyaml }}
{% endif %}
{% endfor %}
{% for v in secrets %}
  secret-{{ v.name }}:
    apiVersion: v1
    kind: Secret
    metadata:
      name: {{ v.name | toyaml }}
{% for key in ["data", "stringData"] %}
{% if v[key] is defined %}
    {{ key }}: {{ v[key] | toyaml }}
{% endif %}
{% endfor %}
{% endfor %}
{% endif %}
"""

_QUANTITY = {"type": "string", "pattern": "^([1-9][0-9]{0,63})(E|P|T|G|M|K|Ei|Pi|Ti|Gi|Mi|Ki)$"}
_ITEMS = arr(obj({"key": STR, "path": STR, "mode": int_default(511)}, ("key", "path")))


def _map_source(kind: str) -> dict[str, Any]:
    ref = obj({"envName": STR, f"{kind}Key": STR}, ("envName", f"{kind}Key"))
    props = {"name": STR, "mountOnly": bool_default(False), "mountToEnv": ref, "mountToEnvs": arr(ref),
             "mountPath": STR, "subPath": STR, "defaultMode": int_default(420), "readOnly": bool_default(False),
             "data": {"type": "object"}, "items": _ITEMS}
    if kind == "secret":
        props["stringData"] = {"type": "object"}
    # KubeVela requires a secret's mountPath but not a config map's
    return obj(props, ("name", "mountPath") if kind == "secret" else ("name",))


_STORAGE_PARAMS = obj({
    "pvc": d(arr(obj({
        "name": STR, "mountOnly": bool_default(False), "mountPath": STR, "subPath": STR,
        "volumeMode": str_default("Filesystem"), "volumeName": STR,
        "accessModes": {**STRS, "default": ["ReadWriteOnce"]}, "storageClassName": STR,
        "resources": {**obj({"requests": obj({"storage": _QUANTITY}, ("storage",)),
                             "limits": obj({"storage": _QUANTITY}, ("storage",))}, ("requests",)),
                      "default": {"requests": {"storage": "8Gi"}}},
        "dataSourceRef": obj({"name": STR, "kind": STR, "apiGroup": STR}, ("name", "kind", "apiGroup")),
        "dataSource": obj({"name": STR, "kind": STR, "apiGroup": STR}, ("name", "kind", "apiGroup")),
        "selector": {"type": "object"}}, ("name", "mountPath"))),
        "PersistentVolumeClaims to create (unless mountOnly) and mount"),
    "configMap": d(arr(_map_source("configMap")), "ConfigMaps to create (when data is given) and mount or use as env"),
    "secret": d(arr(_map_source("secret")), "Secrets to create (when data is given) and mount or use as env"),
    "emptyDir": d(arr(obj({"name": STR, "mountPath": STR, "subPath": STR,
                           "medium": enum("", "Memory", default="")}, ("name", "mountPath"))), "emptyDir volumes"),
    "hostPath": d(arr(obj({"name": STR, "path": STR, "mountPath": STR, "subPath": STR,
                           "type": enum("Directory", "DirectoryOrCreate", "FileOrCreate", "File", "Socket",
                                        "CharDevice", "BlockDevice", default="Directory")},
                          ("name", "path", "mountPath"))), "hostPath volumes")})

_AFFINITY_TERMS = arr({"type": "object"})
_TOLERATION = obj({"key": STR, "operator": enum("Equal", "Exists", default="Equal"), "value": STR,
                   "effect": enum("NoSchedule", "PreferNoSchedule", "NoExecute"), "tolerationSeconds": INT})

TRAITS: list[dict[str, Any]] = [
    {"name": "scaler", "description": "Sets the number of replicas.",
     "template": "\npatch:\n  spec:\n    replicas: {{ parameter.replicas }}\n",
     "parameters": obj({"replicas": d({"type": "integer", "minimum": 0, "default": 1}, "Number of replicas")})},
    {"name": "gateway", "description": "Routes public HTTP traffic to the component through an Ingress (and a "
                                       "Service for its ports).",
     "template": """
{% set name = parameter.name | default(context.name) %}
outputs:
  service:
    apiVersion: v1
    kind: Service
    metadata:
      name: {{ context.name | toyaml }}
    spec:
      selector: {"app.oam.dev/component": {{ context.name | toyaml }}}
      ports:
{% for path, port in parameter.http | dictsort %}
      - {port: {{ port }}, targetPort: {{ port }}, name: {{ ("port-" ~ port) | toyaml }}}
{% endfor %}
  ingress:
    apiVersion: networking.k8s.io/v1
    kind: Ingress
    metadata:
      name: {{ name | toyaml }}
      annotations: {{ dict(parameter.annotations | default({}), **({} if parameter.classInSpec else
                      {"kubernetes.io/ingress.class": parameter.class})) | toyaml }}
{% if parameter.labels is defined %}
      labels: {{ parameter.labels | toyaml }}
{% endif %}
    spec:
{% if parameter.classInSpec %}
      ingressClassName: {{ parameter.class | toyaml }}
{% endif %}
{% if parameter.secretName is defined %}
      tls:
      - secretName: {{ parameter.secretName | toyaml }}
{% if parameter.domain is defined %}
        hosts: [{{ parameter.domain | toyaml }}]
{% endif %}
{% endif %}
      rules:
      - http:
          paths:
{% for path, port in parameter.http | dictsort %}
          - path: {{ path | toyaml }}
            pathType: {{ parameter.pathType | toyaml }}
            backend: {service: {name: {{ context.name | toyaml }}, port: {number: {{ port }}}}}
{% endfor %}
{% if parameter.domain is defined %}
        host: {{ parameter.domain | toyaml }}
{% endif %}
""", "parameters": obj({
        "domain": d(STR, "Host name of the route; none routes every host"),
        "http": d({"type": "object", "additionalProperties": INT, "minProperties": 1},
                  "HTTP path -> port of the component"),
        "class": d(str_default("nginx"), "Ingress class"),
        "classInSpec": d(bool_default(False), "Put the class in spec.ingressClassName instead of the "
                                               "kubernetes.io/ingress.class annotation"),
        "secretName": d(STR, "Secret with the TLS certificate"),
        "name": d(STR, "Name of the Ingress (default: the component's)"),
        "pathType": d(enum("ImplementationSpecific", "Prefix", "Exact", default="ImplementationSpecific"),
                      "How paths match"),
        "annotations": d(MAP, "Annotations of the Ingress"), "labels": d(MAP, "Labels of the Ingress"),
        "gatewayHost": d(STR, "Host shown in the status")}, ("http",))},
    {"name": "expose", "description": "Exposes ports of the workload through a Service.", "template": """
outputs:
  service:
    apiVersion: v1
    kind: Service
    metadata:
      name: {{ (parameter.name | default(context.name)) | toyaml }}
      annotations: {{ parameter.annotations | toyaml }}
    spec:
      selector: {{ (parameter.matchLabels | default({"app.oam.dev/component": context.name})) | toyaml }}
      type: {{ parameter.type | toyaml }}
      ports:
{% if parameter.ports is defined %}
{% for v in parameter.ports %}
      - port: {{ v.port }}
        targetPort: {{ v.port }}
        name: {{ v.name | default("port-" ~ v.port ~ ("" if v.protocol == "TCP" else "-" ~ v.protocol | lower))
                 | toyaml }}
        protocol: {{ v.protocol | toyaml }}
{% if v.nodePort is defined and parameter.type == "NodePort" %}
        nodePort: {{ v.nodePort }}
{% endif %}
{% endfor %}
{% else %}
{% for p in parameter.port | default([]) %}
      - {name: {{ ("port-" ~ p) | toyaml }}, port: {{ p }}, targetPort: {{ p }}}
{% endfor %}
{% endif %}
""", "parameters": obj({
        "port": d(arr({"type": "integer", "minimum": 1, "maximum": 65535}), "Deprecated: ports to expose"),
        "ports": d(arr(obj({"port": {"type": "integer", "minimum": 1, "maximum": 65535}, "name": STR,
                            "protocol": enum("TCP", "UDP", "SCTP", default="TCP"), "nodePort": INT}, ("port",))),
                   "Ports to expose"),
        "annotations": d({**MAP, "default": {}}, "Annotations of the Service"),
        "matchLabels": d(MAP, "Pod selector (default: the component's pods)"),
        "name": d(STR, "Name of the Service (default: the component's); velashard's addition"),
        "type": d(enum("ClusterIP", "NodePort", "LoadBalancer", "ExternalName", default="ClusterIP"),
                  "Service type")})},
    {"name": "cpuscaler", "description": "Scales the workload automatically on CPU usage (HorizontalPodAutoscaler).",
     "template": """
outputs:
  cpuscaler:
    apiVersion: autoscaling/v2
    kind: HorizontalPodAutoscaler
    metadata:
      name: {{ context.name | toyaml }}
    spec:
      scaleTargetRef:
        apiVersion: {{ parameter.targetAPIVersion | toyaml }}
        kind: {{ parameter.targetKind | toyaml }}
        name: {{ context.name | toyaml }}
      minReplicas: {{ parameter.min }}
      maxReplicas: {{ parameter.max }}
      metrics:
      - type: Resource
        resource:
          name: cpu
          target: {type: Utilization, averageUtilization: {{ parameter.cpuUtil }}}
""", "parameters": obj({"min": d(int_default(1), "Fewest replicas"), "max": d(int_default(10), "Most replicas"),
                        "cpuUtil": d(int_default(50), "Target average CPU utilization in percent"),
                        "targetAPIVersion": d(str_default("apps/v1"), "apiVersion of the scaled workload"),
                        "targetKind": d(str_default("Deployment"), "kind of the scaled workload")})},
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
    {"name": "storage", "description": "Adds persistent volume claims, config maps, secrets, emptyDir and hostPath "
                                       "volumes to the workload (creating the claims, maps and secrets).",
     "template": _STORAGE, "parameters": _STORAGE_PARAMS},
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
