"""The resource types the embedded server serves: built-in kinds plus those added by CRDs."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]

# Field selectors kube-apiserver supports beyond metadata.name and metadata.namespace.
_EXTRA_FIELDS: dict[tuple[str, str], frozenset[str]] = {
    ("", "pods"): frozenset({"status.phase", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                             "spec.serviceAccountName", "status.podIP", "status.nominatedNodeName"}),
    ("", "namespaces"): frozenset({"status.phase"}),
    ("", "nodes"): frozenset({"spec.unschedulable"}),
    ("", "replicationcontrollers"): frozenset({"status.replicas"}),
    ("", "secrets"): frozenset({"type"}),
    ("", "events"): frozenset({"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                               "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
                               "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"}),
    ("batch", "jobs"): frozenset({"status.successful"}),
}


_SELECTABLE = {gr: tuple(sorted(paths)) for gr, paths in _EXTRA_FIELDS.items()}


def selectable_fields(gr: tuple[str, str]) -> tuple[str, ...]:
    """The field paths a field selector may name for this resource beyond metadata.name and metadata.namespace."""
    return _SELECTABLE.get(gr, ())


# Resources with the scale subresource (autoscaling/v1 Scale).
SCALABLE = frozenset({("apps", "deployments"), ("apps", "statefulsets"), ("apps", "replicasets"),
                      ("", "replicationcontrollers")})


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    status_subresource: bool = False
    # Only custom resources carry these.
    schema: dict[str, Any] | None = None
    printer_columns: tuple[dict[str, Any], ...] = ()
    crd_name: str | None = None
    # Set on a version served by conversion: the version its objects are stored as (autoscaling/v1 HPAs are
    # stored as autoscaling/v2, as in kube-apiserver). Empty for the storage version itself.
    storage_version: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> tuple[str, str]:
        return (self.group, self.plural)

    @property
    def is_custom(self) -> bool:
        return self.crd_name is not None

    @property
    def field_labels(self) -> frozenset[str]:
        return frozenset({"metadata.name", "metadata.namespace"}) | _EXTRA_FIELDS.get(self.group_resource, frozenset())

    def discovery_entries(self) -> list[dict[str, Any]]:
        entry: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.singular or self.kind.lower(),
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(VERBS),
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        if self.categories:
            entry["categories"] = list(self.categories)
        entries = [entry]
        if self.status_subresource:
            entries.append({"name": f"{self.plural}/status", "singularName": "", "namespaced": self.namespaced,
                            "kind": self.kind, "verbs": ["get", "patch", "update"]})
        if self.group_resource in SCALABLE:
            entries.append({"name": f"{self.plural}/scale", "singularName": "", "namespaced": self.namespaced,
                            "group": "autoscaling", "version": "v1", "kind": "Scale",
                            "verbs": ["get", "patch", "update"]})
        return entries


def _rt(group: str, version: str, plural: str, kind: str, namespaced: bool = True, short: tuple[str, ...] = (),
        status: bool = False, categories: tuple[str, ...] = (), stored_as: str = "") -> ResourceType:
    return ResourceType(group, version, plural, kind, namespaced, kind.lower(), short, categories, status,
                        storage_version=stored_as)


BUILTIN_TYPES: tuple[ResourceType, ...] = (
    _rt("", "v1", "namespaces", "Namespace", namespaced=False, short=("ns",), status=True),
    _rt("", "v1", "pods", "Pod", short=("po",), status=True, categories=("all",)),
    _rt("", "v1", "configmaps", "ConfigMap", short=("cm",)),
    _rt("", "v1", "secrets", "Secret"),
    _rt("", "v1", "services", "Service", short=("svc",), status=True, categories=("all",)),
    _rt("", "v1", "serviceaccounts", "ServiceAccount", short=("sa",)),
    _rt("", "v1", "events", "Event", short=("ev",)),
    _rt("", "v1", "nodes", "Node", namespaced=False, short=("no",), status=True),
    _rt("", "v1", "endpoints", "Endpoints", short=("ep",)),
    _rt("", "v1", "limitranges", "LimitRange", short=("limits",)),
    _rt("", "v1", "resourcequotas", "ResourceQuota", short=("quota",), status=True),
    _rt("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", short=("pvc",), status=True),
    _rt("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False, short=("pv",), status=True),
    _rt("", "v1", "podtemplates", "PodTemplate"),
    _rt("", "v1", "replicationcontrollers", "ReplicationController", short=("rc",), status=True,
        categories=("all",)),
    _rt("apps", "v1", "deployments", "Deployment", short=("deploy",), status=True, categories=("all",)),
    _rt("apps", "v1", "statefulsets", "StatefulSet", short=("sts",), status=True, categories=("all",)),
    _rt("apps", "v1", "daemonsets", "DaemonSet", short=("ds",), status=True, categories=("all",)),
    _rt("apps", "v1", "replicasets", "ReplicaSet", short=("rs",), status=True, categories=("all",)),
    _rt("batch", "v1", "jobs", "Job", status=True, categories=("all",)),
    _rt("batch", "v1", "cronjobs", "CronJob", short=("cj",), status=True, categories=("all",)),
    _rt("apps", "v1", "controllerrevisions", "ControllerRevision"),
    _rt("networking.k8s.io", "v1", "ingresses", "Ingress", short=("ing",), status=True),
    _rt("networking.k8s.io", "v1", "ingressclasses", "IngressClass", namespaced=False),
    _rt("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", short=("netpol",)),
    _rt("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", short=("pdb",), status=True),
    _rt("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice"),
    _rt("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False, short=("pc",)),
    _rt("storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False, short=("sc",)),
    # v2 first: a group's first version is its preferred one in discovery.
    _rt("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", short=("hpa",), status=True,
        categories=("all",)),
    _rt("autoscaling", "v1", "horizontalpodautoscalers", "HorizontalPodAutoscaler", short=("hpa",), status=True,
        categories=("all",), stored_as="v2"),
    _rt("coordination.k8s.io", "v1", "leases", "Lease"),
    _rt("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False,
        short=("crd", "crds"), status=True),
    _rt("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration",
        namespaced=False),
    _rt("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration",
        namespaced=False),
    _rt("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy",
        namespaced=False, status=True),
    _rt("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding", namespaced=False),
    _rt("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    _rt("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    _rt("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False),
    _rt("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False),
)


@dataclass
class Registry:
    """Thread-safe index of served resource types by path and by kind."""

    _lock: threading.Lock = field(default_factory=threading.Lock)
    _by_path: dict[tuple[str, str, str], ResourceType] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for rt in BUILTIN_TYPES:
            self._by_path[(rt.group, rt.version, rt.plural)] = rt

    def add(self, rt: ResourceType) -> None:
        with self._lock:
            self._by_path[(rt.group, rt.version, rt.plural)] = rt

    def remove_crd(self, crd_name: str) -> None:
        with self._lock:
            for key in [k for k, rt in self._by_path.items() if rt.crd_name == crd_name]:
                del self._by_path[key]

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def for_group_resource(self, group: str, plural: str) -> ResourceType | None:
        """The storage version's type of a resource."""
        for rt in list(self._by_path.values()):
            if rt.group == group and rt.plural == plural and not rt.storage_version:
                return rt
        return None

    def storage_of(self, rt: ResourceType) -> ResourceType:
        """The type `rt`'s objects are stored as: itself, or the storage version of a converted one."""
        if not rt.storage_version:
            return rt
        stored = self.lookup(rt.group, rt.storage_version, rt.plural)
        assert stored is not None, f"{rt.api_version} {rt.kind} is stored as an unserved version"
        return stored

    def for_kind(self, api_version: str, kind: str) -> ResourceType | None:
        for rt in list(self._by_path.values()):
            if rt.api_version == api_version and rt.kind == kind:
                return rt
        return None

    def all(self) -> list[ResourceType]:
        return list(self._by_path.values())

    def group_versions(self) -> dict[str, list[str]]:
        """group -> served versions (the core group is '')."""
        out: dict[str, list[str]] = {}
        for rt in self.all():
            versions = out.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        return out

    def resources_in(self, group: str, version: str) -> list[ResourceType]:
        return sorted((rt for rt in self.all() if rt.group == group and rt.version == version), key=lambda r: r.plural)
