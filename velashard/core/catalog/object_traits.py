"""Built-in traits that add objects of their own beside the workload: an Ingress, a Service, an
autoscaler, volumes with the claims, maps and secrets behind them. KubeVela's names, parameters and
defaults; our own templates (see traits.py for the template contract)."""

from __future__ import annotations

from typing import Any

from velashard.core.catalog.schema import (INT, MAP, STR, STRS, arr, bool_default, d, enum, int_default, obj,
                                           str_default)

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


OBJECT_TRAITS: dict[str, dict[str, Any]] = {
    "gateway": {"name": "gateway", "description": "Routes public HTTP traffic to the component through an Ingress (and a "
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
    "expose": {"name": "expose", "description": "Exposes ports of the workload through a Service.", "template": """
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
    "cpuscaler": {"name": "cpuscaler", "description": "Scales the workload automatically on CPU usage (HorizontalPodAutoscaler).",
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
    "storage": {"name": "storage", "description": "Adds persistent volume claims, config maps, secrets, emptyDir and hostPath "
                                       "volumes to the workload (creating the claims, maps and secrets).",
     "template": _STORAGE, "parameters": _STORAGE_PARAMS},
}
