"""Per-kind behaviour of the embedded server: defaults, status handling and validation.

These mirror the "strategies" of kube-apiserver's registries: what a create or update does to an
object before it is stored, and which objects are invalid. Pure functions over plain dicts.
"""

from __future__ import annotations

import base64
import copy
import re
from typing import Any

from velashard.apiserver.admission import policy
from velashard.apiserver.storage import hpa_versions
from velashard.apiserver.storage.selectors import SelectorError, label_selector_from_dict
from velashard.apiserver.storage.validation import Cause, is_dns1123_subdomain

_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")

_RBAC_KINDS = {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}

# Kinds whose status is reset on create, as kube-apiserver does.
_EMPTY_STATUS_ON_CREATE = {"Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet", "ReplicationController",
                           "HorizontalPodAutoscaler"}
# Status counters Kubernetes serializes even when zero (no omitempty; the OpenAPI schema marks them required).
ZERO_STATUS: dict[str, dict[str, int]] = {
    "DaemonSet": {"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0,
                  "numberReady": 0},
    "StatefulSet": {"replicas": 0, "availableReplicas": 0},
    "ReplicaSet": {"replicas": 0},
    "ReplicationController": {"replicas": 0},
    "HorizontalPodAutoscaler": {"desiredReplicas": 0},
}


# Kinds whose registry answers DELETE with the deleted object instead of a Status (kube-apiserver's
# `ReturnDeletedObject`; the official client's delete_* methods declare these return types).
# Custom resources answer with the object too.
RETURNS_DELETED_OBJECT = frozenset({"Pod", "Service", "ServiceAccount", "PersistentVolume", "PersistentVolumeClaim",
                                    "PodTemplate", "ResourceQuota"})


def name_rule(kind: str) -> str:
    """Which DNS rule metadata.name must follow for `kind`."""
    if kind == "Namespace":
        return "label"
    if kind == "Service":
        return "dns1035"
    if kind in _RBAC_KINDS:
        return "path"
    return "subdomain"


def validate_name(kind: str, name: str) -> list[str]:
    rule = name_rule(kind)
    if rule == "path":  # RBAC objects are named like `system:discovery`: any valid path segment
        if name in (".", ".."):
            return [f"may not be '{name}'"]
        return [f"may not contain '{c}'" for c in ("/", "%") if c in name]
    if rule == "dns1035":
        if len(name) > 63:
            return ["must be no more than 63 characters"]
        if not _DNS1035.match(name):
            return ["a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
                    "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"]
        return []
    if rule == "label":
        from velashard.apiserver.storage.validation import is_dns1123_label
        return is_dns1123_label(name)
    return is_dns1123_subdomain(name)


# --- defaults ------------------------------------------------------------------------------------

def _image_pull_policy(image: str) -> str:
    last = image.rsplit("/", 1)[-1]
    if "@" in last:
        return "IfNotPresent"
    if ":" not in last or last.endswith(":latest"):
        return "Always"
    return "IfNotPresent"


def _default_container(c: dict[str, Any]) -> None:
    if isinstance(c.get("image"), str):
        c.setdefault("imagePullPolicy", _image_pull_policy(c["image"]))
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    c.setdefault("resources", {})
    for port in c.get("ports") or ():
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")


def default_pod_spec(spec: dict[str, Any], restart_policy: str = "Always") -> None:
    spec.setdefault("restartPolicy", restart_policy)
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or ():
            if isinstance(c, dict):
                _default_container(c)


def _template_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return None
    template = spec.get("template")
    if not isinstance(template, dict):
        return None
    pod_spec = template.get("spec")
    return pod_spec if isinstance(pod_spec, dict) else None


def apply_defaults(kind: str, obj: dict[str, Any]) -> None:
    """Defaulting kube-apiserver performs on decode (a subset covering the fields users notice)."""
    policy.apply_defaults(kind, obj)
    spec = obj.get("spec")
    if kind == "HorizontalPodAutoscaler":  # objects here are autoscaling/v2, the storage version
        hpa_versions.default_v2(obj)
    if kind in ("ReplicaSet", "ReplicationController") and isinstance(spec, dict):
        spec.setdefault("replicas", 1)
        spec.setdefault("minReadySeconds", 0)
        template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
        if kind == "ReplicationController" and not spec.get("selector") and isinstance(template_labels, dict):
            spec["selector"] = dict(template_labels)  # an RC's selector defaults to its template's labels
        pod_spec = _template_spec(obj)
        if pod_spec is not None:
            default_pod_spec(pod_spec)
    elif kind in ("Deployment", "StatefulSet", "DaemonSet") and isinstance(spec, dict):
        if kind != "DaemonSet":
            spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        if kind == "Deployment":
            spec.setdefault("progressDeadlineSeconds", 600)
            strategy = spec.get("strategy")
            if not isinstance(strategy, dict):
                strategy = spec["strategy"] = {}
            strategy.setdefault("type", "RollingUpdate")  # an empty strategy ({}) is defaulted too
            if strategy["type"] == "RollingUpdate":
                rolling = strategy.setdefault("rollingUpdate", {})
                if isinstance(rolling, dict):
                    rolling.setdefault("maxUnavailable", "25%")
                    rolling.setdefault("maxSurge", "25%")
        elif kind == "StatefulSet":
            spec.setdefault("podManagementPolicy", "OrderedReady")
            update = spec.setdefault("updateStrategy", {})
            if isinstance(update, dict):
                update.setdefault("type", "RollingUpdate")
                if update["type"] == "RollingUpdate":
                    update.setdefault("rollingUpdate", {"partition": 0})
        else:
            update = spec.setdefault("updateStrategy", {})
            if isinstance(update, dict):
                update.setdefault("type", "RollingUpdate")
                if update["type"] == "RollingUpdate":
                    update.setdefault("rollingUpdate", {"maxUnavailable": 1, "maxSurge": 0})
        pod_spec = _template_spec(obj)
        if pod_spec is not None:
            default_pod_spec(pod_spec)
    elif kind == "Job" and isinstance(spec, dict):
        spec.setdefault("parallelism", 1)
        spec.setdefault("completions", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        pod_spec = _template_spec(obj)
        if pod_spec is not None:
            default_pod_spec(pod_spec, restart_policy=pod_spec.get("restartPolicy", ""))
    elif kind == "Pod" and isinstance(spec, dict):
        default_pod_spec(spec)
        spec.setdefault("serviceAccountName", "default")
        spec.setdefault("enableServiceLinks", True)
        spec.setdefault("priority", 0)
    elif kind == "Service" and isinstance(spec, dict):
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec["type"] != "ExternalName":
            spec.setdefault("internalTrafficPolicy", "Cluster")
        for port in spec.get("ports") or ():
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                if "port" in port:
                    port.setdefault("targetPort", port["port"])
    elif kind == "Secret":
        obj.setdefault("type", "Opaque")


# --- create / update preparation -----------------------------------------------------------------

def prepare_for_create(kind: str, obj: dict[str, Any], status_subresource: bool, is_custom: bool,
                       allocate_ip: Any = None) -> None:
    """What kube-apiserver's strategies do to a new object before validation."""
    if status_subresource:
        if is_custom:
            obj.pop("status", None)
        elif kind in _EMPTY_STATUS_ON_CREATE:
            obj["status"] = dict(ZERO_STATUS.get(kind, {}))
        elif kind == "Pod":
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        elif kind == "Namespace":
            obj["status"] = {"phase": "Active"}
        elif kind == "Service":
            obj["status"] = {"loadBalancer": {}}
        elif kind == "CustomResourceDefinition":
            obj["status"] = {}
        elif kind in ("PersistentVolumeClaim", "PersistentVolume"):
            obj["status"] = {"phase": "Pending"}  # until a (here absent) binder binds it
        elif kind in ("Ingress", "ResourceQuota", "PodDisruptionBudget", "CronJob"):
            obj["status"] = {"loadBalancer": {}} if kind == "Ingress" else {}
    meta = obj["metadata"]
    if kind == "Namespace":
        meta["labels"] = dict(meta.get("labels") or {}, **{"kubernetes.io/metadata.name": meta["name"]})
        spec = obj.setdefault("spec", {})
        if isinstance(spec, dict):
            spec["finalizers"] = ["kubernetes"]
    elif kind == "Service" and allocate_ip is not None:
        spec = obj.get("spec")
        if isinstance(spec, dict) and spec.get("type") != "ExternalName" and not spec.get("clusterIP"):
            ip = allocate_ip()
            spec["clusterIP"] = ip
            spec["clusterIPs"] = [ip]
        if isinstance(spec, dict) and spec.get("type") != "ExternalName":
            spec.setdefault("clusterIPs", [spec["clusterIP"]] if spec.get("clusterIP") else [])
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
    elif kind == "Job":
        _default_job_selector(obj)
    elif kind == "Secret":
        _fold_string_data(obj)


def _default_job_selector(obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict) or spec.get("manualSelector") or spec.get("selector"):
        return
    uid = obj["metadata"]["uid"]
    name = obj["metadata"]["name"]
    generated = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                 "controller-uid": uid, "job-name": name}
    spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    template = spec.get("template")
    if isinstance(template, dict):
        tmeta = template.setdefault("metadata", {})
        if isinstance(tmeta, dict):
            tmeta["labels"] = dict(tmeta.get("labels") or {}, **generated)


def _fold_string_data(obj: dict[str, Any]) -> None:
    string_data = obj.pop("stringData", None)
    if isinstance(string_data, dict):
        data = dict(obj.get("data") or {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        obj["data"] = data


def prepare_for_update(kind: str, new: dict[str, Any], old: dict[str, Any], status_subresource: bool,
                       subresource: str | None) -> dict[str, Any]:
    """The object to store for an update of `old` to `new` through the main resource or /status."""
    if subresource == "status":
        merged = copy.copy(old)
        merged["metadata"] = old["metadata"]
        if isinstance(new.get("status"), dict) and kind in ZERO_STATUS:
            merged["status"] = {**ZERO_STATUS[kind], **new["status"]}
        elif "status" in new:
            merged["status"] = new["status"]
        else:
            merged.pop("status", None)
        return merged
    if status_subresource:
        if "status" in old:
            new["status"] = old["status"]
        else:
            new.pop("status", None)
    if kind == "Service":
        spec, old_spec = new.get("spec"), old.get("spec") or {}
        if isinstance(spec, dict):
            # Allocated values may be omitted on update and are kept, as kube-apiserver does.
            for key in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
                if not spec.get(key) and old_spec.get(key):
                    spec[key] = old_spec[key]
    elif kind == "Namespace":
        if subresource != "finalize":  # spec.finalizers change only through /finalize
            new["spec"] = dict(new.get("spec") or {}, finalizers=(old.get("spec") or {}).get("finalizers", []))
        new["metadata"]["labels"] = dict(new["metadata"].get("labels") or {},
                                         **{"kubernetes.io/metadata.name": old["metadata"]["name"]})
    elif kind == "Job":
        spec, old_spec = new.get("spec"), old.get("spec") or {}
        if isinstance(spec, dict) and not spec.get("selector") and old_spec.get("selector"):
            spec["selector"] = old_spec["selector"]
    elif kind == "Secret":
        _fold_string_data(new)
    return new


def spec_changed(old: dict[str, Any], new: dict[str, Any], status_subresource: bool) -> bool:
    """Whether metadata.generation must be bumped: anything but metadata (and status, if it is a subresource)."""
    ignored = {"metadata", "status"} if status_subresource else {"metadata"}
    keys = (set(old) | set(new)) - ignored
    return any(old.get(k) != new.get(k) for k in keys)


# --- validation ----------------------------------------------------------------------------------

def validate(kind: str, obj: dict[str, Any]) -> list[Cause]:
    """Kind-specific validation beyond object metadata."""
    validator = _VALIDATORS.get(kind)
    return validator(obj) if validator else []


def _containers(pod_spec: Any, path: str) -> list[Cause]:
    if not isinstance(pod_spec, dict):
        return [Cause(path, "Required value", "FieldValueRequired")]
    containers = pod_spec.get("containers")
    if not isinstance(containers, list) or not containers:
        return [Cause(f"{path}.containers", "Required value", "FieldValueRequired")]
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, c in enumerate(containers):
        if not isinstance(c, dict):
            causes.append(Cause(f"{path}.containers[{i}]", "Invalid value: must be an object"))
            continue
        name = c.get("name")
        if not name:
            causes.append(Cause(f"{path}.containers[{i}].name", "Required value", "FieldValueRequired"))
        elif name in seen:
            causes.append(Cause(f"{path}.containers[{i}].name", f'Duplicate value: "{name}"', "FieldValueDuplicate"))
        else:
            seen.add(name)
        if not c.get("image"):
            causes.append(Cause(f"{path}.containers[{i}].image", "Required value", "FieldValueRequired"))
        for j, port in enumerate(c.get("ports") or ()):
            cp = port.get("containerPort") if isinstance(port, dict) else None
            if not isinstance(cp, int) or not 0 < cp < 65536:
                causes.append(Cause(f"{path}.containers[{i}].ports[{j}].containerPort",
                                    f"Invalid value: {cp!r}: must be between 1 and 65535, inclusive"))
    return causes


def _validate_pod(obj: dict[str, Any]) -> list[Cause]:
    return _containers(obj.get("spec"), "spec")


def _validate_workload(obj: dict[str, Any]) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [Cause("spec", "Required value", "FieldValueRequired")]
    causes: list[Cause] = []
    template = spec.get("template") if isinstance(spec.get("template"), dict) else {}
    template_labels = (template.get("metadata") or {}).get("labels") or {}
    selector = spec.get("selector")
    if selector is None:
        causes.append(Cause("spec.selector", "Required value", "FieldValueRequired"))
    else:
        try:
            sel = label_selector_from_dict(selector)
        except SelectorError as err:
            causes.append(Cause("spec.selector", f"Invalid value: {err}"))
        else:
            if sel.empty:
                causes.append(Cause("spec.selector", "Invalid value: empty selector is invalid for deployment"))
            elif not sel.matches(template_labels):
                causes.append(Cause("spec.template.metadata.labels",
                                    f"Invalid value: {template_labels!r}: `selector` does not match template "
                                    f"`labels`"))
    replicas = spec.get("replicas", 1)
    if not isinstance(replicas, int) or replicas < 0:
        causes.append(Cause("spec.replicas", f"Invalid value: {replicas!r}: must be greater than or equal to 0"))
    causes.extend(_containers(template.get("spec"), "spec.template.spec"))
    return causes


def _validate_job(obj: dict[str, Any]) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [Cause("spec", "Required value", "FieldValueRequired")]
    template = spec.get("template") if isinstance(spec.get("template"), dict) else {}
    pod_spec = template.get("spec")
    causes = _containers(pod_spec, "spec.template.spec")
    if isinstance(pod_spec, dict) and pod_spec.get("restartPolicy") not in ("OnFailure", "Never"):
        causes.append(Cause("spec.template.spec.restartPolicy",
                            f'Unsupported value: "{pod_spec.get("restartPolicy", "")}": supported values: '
                            f'"OnFailure", "Never"', "FieldValueNotSupported"))
    return causes


def _validate_service(obj: dict[str, Any]) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [Cause("spec", "Required value", "FieldValueRequired")]
    causes: list[Cause] = []
    if spec.get("type") not in ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName"):
        causes.append(Cause("spec.type", f'Unsupported value: "{spec.get("type")}": supported values: "ClusterIP", '
                            '"ExternalName", "LoadBalancer", "NodePort"', "FieldValueNotSupported"))
    ports = spec.get("ports") or []
    if spec.get("type") != "ExternalName" and spec.get("clusterIP") != "None" and not ports:
        causes.append(Cause("spec.ports", "Required value", "FieldValueRequired"))
    for i, port in enumerate(ports):
        p = port.get("port") if isinstance(port, dict) else None
        if not isinstance(p, int) or not 0 < p < 65536:
            causes.append(Cause(f"spec.ports[{i}].port", f"Invalid value: {p!r}: must be between 1 and 65535, "
                                "inclusive"))
        if len(ports) > 1 and isinstance(port, dict) and not port.get("name"):
            causes.append(Cause(f"spec.ports[{i}].name", "Required value", "FieldValueRequired"))
    return causes


def _validate_secret(obj: dict[str, Any]) -> list[Cause]:
    causes = []
    for key, value in (obj.get("data") or {}).items():
        try:
            base64.b64decode(value, validate=True)
        except (ValueError, TypeError):
            causes.append(Cause(f"data[{key}]", "Invalid value: illegal base64 data"))
    return causes


def _validate_crd(obj: dict[str, Any]) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [Cause("spec", "Required value", "FieldValueRequired")]
    causes: list[Cause] = []
    group = spec.get("group")
    names = spec.get("names") if isinstance(spec.get("names"), dict) else {}
    plural, kind = names.get("plural"), names.get("kind")
    if not group or is_dns1123_subdomain(group) or "." not in group:
        causes.append(Cause("spec.group", f'Invalid value: "{group}": should be a domain with at least one dot'))
    if not plural:
        causes.append(Cause("spec.names.plural", "Required value", "FieldValueRequired"))
    if not kind:
        causes.append(Cause("spec.names.kind", "Required value", "FieldValueRequired"))
    if plural and group and obj["metadata"]["name"] != f"{plural}.{group}":
        causes.append(Cause("metadata.name", f'Invalid value: "{obj["metadata"]["name"]}": must be spec.names.plural'
                            f'+"."+spec.group'))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(Cause("spec.scope", f'Unsupported value: "{spec.get("scope")}": supported values: "Cluster", '
                            '"Namespaced"', "FieldValueNotSupported"))
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        causes.append(Cause("spec.versions", "Invalid value: must have exactly one version marked as storage version"))
    else:
        storage = [v for v in versions if isinstance(v, dict) and v.get("storage")]
        if len(storage) != 1:
            causes.append(Cause("spec.versions", "Invalid value: must have exactly one version marked as storage "
                                "version"))
        for i, v in enumerate(versions):
            if not isinstance(v, dict) or not v.get("name"):
                causes.append(Cause(f"spec.versions[{i}].name", "Required value", "FieldValueRequired"))
    return causes


_VALIDATORS = {
    "Pod": _validate_pod,
    "Deployment": _validate_workload,
    "StatefulSet": _validate_workload,
    "DaemonSet": _validate_workload,
    "ReplicaSet": _validate_workload,
    "Job": _validate_job,
    "Service": _validate_service,
    "Secret": _validate_secret,
    "CustomResourceDefinition": _validate_crd,
    "ValidatingAdmissionPolicy": policy.validate_policy,
    "ValidatingAdmissionPolicyBinding": policy.validate_binding,
}
