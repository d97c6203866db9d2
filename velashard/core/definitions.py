"""The definitions an app renders with: component, trait, policy and workflow step definitions as the app's
namespace resolves them (its own namespace, then the system namespace, as KubeVela's GetDefinition does), and a
definition's generation, which revisions and the render cache key on."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from velashard.apis.oam import SYSTEM_NAMESPACE

Get = Callable[[str, str], "dict[str, Any] | None"]  # (namespace, name) -> the definition stored there


def lookup_order(namespace: str | None) -> tuple[str, ...]:
    """Where an app's definitions are looked up, in order (KubeVela's GetDefinition): the app's namespace (an app
    that names none is in "default"), then the system namespace; never another namespace."""
    namespace = namespace or "default"
    return (namespace,) if namespace == SYSTEM_NAMESPACE else (namespace, SYSTEM_NAMESPACE)


def resolve(get: Get, namespace: str | None, name: str) -> dict[str, Any] | None:
    for where in lookup_order(namespace):
        found = get(where, name)
        if found is not None:
            return found
    return None


class Resolved:
    """Definitions of one kind by name, as an app in `namespace` sees them (see `lookup_order`)."""

    __slots__ = ("_get", "namespace")

    def __init__(self, get: Get, namespace: str | None):
        self._get, self.namespace = get, namespace or "default"

    def get(self, name: Any, default: Any = None) -> Any:
        found = resolve(self._get, self.namespace, name) if isinstance(name, str) and name else None
        return default if found is None else found

    def __getitem__(self, name: str) -> dict[str, Any]:
        found = self.get(name)
        if found is None:
            raise KeyError(name)
        return found

    def __contains__(self, name: Any) -> bool:
        return self.get(name) is not None


def table(objects: Iterable[dict[str, Any]]) -> Get:
    """A lookup over definition objects by namespace and name; one without a namespace (a file, a built-in) is
    the system namespace's; of two with the same namespace and name, the later wins."""
    by_key = {((d["metadata"].get("namespace") or SYSTEM_NAMESPACE), d["metadata"]["name"]): d for d in objects}
    return lambda namespace, name: by_key.get((namespace, name))


@dataclass
class Definitions:
    """The definitions one app renders with: component, trait, policy and workflow step definitions by name, each
    resolved in the app's namespace, then the system namespace (`Resolved`); plain dicts where a caller built
    them by name."""

    components: Any = field(default_factory=dict)
    traits: Any = field(default_factory=dict)
    policies: Any = field(default_factory=dict)
    cluster_version: dict[str, Any] | None = None
    steps: Any = field(default_factory=dict)

    @classmethod
    def from_objects(cls, components: Iterable[dict[str, Any]], traits: Iterable[dict[str, Any]],
                     policies: Iterable[dict[str, Any]] = (), cluster_version: dict[str, Any] | None = None,
                     namespace: str = SYSTEM_NAMESPACE, steps: Iterable[dict[str, Any]] = ()) -> "Definitions":
        """As an app in `namespace` sees these objects (by default only the system namespace's)."""
        return cls.resolving(namespace, table(components), table(traits), table(policies), table(steps),
                             cluster_version)

    @classmethod
    def resolving(cls, namespace: str | None, components: Get, traits: Get, policies: Get, steps: Get,
                  cluster_version: dict[str, Any] | None = None) -> "Definitions":
        """As an app in `namespace` sees what the lookups (e.g. informer caches) hold."""
        return cls(Resolved(components, namespace), Resolved(traits, namespace), Resolved(policies, namespace),
                   cluster_version, Resolved(steps, namespace))


def version(definition: dict[str, Any]) -> str:
    meta = definition["metadata"]
    return f'g{meta["generation"]}' if meta.get("generation") else str(meta.get("resourceVersion", ""))


def identity(definition: dict[str, Any]) -> str:
    """A definition's generation: uid and generation when stored, else its content (files, built-ins)."""
    meta = definition["metadata"]
    if meta.get("uid") and (meta.get("generation") or meta.get("resourceVersion")):
        return f'{meta["uid"]}:{version(definition)}'
    return hashlib.sha256(json.dumps(definition.get("spec"), sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class DefinitionSource:
    """Where a controller reads definitions (its informers' stores, by namespace and name), handing each app
    its namespace's view as it is looked up, and workflow steps their WorkflowStepDefinitions."""

    components: Get
    traits: Get
    policies: Get
    steps: Get
    cluster_version: Callable[[], "dict[str, Any] | None"] = lambda: None

    def __call__(self, namespace: str) -> Definitions:
        return Definitions.resolving(namespace, self.components, self.traits, self.policies, self.steps,
                                     self.cluster_version())

    def step(self, step_type: str, namespace: str) -> dict[str, Any] | None:
        """A WorkflowStepDefinition by name: the app's namespace first, then vela-system (KubeVela's order)."""
        return resolve(self.steps, namespace, step_type)
