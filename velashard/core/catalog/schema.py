"""JSON-schema fragments for the built-in definitions' parameters, named after KubeVela's parameter blocks."""

from __future__ import annotations

from typing import Any


def d(schema: dict[str, Any], description: str) -> dict[str, Any]:
    """A schema with a one-line description (shown by `velashard def show`)."""
    return {**schema, "description": description}


def obj(properties: dict[str, Any], required: tuple[str, ...] = (), open_: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": open_}
    if required:
        out["required"] = list(required)
    return out


def arr(items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "array", "items": items, **extra}


def enum(*values: Any, default: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"enum": list(values)}
    if default is not None:
        out["default"] = default
    return out


STR = {"type": "string"}
INT = {"type": "integer"}
STRS = arr(STR)
MAP = {"type": "object", "additionalProperties": {"type": "string"}}
PORT = {"type": "integer", "minimum": 1, "maximum": 65535}


def int_default(value: int) -> dict[str, Any]:
    return {"type": "integer", "default": value}


def bool_default(value: bool) -> dict[str, Any]:
    return {"type": "boolean", "default": value}


def str_default(value: str) -> dict[str, Any]:
    return {"type": "string", "default": value}


_KEY_REF = obj({"name": STR, "key": STR}, ("name", "key"))
ENV = arr(obj({"name": STR, "value": STR, "valueFrom": obj({
    "secretKeyRef": _KEY_REF, "configMapKeyRef": _KEY_REF, "fieldRef": obj({"fieldPath": STR}, ("fieldPath",))})},
    ("name",)))

PROBE = obj({
    "exec": obj({"command": STRS}, ("command",)),
    "httpGet": obj({"path": STR, "port": INT, "host": STR, "scheme": STR,
                    "httpHeaders": arr(obj({"name": STR, "value": STR}, ("name", "value")))}, ("path", "port")),
    "tcpSocket": obj({"port": INT}, ("port",)),
    "initialDelaySeconds": int_default(0), "periodSeconds": int_default(10), "timeoutSeconds": int_default(1),
    "successThreshold": int_default(1), "failureThreshold": int_default(3)})

_ITEMS = arr(obj({"key": STR, "path": STR, "mode": int_default(511)}, ("key", "path")))
_MOUNT = {"name": STR, "mountPath": STR, "subPath": STR}
VOLUME_MOUNTS = obj({
    "pvc": arr(obj({**_MOUNT, "claimName": STR}, ("name", "mountPath", "claimName"))),
    "configMap": arr(obj({**_MOUNT, "defaultMode": int_default(420), "cmName": STR, "items": _ITEMS},
                         ("name", "mountPath", "cmName"))),
    "secret": arr(obj({**_MOUNT, "defaultMode": int_default(420), "secretName": STR, "items": _ITEMS},
                      ("name", "mountPath", "secretName"))),
    "emptyDir": arr(obj({**_MOUNT, "medium": enum("", "Memory", default="")}, ("name", "mountPath"))),
    "hostPath": arr(obj({**_MOUNT, "path": STR}, ("name", "mountPath", "path")))})

# The deprecated flat list; per-type fields are checked by `type` like KubeVela's conditional fields.
VOLUMES = arr({
    "type": "object", "required": ["name", "mountPath"], "additionalProperties": False,
    "properties": {"name": STR, "mountPath": STR, "type": enum("emptyDir", "pvc", "configMap", "secret",
                                                                default="emptyDir"),
                   "claimName": STR, "defaultMode": INT, "cmName": STR, "secretName": STR, "items": _ITEMS,
                   "medium": enum("", "Memory")},
    "allOf": [{"if": {"properties": {"type": {"const": t}}, "required": ["type"]}, "then": {"required": [f]}}
              for t, f in (("pvc", "claimName"), ("configMap", "cmName"), ("secret", "secretName"))]})

HOST_ALIASES = arr(obj({"ip": STR, "hostnames": STRS}, ("ip", "hostnames")))
PULL_POLICY = enum("Always", "Never", "IfNotPresent")


def container_parameters(ports: bool = False, args: bool = True) -> dict[str, Any]:
    """The parameters every container-based component shares (KubeVela's webservice family)."""
    props: dict[str, Any] = {
        "labels": d(MAP, "Labels of the workload's pods"),
        "annotations": d(MAP, "Annotations of the workload's pods"),
        "image": d(STR, "Container image"),
        "imagePullPolicy": d(PULL_POLICY, "Image pull policy"),
        "imagePullSecrets": d(STRS, "Names of image pull secrets"),
        "cmd": d(STRS, "Command to run in the container"),
        "env": d(ENV, "Environment variables of the container"),
        "cpu": d(STR, "CPU request and limit, like 0.5 or 500m"),
        "memory": d(STR, "Memory request and limit, like 256Mi"),
        "volumeMounts": d(VOLUME_MOUNTS, "Volumes to mount, by type"),
        "volumes": d(VOLUMES, "Deprecated: use volumeMounts"),
        "livenessProbe": d(PROBE, "Probe telling whether the container is alive"),
        "readinessProbe": d(PROBE, "Probe telling whether the container can serve traffic"),
        "hostAliases": d(HOST_ALIASES, "Extra entries for the pod's hosts file"),
    }
    if args:
        props["args"] = d(STRS, "Arguments to the entrypoint")
    if ports:
        props.update({
            "port": d(PORT, "Deprecated: use ports"),
            "ports": d(arr(obj({"port": PORT, "containerPort": PORT, "name": STR,
                                "protocol": enum("TCP", "UDP", "SCTP", default="TCP"),
                                "expose": bool_default(False), "nodePort": INT}, ("port",))),
                       "Container ports; expose: true ones get a Service"),
            "exposeType": d(enum("ClusterIP", "NodePort", "LoadBalancer", "ExternalName", default="ClusterIP"),
                            "Type of the Service for exposed ports"),
            "addRevisionLabel": d(bool_default(False), "Label pods with the app revision"),
        })
    return obj(props, ("image",))
