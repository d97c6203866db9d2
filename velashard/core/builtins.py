"""The built-in component and trait definitions installed into vela-system by `velashard install`."""

from __future__ import annotations

from typing import Any

from velashard.apis.oam import API_VERSION, SYSTEM_NAMESPACE

_STR = {"type": "string"}
_INT = {"type": "integer"}
_STRS = {"type": "array", "items": _STR}
_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_ENV = {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
    "name": _STR, "value": _STR, "valueFrom": {"type": "object"}}, "additionalProperties": False}}

_POD_CONTAINER = """
        containers:
        - name: {{ context.name | toyaml }}
          image: {{ parameter.image | toyaml }}
{% if parameter.cmd is defined %}
          command: {{ parameter.cmd | toyaml }}
{% endif %}
{% if parameter.args is defined %}
          args: {{ parameter.args | toyaml }}
{% endif %}
{% if parameter.env is defined %}
          env: {{ parameter.env | toyaml }}
{% endif %}
{% if parameter.ports is defined %}
          ports:
{% for p in parameter.ports %}
          - containerPort: {{ p.port }}
{% if p.name is defined %}
            name: {{ p.name | toyaml }}
{% endif %}
{% endfor %}
{% endif %}
{% if parameter.cpu is defined or parameter.memory is defined %}
          resources:
            requests: {{ pick(parameter, "cpu", "memory") | toyaml }}
{% endif %}"""

_DEPLOYMENT = """
output:
  apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: {{ context.name | toyaml }}
{% if parameter.labels is defined %}    labels: {{ parameter.labels | toyaml }}
{% endif %}  spec:
    replicas: 1
    selector:
      matchLabels: {"app.oam.dev/component": {{ context.name | toyaml }}}
    template:
      metadata:
        labels: {{ dict(parameter.labels | default({}), **{"app.oam.dev/component": context.name,
                   "app.oam.dev/name": context.appName}) | toyaml }}
      spec:
""" + _POD_CONTAINER

_WEBSERVICE = _DEPLOYMENT + """
{% set exposed = (parameter.ports | default([])) | selectattr("expose") | list %}
{% if exposed %}outputs:
  service:
    apiVersion: v1
    kind: Service
    metadata:
      name: {{ context.name | toyaml }}
    spec:
      selector: {"app.oam.dev/component": {{ context.name | toyaml }}}
      ports:
{% for p in exposed %}      - port: {{ p.port }}
        targetPort: {{ p.port }}
        name: {{ p.name | default("port-" ~ p.port) | toyaml }}
{% endfor %}{% endif %}"""

_TASK = """
output:
  apiVersion: batch/v1
  kind: Job
  metadata:
    name: {{ context.name | toyaml }}
  spec:
    parallelism: {{ parameter.count }}
    completions: {{ parameter.count }}
    template:
      metadata:
        labels: {"app.oam.dev/component": {{ context.name | toyaml }}, "app.oam.dev/name": {{ context.appName | toyaml }}}
      spec:
        restartPolicy: {{ parameter.restart | toyaml }}
""" + _POD_CONTAINER

_WORKLOAD_PARAMS: dict[str, Any] = {"type": "object", "required": ["image"], "properties": {
    "image": _STR, "cmd": _STRS, "args": _STRS, "env": _ENV, "cpu": _STR, "memory": _STR, "labels": _MAP,
    "ports": {"type": "array", "items": {"type": "object", "required": ["port"], "additionalProperties": False,
                                         "properties": {"port": {"type": "integer", "minimum": 1, "maximum": 65535},
                                                        "name": _STR, "expose": {"type": "boolean",
                                                                                 "default": False}}}}}}


def _definition(kind: str, name: str, description: str, jinja: dict[str, Any],
                workload: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"schematic": {"jinja": jinja}}
    if workload:
        group_version, _, wkind = workload.rpartition("/")
        spec["workload"] = {"definition": {"apiVersion": group_version, "kind": wkind}}
    return {"apiVersion": API_VERSION, "kind": kind,
            "metadata": {"name": name, "namespace": SYSTEM_NAMESPACE,
                         "annotations": {"definition.oam.dev/description": description}},
            "spec": spec}


def _component(name: str, description: str, template: str, parameters: dict[str, Any],
               workload: str | None = None, **extra: Any) -> dict[str, Any]:
    return _definition("ComponentDefinition", name, description,
                       {"template": template, "parameters": parameters, **extra}, workload)


def _trait(name: str, description: str, template: str, parameters: dict[str, Any],
           patch_type: str = "strategic") -> dict[str, Any]:
    jinja = {"template": template, "parameters": parameters}
    if patch_type != "strategic":
        jinja["patchType"] = patch_type
    return _definition("TraitDefinition", name, description, jinja)


_TARGET = {"containerName": _STR}
_CONTAINER_PATCH_HEAD = """
{% set containers = context.output.spec.template.spec.containers %}
{% set target = parameter.containerName | default(containers[0].name) %}
"""


def builtin_definitions() -> list[dict[str, Any]]:
    return [
        _component("webservice", "A long-running, scalable, containerized service with a stable endpoint "
                   "(Deployment, plus a Service for exposed ports).", _WEBSERVICE, _WORKLOAD_PARAMS,
                   "apps/v1/Deployment"),
        _component("worker", "A long-running, scalable, containerized workload without a network endpoint.",
                   _DEPLOYMENT, _WORKLOAD_PARAMS, "apps/v1/Deployment"),
        _component("task", "A containerized job that runs to completion.", _TASK, {
            **_WORKLOAD_PARAMS, "properties": {**_WORKLOAD_PARAMS["properties"],
                                               "count": {"type": "integer", "minimum": 1, "default": 1},
                                               "restart": {"type": "string", "enum": ["Never", "OnFailure"],
                                                           "default": "Never"}}}, "batch/v1/Job"),
        _component("k8s-objects", "Literal Kubernetes objects; the first is the workload.", """
output: {{ parameter.objects[0] | toyaml }}
{% if parameter.objects | length > 1 %}outputs:
{% for o in parameter.objects[1:] %}  object-{{ loop.index }}: {{ o | toyaml }}
{% endfor %}{% endif %}""", {"type": "object", "required": ["objects"], "properties": {
            "objects": {"type": "array", "minItems": 1, "items": {"type": "object", "required": ["apiVersion", "kind"]}}}}),
        _component("ref-objects", "Copies of existing objects, by resource and name or label selector.", "", {
            "type": "object", "required": ["objects"], "properties": {"objects": {
                "type": "array", "minItems": 1, "items": {"type": "object", "additionalProperties": False,
                                                          "properties": {"apiVersion": _STR, "kind": _STR,
                                                                         "group": _STR, "resource": _STR,
                                                                         "name": _STR, "namespace": _STR,
                                                                         "labelSelector": _MAP}}}}},
                   refObjects=True),
        _trait("scaler", "Sets the number of replicas.", """
patch:
  spec:
    replicas: {{ parameter.replicas }}""", {"type": "object", "properties": {
            "replicas": {"type": "integer", "minimum": 0, "default": 1}}}),
        _trait("labels", "Adds labels to the workload and its pods.", """
patch:
  metadata:
    labels: {{ parameter | toyaml }}
{% if context.output.spec is defined and context.output.spec.template is defined %}  spec:
    template:
      metadata:
        labels: {{ parameter | toyaml }}
{% endif %}""", _MAP),
        _trait("annotations", "Adds annotations to the workload and its pods.", """
patch:
  metadata:
    annotations: {{ parameter | toyaml }}
{% if context.output.spec is defined and context.output.spec.template is defined %}  spec:
    template:
      metadata:
        annotations: {{ parameter | toyaml }}
{% endif %}""", _MAP),
        _trait("env", "Sets environment variables on a container.", _CONTAINER_PATCH_HEAD + """
patch:
  spec:
    template:
      spec:
        containers:
        - name: {{ target | toyaml }}
          env: {{ parameter.env | dictsort | map("list") | map("zip_env") | list | toyaml }}""", {
            "type": "object", "required": ["env"], "properties": {"env": _MAP, **_TARGET}}),
        _trait("command", "Sets or edits the command and arguments of a container (a delArgs entry ending in '=' "
               "or '-' removes every argument it prefixes).", _CONTAINER_PATCH_HEAD + """
{% set current = (containers | selectattr("name", "equalto", target) | first) %}
{% set args = parameter.args if parameter.args is defined else (current.args | default([])) %}
{% set args = drop_args(args, parameter.delArgs | default([])) + (parameter.addArgs | default([])) %}
patch:
  spec:
    template:
      spec:
        containers:
        - name: {{ target | toyaml }}
{% if parameter.command is defined %}          command: {{ parameter.command | toyaml }}
{% endif %}          args: {{ args | toyaml }}""", {"type": "object", "properties": {
            "command": _STRS, "args": _STRS, "addArgs": _STRS, "delArgs": _STRS, **_TARGET}}),
        _trait("json-patch", "Applies RFC 6902 operations to the workload.", """
patch: {{ parameter.operations | toyaml }}""", {"type": "object", "required": ["operations"], "properties": {
            "operations": {"type": "array", "items": {"type": "object", "required": ["op", "path"]}}}},
               patch_type="json-patch"),
        _trait("json-merge-patch", "Applies an RFC 7386 merge patch (the properties) to the workload.", """
patch: {{ parameter | toyaml }}""", {"type": "object", "additionalProperties": True}, patch_type="json-merge-patch"),
        _trait("expose", "Exposes ports of the workload through a Service.", """
outputs:
  service:
    apiVersion: v1
    kind: Service
    metadata:
      name: {{ (parameter.name | default(context.name)) | toyaml }}
    spec:
      type: {{ parameter.type | toyaml }}
      selector: {{ context.output.spec.selector.matchLabels | toyaml }}
      ports:
{% for p in parameter.port %}      - port: {{ p }}
        targetPort: {{ p }}
        name: {{ ("port-" ~ p) | toyaml }}
{% endfor %}""", {"type": "object", "required": ["port"], "properties": {
            "port": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 1, "maximum": 65535}},
            "type": {"type": "string", "enum": ["ClusterIP", "NodePort", "LoadBalancer"], "default": "ClusterIP"},
            "name": _STR}}),
        _trait("resource", "Sets resource requests and limits of a container.", _CONTAINER_PATCH_HEAD + """
{% set amounts = pick(parameter, "cpu", "memory") %}
patch:
  spec:
    template:
      spec:
        containers:
        - name: {{ target | toyaml }}
          resources:
            requests: {{ (parameter.requests | default(amounts)) | toyaml }}
            limits: {{ (parameter.limits | default(amounts)) | toyaml }}""", {"type": "object", "properties": {
            "cpu": _STR, "memory": _STR, "requests": _MAP, "limits": _MAP, **_TARGET}}),
    ]
