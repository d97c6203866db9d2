"""vela/multicluster on one cluster: Deploy, the built-in `deploy` step's action. The policies it names decide
what goes where: topology policies the placements (the local cluster only, each with its namespace),
override policies the components' properties and traits, replication policies copies of components with a
replicaKey. Components are applied for each placement in dependsOn order, each once what it depends on is
healthy; the step waits until all are. The deciding is pure (placements, override_components, replicate)."""

from __future__ import annotations

import copy
import re
from typing import Any

from velashard.workflow.delivery import DeliveryError
from velashard.workflow.providers.base import LOCAL_CLUSTERS, Provider, ProviderError, Runtime


def select_policies(policies: list[dict[str, Any]], names: list[str]) -> list[dict[str, Any]]:
    by_name = {p.get("name"): p for p in policies}
    selected = []
    for name in names:
        if name not in by_name:
            raise ProviderError(f"policy {name} not found")
        selected.append(by_name[name])
    return selected


def placements(policies: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Where topology policies put components: [{cluster, namespace}] ("" namespace: the app's own)."""
    out: list[dict[str, str]] = []
    found = False
    for policy in policies:
        if policy.get("type") != "topology":
            continue
        found = True
        spec = policy.get("properties")
        if not isinstance(spec, dict):
            raise ProviderError(f"topology policy {policy.get('name')} must not have empty properties")
        if spec.get("clusterLabelSelector") or spec.get("clusterSelector"):
            raise ProviderError(f"topology policy {policy.get('name')}: selecting clusters by label needs "
                                "multi-cluster, which is not supported (only the local cluster)")
        for cluster in spec.get("clusters") or ["local"]:
            if cluster not in LOCAL_CLUSTERS:
                raise ProviderError(f'topology policy {policy.get("name")}: cluster "{cluster}" is not supported '
                                    "(only the local cluster)")
            placement = {"cluster": "local", "namespace": str(spec.get("namespace") or "")}
            if placement not in out:
                out.append(placement)
    return out if found else [{"cluster": "local", "namespace": ""}]


def _merge(base: Any, patch: Any) -> Any:
    """mergo's merge with override: maps field by field, anything else replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = _merge(out[k], v) if k in out else copy.deepcopy(v)
        return out
    return copy.deepcopy(patch)


def _merge_component(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    if patch.get("properties") is not None:
        out["properties"] = _merge(base.get("properties") or {}, patch["properties"])
    traits = {t.get("type"): copy.deepcopy(t) for t in base.get("traits") or []}
    order = [t.get("type") for t in base.get("traits") or []]
    for trait in patch.get("traits") or []:
        kind = trait.get("type")
        if trait.get("disable"):
            traits.pop(kind, None)
        elif kind in traits:
            traits[kind]["properties"] = _merge(traits[kind].get("properties") or {}, trait.get("properties") or {})
        else:
            traits[kind] = {k: v for k, v in trait.items() if k != "disable"}
            order.append(kind)
    out["traits"] = [traits[k] for k in order if k in traits]
    return out


def override_components(components: list[dict[str, Any]], policies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Override policies applied in order: components matched by name (`*` as a wildcard) and type get the
    patch's properties and traits; a `selector` keeps only the components it names."""
    comps = [copy.deepcopy(c) for c in components]
    for policy in policies:
        if policy.get("type") != "override":
            continue
        spec = policy.get("properties")
        if not isinstance(spec, dict):
            raise ProviderError(f"override policy {policy.get('name')} must not have empty properties")
        for patch in spec.get("components") or []:
            name, kind = patch.get("name") or "", patch.get("type") or ""
            pattern = re.compile("^" + re.escape(name).replace(r"\*", ".*") + "$") if name else None
            matched = False
            for i, comp in enumerate(comps):
                if (pattern is None or pattern.match(comp.get("name", ""))) and kind in ("", comp.get("type")):
                    comps[i] = _merge_component(comp, patch)
                    matched = True
            if not matched and name and "*" not in name and kind:
                comps.append(_merge_component({"name": name, "type": kind}, patch))
        if spec.get("selector") is not None:
            keep = set(spec["selector"])
            comps = [c for c in comps if c.get("name") in keep]
    return comps


def replicate(components: list[dict[str, Any]], policies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Replication policies, as KubeVela applies them: the components a policy selects are deployed once per key
    (each copy with that replicaKey, which its templates read as context.replicaKey) instead of once; the copies
    come after the components no policy replicates."""
    replaced: set[str] = set()
    copies: list[dict[str, Any]] = []
    found = False
    for policy in policies:
        if policy.get("type") != "replication":
            continue
        found = True
        spec = policy.get("properties")
        if not isinstance(spec, dict):
            continue
        keys = [str(k) for k in spec.get("keys") or []]
        selected = [c for c in components if c.get("name") in set(spec.get("selector") or [])]
        if not selected:
            raise ProviderError(f"failed to apply replicate policy {policy.get('name')}: no component selected to "
                                "replicate")
        copies.extend({**copy.deepcopy(c), "replicaKey": key} for c in selected for key in keys)
        replaced.update(c["name"] for c in selected)
    if not found:
        return components
    return [c for c in components if c.get("name") not in replaced] + copies


def deploy(params: dict[str, Any], rt: Runtime) -> None:
    if int(params.get("parallelism") or 0) <= 0:
        raise ProviderError("parallelism cannot be smaller than 1")
    delivery = rt.components()
    inline = [dict(p, name=p.get("name") or f'inline-{p.get("type", "")}-policy-{i}')
              for i, p in enumerate(params.get("inlinePolicies") or [])]
    policies = select_policies(delivery.policies(), list(params.get("policies") or [])) + inline
    where = placements(policies)
    components = replicate(override_components(delivery.components(), policies), policies)
    waiting: list[str] = []
    for placement in where:
        waiting.extend(_apply_in_order(rt, components, placement["namespace"] or None))
    if waiting:
        rt.action.wait_for("; ".join(waiting))
    return None


def _apply_in_order(rt: Runtime, components: list[dict[str, Any]], namespace: str | None) -> list[str]:
    """Apply each component once the ones it depends on (same placement and replica) are healthy."""
    healthy: dict[tuple[str, str], bool] = {}
    waiting: list[str] = []
    todo = list(components)
    progress = True
    while todo and progress:
        progress = False
        for comp in list(todo):
            key = comp.get("replicaKey", "")
            deps = comp.get("dependsOn") or []
            if not all(healthy.get((key, d)) or healthy.get(("", d)) for d in deps):
                continue
            todo.remove(comp)
            progress = True
            spec = {k: v for k, v in comp.items() if k not in ("replicaKey", "inputs", "outputs")}
            try:
                result = rt.components().apply_component(spec, namespace, None, key)
            except DeliveryError as err:
                raise ProviderError(str(err)) from None
            healthy[(key, comp["name"])] = result.healthy
            if not result.healthy:
                waiting.append(f'{comp["name"]}: {result.message}' if result.message else comp["name"])
    for comp in todo:
        unready = [d for d in comp.get("dependsOn") or [] if not healthy.get((comp.get("replicaKey", ""), d))]
        waiting.append(f'{comp["name"]} waits for {", ".join(unready)}')
    return waiting


def env_binding(policies: list[dict[str, Any]], policy: str, env: str) -> tuple[dict[str, Any], dict[str, str]]:
    """KubeVela's env-binding policy, one environment of it: (its config, its placement {cluster, namespace}).
    The policy named, or the first env-binding policy; the placement's cluster must be the local one."""
    found = [p for p in policies if p.get("type") == "env-binding" and (not policy or p.get("name") == policy)]
    if not found:
        raise ProviderError(f"env-binding policy {policy} not found" if policy else "no env-binding policy found")
    spec = found[0].get("properties") if isinstance(found[0].get("properties"), dict) else {}
    config = next((e for e in spec.get("envs") or [] if isinstance(e, dict) and e.get("name") == env), None)
    if config is None:
        raise ProviderError(f'env {env} not found in env-binding policy {found[0].get("name")}')
    placement = config.get("placement") if isinstance(config.get("placement"), dict) else {}
    clusters = placement.get("clusterSelector") if isinstance(placement.get("clusterSelector"), dict) else {}
    namespaces = placement.get("namespaceSelector") if isinstance(placement.get("namespaceSelector"), dict) else {}
    if clusters.get("labels") or namespaces.get("labels"):
        raise ProviderError(f"invalid env {env}: selecting clusters or namespaces by label is not supported")
    cluster = clusters.get("name") or "local"
    if cluster not in LOCAL_CLUSTERS:
        raise ProviderError(f'env {env}: cluster "{cluster}" is not supported (only the local cluster)')
    return config, {"cluster": "local", "namespace": str(namespaces.get("name") or "")}


def apply_env_bind_app(params: dict[str, Any], rt: Runtime) -> None:
    """deploy2env: the environment's patch and selector act as an override policy would, then its components are
    deployed into its namespace, each once what it depends on is healthy."""
    delivery = rt.components()
    config, where = env_binding(delivery.policies(), str(params.get("policy") or ""), str(params.get("env") or ""))
    patch = config.get("patch") if isinstance(config.get("patch"), dict) else {}
    selector = config.get("selector") if isinstance(config.get("selector"), dict) else {}
    override = {"name": f'env-{params.get("env")}', "type": "override",
                "properties": {"components": patch.get("components") or [],
                               **({"selector": selector["components"]} if "components" in selector else {})}}
    waiting = _apply_in_order(rt, override_components(delivery.components(), [override]), where["namespace"] or None)
    if waiting:
        rt.action.wait_for("; ".join(waiting))


def get_placements(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    policies = select_policies(rt.components().policies(), list(params.get("policies") or []))
    return {"placements": placements(policies)}


def list_clusters(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    return {"outputs": {"clusters": ["local"]}}


HANDLERS = {"deploy": deploy, "get-placements-from-topology-policies": get_placements, "list-clusters": list_clusters,
            "apply-env-bind-app": apply_env_bind_app}
PROVIDER = Provider("vela/multicluster", "multicluster", HANDLERS)
