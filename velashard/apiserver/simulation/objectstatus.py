"""`--simulate-workloads` for the objects KubeVela's traits create beside workloads: the status the
ingress controller, the volume binder and the cloud load balancer would write (the autoscaler is
simulated with the workloads it scales, in workloads.py)."""

from __future__ import annotations

from typing import Any

# (group, resource) -> kind of the objects this module gives a status
SIMULATED = {("networking.k8s.io", "ingresses"), ("", "persistentvolumeclaims"), ("", "services")}
_LB_INGRESS = {"loadBalancer": {"ingress": [{"ip": "127.0.0.1"}]}}


def object_status(kind: str, obj: dict[str, Any], now: str) -> dict[str, Any] | None:
    """The status to write for `obj`, or None when it already has it (or its kind gets none)."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    if kind == "Ingress":
        return None if status.get("loadBalancer", {}).get("ingress") else _LB_INGRESS
    if kind == "PersistentVolumeClaim":
        if status.get("phase") == "Bound":
            return None
        storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
        return {"phase": "Bound", "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                "capacity": {"storage": storage}}
    if kind == "Service" and spec.get("type") == "LoadBalancer":
        return None if status.get("loadBalancer", {}).get("ingress") else _LB_INGRESS
    return None
