"""Pod-spec pieces the built-in templates share, offered to every template as sandbox globals.

They turn KubeVela-shaped parameters (volumeMounts by type, the deprecated volumes list, ports with
expose) into Kubernetes fields, the way KubeVela's webservice family builds them.
"""

from __future__ import annotations

from typing import Any

_MOUNT_TYPES = ("pvc", "configMap", "secret", "emptyDir", "hostPath")


def _mount(v: dict[str, Any]) -> dict[str, Any]:
    out = {"mountPath": v["mountPath"], "name": v["name"]}
    if "subPath" in v:
        out["subPath"] = v["subPath"]
    return out


def _volume(kind: str, v: dict[str, Any]) -> dict[str, Any]:
    if kind == "pvc":
        return {"name": v["name"], "persistentVolumeClaim": {"claimName": v["claimName"]}}
    if kind in ("configMap", "secret"):
        source: dict[str, Any] = {"defaultMode": v.get("defaultMode", 420)}
        source["name" if kind == "configMap" else "secretName"] = v["cmName" if kind == "configMap" else "secretName"]
        if "items" in v:
            source["items"] = v["items"]
        return {"name": v["name"], kind: source}
    if kind == "emptyDir":
        return {"name": v["name"], "emptyDir": {"medium": v.get("medium", "")}}
    return {"name": v["name"], "hostPath": {"path": v["path"]}}


def volume_mounts(parameter: dict[str, Any]) -> list[dict[str, Any]]:
    """The container's volumeMounts: volumeMounts by type wins over the deprecated volumes list."""
    if "volumeMounts" in parameter:
        return [_mount(v) for kind in _MOUNT_TYPES for v in parameter["volumeMounts"].get(kind) or []]
    return [{"mountPath": v["mountPath"], "name": v["name"]} for v in parameter.get("volumes") or []]


def pod_volumes(parameter: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod's volumes, first definition of a name wins (several mounts may share one volume)."""
    if "volumeMounts" in parameter:
        found = [_volume(kind, v) for kind in _MOUNT_TYPES for v in parameter["volumeMounts"].get(kind) or []]
    else:
        found = [_volume(v.get("type", "emptyDir"), v) for v in parameter.get("volumes") or []]
    seen: set[str] = set()
    out = []
    for vol in found:
        if vol["name"] not in seen:
            seen.add(vol["name"])
            out.append(vol)
    return out


def _port_name(v: dict[str, Any], number: int) -> str:
    if "name" in v:
        return v["name"]
    protocol = v.get("protocol", "TCP")
    return f"port-{number}" + ("" if protocol == "TCP" else f"-{protocol.lower()}")


def container_ports(parameter: dict[str, Any]) -> list[dict[str, Any]]:
    if "ports" in parameter:
        return [{"containerPort": v.get("containerPort", v["port"]), "protocol": v.get("protocol", "TCP"),
                 "name": _port_name(v, v.get("containerPort", v["port"]))} for v in parameter["ports"]]
    if "port" in parameter:
        return [{"containerPort": parameter["port"]}]
    return []


def service_ports(parameter: dict[str, Any]) -> list[dict[str, Any]]:
    """Service ports for the `expose: true` ports."""
    out = []
    for v in parameter.get("ports") or []:
        if not v.get("expose"):
            continue
        port = {"port": v["port"], "targetPort": v.get("containerPort", v["port"]),
                "name": _port_name(v, v.get("containerPort", v["port"]))}
        if "nodePort" in v and parameter.get("exposeType") == "NodePort":
            port["nodePort"] = v["nodePort"]
        port["protocol"] = v.get("protocol", "TCP")
        out.append(port)
    return out


def resources(parameter: dict[str, Any]) -> dict[str, Any]:
    """cpu/memory as equal requests and limits, as KubeVela's components set them."""
    amounts = {k: parameter[k] for k in ("cpu", "memory") if k in parameter}
    return {"limits": dict(amounts), "requests": dict(amounts)} if amounts else {}


def name_refs(names: list[str]) -> list[dict[str, str]]:
    return [{"name": n} for n in names]


GLOBALS = {"name_refs": name_refs, "volume_mounts": volume_mounts, "pod_volumes": pod_volumes,
           "container_ports": container_ports, "service_ports": service_ports, "resources": resources}
