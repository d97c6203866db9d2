"""Which definitions an app uses, what they are as its revision records them, and which apps use a definition.

An app uses the definitions its spec names: its components' types and their traits' types, its policies' types,
the component and trait types its override policies name, and its workflow steps' and sub-steps' types (but the
steps the engine runs itself: suspend, apply-component, step-group). KubeVela's ApplicationRevision hash covers
the same (ComputeAppRevisionHash: the spec, then each used definition's spec by name), so a definition no app uses
makes no revision, and a used one makes one for exactly its users. `UsageIndex` answers, from the app informer's
events, which apps a definition's change may concern.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any, Callable, Iterable

from cachetools import LRUCache

from velashard.apis.oam import SYSTEM_NAMESPACE
from velashard.core.definitions import Definitions
from velashard.kube.informer import EventHandler
from velashard.kube.store import object_key
from velashard.workflow.steptypes import BUILTIN as BUILTIN_STEPS

COMPONENT, TRAIT, POLICY, STEP = "ComponentDefinition", "TraitDefinition", "PolicyDefinition", "WorkflowStepDefinition"
KINDS = (COMPONENT, TRAIT, POLICY, STEP)
ENGINE_STEPS = frozenset(BUILTIN_STEPS)  # run by the engine itself, whatever definition has their name

Use = tuple[str, str]  # (definition kind, name)


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _typed(kind: str, items: Iterable[dict[str, Any]]) -> set[Use]:
    return {(kind, item["type"]) for item in items if isinstance(item.get("type"), str) and item["type"]}


def uses(spec: Any) -> frozenset[Use]:
    """The definitions an app's spec names (pure; a malformed part names nothing)."""
    if not isinstance(spec, dict):
        return frozenset()
    found: set[Use] = set()
    components = _dicts(spec.get("components"))
    found |= _typed(COMPONENT, components)
    for comp in components:
        found |= _typed(TRAIT, _dicts(comp.get("traits")))
    policies = _dicts(spec.get("policies"))
    found |= _typed(POLICY, policies)
    for policy in policies:
        props = policy.get("properties")
        if policy.get("type") == "override" and isinstance(props, dict):
            for item in _dicts(props.get("components")):
                found |= _typed(COMPONENT, [item]) | _typed(TRAIT, _dicts(item.get("traits")))
    workflow = spec.get("workflow")
    steps = _dicts(workflow.get("steps")) if isinstance(workflow, dict) else []
    for step in steps + [sub for step in steps for sub in _dicts(step.get("subSteps"))]:
        found |= {use for use in _typed(STEP, [step]) if use[1] not in ENGINE_STEPS}
    return frozenset(found)


# A definition's spec hash, by its uid and resourceVersion (a new version is hashed once per process).
_HASHES: LRUCache = LRUCache(maxsize=4096)
_LOCK = threading.Lock()


def spec_hash(definition: dict[str, Any]) -> str:
    """The hash of a definition's spec, as KubeVela's ComputeSpecHash: its status, namespace and generation do not
    count, so a status write, a copy into another namespace or a re-creation with the same spec changes nothing."""
    meta = definition.get("metadata") or {}
    key = (meta.get("uid"), meta.get("resourceVersion")) if meta.get("uid") and meta.get("resourceVersion") else None
    if key is not None:
        with _LOCK:
            found = _HASHES.get(key)
        if found is not None:
            return found
    text = json.dumps(definition.get("spec"), sort_keys=True, separators=(",", ":"), default=str)
    found = hashlib.sha256(text.encode()).hexdigest()[:16]
    if key is not None:
        with _LOCK:
            _HASHES[key] = found
    return found


def _table(defs: Definitions, kind: str) -> Any:
    return {COMPONENT: defs.components, TRAIT: defs.traits, POLICY: defs.policies, STEP: defs.steps}[kind]


def used_definitions(spec: Any, defs: Definitions) -> dict[str, dict[str, str | None]]:
    """What an app's revision records of the definitions it uses: by kind, each name's spec hash as the app's
    namespace resolves it (None: not found, which a render or a step then reports)."""
    recorded: dict[str, dict[str, str | None]] = {}
    for kind, name in sorted(uses(spec)):
        found = _table(defs, kind).get(name)
        recorded.setdefault(kind, {})[name] = None if found is None else spec_hash(found)
    return recorded


class UsageIndex:
    """Which apps use which definitions, from the app informer's events (no list per definition event): a
    definition's change concerns the apps of its namespace that use its name, or, for the system namespace's,
    the apps of every namespace that has no definition of that name itself."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._uses: dict[str, frozenset[Use]] = {}  # app key -> what it uses
        self._users: dict[Use, dict[str, set[str]]] = {}  # (kind, name) -> namespace -> app keys

    def handler(self) -> EventHandler:
        return EventHandler(on_add=self.saw, on_update=lambda old, new: None if old is new else self.saw(new),
                            on_delete=self.forget)

    def saw(self, app: dict[str, Any]) -> None:
        namespace, key = app["metadata"].get("namespace") or "default", object_key(app)
        now = uses(app.get("spec"))
        with self._lock:
            before = self._uses.get(key, frozenset())
            if now == before and key in self._uses:
                return
            for use in before - now:
                self._drop(use, namespace, key)
            for use in now - before:
                self._users.setdefault(use, {}).setdefault(namespace, set()).add(key)
            self._uses[key] = now

    def forget(self, app: dict[str, Any]) -> None:
        namespace, key = app["metadata"].get("namespace") or "default", object_key(app)
        with self._lock:
            for use in self._uses.pop(key, frozenset()):
                self._drop(use, namespace, key)

    def _drop(self, use: Use, namespace: str, key: str) -> None:
        by_namespace = self._users.get(use, {})
        keys = by_namespace.get(namespace, set())
        keys.discard(key)
        if not keys:
            by_namespace.pop(namespace, None)
        if not by_namespace:
            self._users.pop(use, None)

    def users(self, kind: str, namespace: str, name: str, own: Callable[[str], bool] = lambda _ns: False
              ) -> list[str]:
        """The apps a change of the definition `kind` `namespace`/`name` concerns; `own(ns)`: whether namespace
        `ns` has its own definition of that kind and name (its apps do not see the system namespace's)."""
        with self._lock:
            by_namespace = self._users.get((kind, name), {})
            if namespace != SYSTEM_NAMESPACE:
                return sorted(by_namespace.get(namespace, ()))
            found = {ns: list(keys) for ns, keys in by_namespace.items()}
        return sorted(k for ns, keys in found.items() if ns == SYSTEM_NAMESPACE or not own(ns) for k in keys)
