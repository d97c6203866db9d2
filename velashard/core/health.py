"""Health of rendered resources, components and traits from their observed state: a definition's
`status.healthPolicy` (`isHealth`) and `status.customStatus` (`message`) in CUE, evaluated as KubeVela does over
the live objects, or built-in rules per kind where a definition has no health policy. `HealthReader` reads it
for one reconcile, the same way for the default workflow, a step's delivery and the status."""

from __future__ import annotations

import json
from typing import Any, Callable

from velashard.apis import labels
from velashard.core.definitions import Definitions
from velashard.core.programreads import Path, context_paths, readable, value_at
from velashard.core.slotcache import SlotCache, digest
from velashard.core.rendered import RenderedComponent
from velashard.core.templates import compile_template
from velashard.cue import CueError, plain

# One verdict per app part and status program (the latest inputs'), by app (core/slotcache.py).
_RESULTS = SlotCache()


def forget(key: str) -> None:
    """The app `key` (namespace/name) is gone from this process: so are its verdicts."""
    _RESULTS.forget(key)


def verdicts() -> SlotCache:
    """The verdicts themselves (for core/cachesnapshot.py)."""
    return _RESULTS


def resource_health(obj: dict[str, Any] | None) -> tuple[bool, str]:
    """(healthy, message) for one live object; a missing object is unhealthy."""
    if obj is None:
        return False, "not found"
    kind = obj.get("kind")
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    generation = (obj.get("metadata") or {}).get("generation")
    if kind in ("Deployment", "StatefulSet"):
        want = spec.get("replicas", 1)
        if status.get("observedGeneration", 0) < (generation or 0):
            return False, "waiting for the controller to observe the latest generation"
        ready = status.get("availableReplicas" if kind == "Deployment" else "readyReplicas", 0)
        updated = status.get("updatedReplicas", 0)
        if ready >= want and updated >= want:
            return True, f"Ready:{ready}/{want}"
        return False, f"Ready:{ready}/{want}"
    if kind == "DaemonSet":
        want = status.get("desiredNumberScheduled", 0)
        ready = status.get("numberAvailable", 0)
        return (want > 0 and ready >= want), f"Ready:{ready}/{want}"
    if kind == "Job":
        for cond in status.get("conditions") or []:
            if cond.get("type") == "Complete" and cond.get("status") == "True":
                return True, "Complete"
            if cond.get("type") == "Failed" and cond.get("status") == "True":
                return False, f"Failed: {cond.get('message', '')}".strip()
        return False, f"Succeeded:{status.get('succeeded', 0)}/{spec.get('completions', 1)}"
    return True, "Exists"


def _version(obj: dict[str, Any] | None) -> Any:
    if obj is None:
        return None
    meta = obj.get("metadata") or {}
    if meta.get("uid") and meta.get("resourceVersion"):
        return meta["uid"], meta["resourceVersion"]
    return json.dumps(obj, sort_keys=True, default=str)


def _evaluate(text: str, expression: str, context: dict[str, Any], parameter: dict[str, Any]) -> Any:
    """One status program's `isHealth` or `message`; CueError when it cannot be evaluated."""
    program = compile_template(text, "status.cue")
    with program.evaluate({"context": context, "parameter": parameter}) as instance:
        if not instance.exists(expression):
            return None
        return plain(instance.export(expression, check=False))


def definition_status(status_spec: dict[str, Any] | None, names: dict[str, str], live: dict[str, Any] | None,
                      live_outputs: dict[str, dict[str, Any] | None], parameter: dict[str, Any], owner: str = ""
                      ) -> tuple[bool | None, str | None]:
    """(isHealth, message) of a definition's status programs over the live objects (None where the definition
    has no such program). `names`: name, appName, appRevision of the context; `owner`: the app's key, whose
    verdicts go when it does (`forget`)."""
    spec = status_spec or {}
    policy, custom = spec.get("healthPolicy"), spec.get("customStatus")
    if not policy and not custom:
        return None, None
    slot = digest(names.get("name", ""), policy or "", custom or "")
    owner = owner or names.get("appName", "")
    context: dict[str, Any] = {**names, "parameter": parameter, "status": {}}
    if live is not None:
        context["output"] = live
    present = {k: v for k, v in live_outputs.items() if v is not None}
    if present:
        context["outputs"] = present

    def whole(path: Path | None) -> Any:
        """A live object (or all of them) by identity and version; other context fields as they are."""
        if path is None:
            return [_version(live), sorted((k, _version(v)) for k, v in live_outputs.items())]
        if path[0] == "output":
            return _version(live)
        if path[0] == "outputs":
            return sorted((k, _version(v)) for k, v in live_outputs.items()) if len(path) == 1 \
                else _version(live_outputs.get(path[1]))
        return value_at(context, path)

    # The verdict depends on what the programs can read (core/programreads.py): a write they cannot see (the
    # Deployment controller's revision annotation, another output's status) keeps it.
    paths = context_paths((policy or "") + "\n" + (custom or ""))
    inputs = digest(json.dumps([sorted(names.items()), readable(paths, context, whole), parameter],
                               sort_keys=True, default=str))
    cached = _RESULTS.get(owner, slot, inputs)
    if cached is not None:
        return cached

    def compute() -> tuple[bool | None, str | None]:
        healthy: bool | None = None
        message: str | None = None
        if policy:
            try:
                value = _evaluate(policy, "isHealth", context, parameter)
                healthy = value if isinstance(value, bool) else False
            except CueError as err:
                healthy, message = False, f"health policy: {err.path + ': ' if err.path else ''}{err.message}"
        if custom:
            context["status"] = {"healthy": bool(healthy) if healthy is not None else True}
            try:
                value = _evaluate(custom, "message", context, parameter)
                if value is not None:
                    message = str(value)
            except CueError as err:
                message = message or f"custom status: {err.path + ': ' if err.path else ''}{err.message}"
        return healthy, message

    result = compute()
    _RESULTS.put(owner, slot, inputs, result)
    return result


def component_health(objects: list[dict[str, Any]], workload: dict[str, Any], live: list[dict[str, Any] | None],
                     status_spec: dict[str, Any] | None = None, names: dict[str, str] | None = None,
                     parameter: dict[str, Any] | None = None, owner: str = "") -> tuple[bool, str]:
    """A component's health from its rendered objects and their live counterparts (same order): the workload by
    its definition's status programs when it has them, everything else by the built-in rules. The message is
    the definition's custom status, or names the workload's state and every unhealthy object's."""
    observed = dict(zip(map(id, objects), live))
    live_workload = observed.get(id(workload))
    outputs = {(o["metadata"].get("labels") or {}).get("trait.oam.dev/resource", o["metadata"]["name"]):
               observed.get(id(o)) for o in objects if o is not workload}
    policy_ok, custom = (None, None)
    if live_workload is not None:
        policy_ok, custom = definition_status(status_spec, names or {}, live_workload, outputs, parameter or {},
                                              owner)
    messages = []
    healthy = True
    for obj, seen in zip(objects, live):
        if obj is workload and policy_ok is not None:
            ok, message = policy_ok, custom or ("healthy" if policy_ok else "unhealthy by its health policy")
        else:
            ok, message = resource_health(seen)
        healthy = healthy and ok
        if obj is workload or not ok:
            messages.append(message)
    if custom is not None and policy_ok is None:
        messages[0] = custom
    return healthy, "; ".join(m for m in messages if m)


Live = Callable[[dict[str, Any]], "dict[str, Any] | None"]  # the live counterpart of a rendered object


class HealthReader:
    """Health as one reconcile of one app (`owner`, its key) reads it, over `live` (the ResourceKeeper's reads)."""

    def __init__(self, owner: str, app_name: str, definitions: Definitions, live: Live):
        self.owner, self.app_name, self.definitions, self.live = owner, app_name, definitions, live

    def _names(self, comp: RenderedComponent) -> dict[str, str]:
        return {"name": comp.name, "appName": self.app_name,
                "appRevision": (comp.workload["metadata"].get("labels") or {}).get(labels.APP_REVISION, "")}

    def component(self, comp: RenderedComponent) -> tuple[bool, str]:
        definition = self.definitions.components.get(comp.type) or {}
        return component_health(comp.objects, comp.workload, [self.live(o) for o in comp.objects],
                                (definition.get("spec") or {}).get("status"), self._names(comp), comp.properties,
                                self.owner)

    def trait(self, comp: RenderedComponent, trait: str) -> tuple[bool, str]:
        """A trait is healthy by its definition's health policy over its outputs when it has one, else when
        every object it produced is (by the built-in rules)."""
        outputs = [o for o in comp.outputs if (o["metadata"].get("labels") or {}).get(labels.TRAIT_TYPE) == trait]
        live = [self.live(o) for o in outputs]
        definition = self.definitions.traits.get(trait) or {}
        healthy, message = definition_status(
            (definition.get("spec") or {}).get("status"), self._names(comp), self.live(comp.workload),
            {(o["metadata"].get("labels") or {}).get(labels.TRAIT_RESOURCE, ""): obj for o, obj in zip(outputs, live)},
            comp.trait_properties.get(trait) or {}, self.owner)
        if healthy is not None:
            return healthy, message or ""
        bad = [f'{o["kind"]} {o["metadata"]["name"]}: {m}' for o, (ok, m) in
               zip(outputs, map(resource_health, live)) if not ok]
        return not bad, message or "; ".join(bad)

    def objects(self, refs: list[dict[str, Any]]) -> tuple[bool, str]:
        """What a run deployed that no component names any more (as the tracker records it), by the built-in
        rules."""
        bad = []
        for ref in refs:
            obj = {"apiVersion": ref["apiVersion"], "kind": ref["kind"], "metadata": {
                "name": ref["name"], **({"namespace": ref["namespace"]} if ref.get("namespace") else {})}}
            ok, message = resource_health(self.live(obj))
            if not ok:
                bad.append(f'{ref["kind"]} {ref["name"]}: {message}')
        return not bad, "; ".join(bad)
