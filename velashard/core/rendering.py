"""Rendering an Application into Kubernetes objects from its component, trait and policy definitions.

Definitions carry KubeVela's schematics: `spec.schematic.cue.template` (a CUE template evaluated with the
component's properties as `parameter` and KubeVela's `context`), or `spec.schematic.kube` ({template: literal
object, parameters: [{name, type, fieldPaths, required, default}]}) for components (`schematics.py`). A
component's template gives `output` (the workload) and `outputs` (auxiliary objects); its traits then patch and
add to them (`traits.py`). Pure functions over plain data; a rendered component is cached
(`render_cache.py`) so that a re-sync evaluates nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from velashard.apis import labels
from velashard.core.render_cache import cached, component_key, policy_key, slot
from velashard.core.rendered import (Definitions, RenderedApp, RenderedComponent, RenderError, finish, marked,
                                     properties_of)
from velashard.core.schematics import cue_template, evaluate, export, kube_schematic, outputs_of
from velashard.core.templates import app_context, component_revision
from velashard.core.traits import with_traits

REF_OBJECTS = "__refObjects__"
REF_OBJECTS_TYPE = "ref-objects"  # KubeVela reads the objects this component type names itself


def render_component(app: dict[str, Any], spec: dict[str, Any], defs: Definitions, revision: int,
                     replica_key: str = "") -> RenderedComponent:
    """One component; `replica_key` is context.replicaKey (a replication policy's copy of it)."""
    def render() -> dict[str, Any]:
        rendered = _render_component(app, spec, defs, revision, replica_key)
        # Its fields as they are: the cache copies them (dataclasses.asdict's deep copy was an eighth of a render).
        return {f.name: getattr(rendered, f.name) for f in dataclasses.fields(rendered)}

    where = slot(app, "component", f"{spec.get('name')}/{replica_key}" if replica_key else spec.get("name"))
    return RenderedComponent(**cached(where, component_key(app, spec, defs, revision) + replica_key.encode(), render))


def _render_component(app: dict[str, Any], spec: dict[str, Any], defs: Definitions,
                      revision: int, replica_key: str = "") -> RenderedComponent:
    name, ctype = spec.get("name", ""), spec.get("type", "")
    definition = defs.components.get(ctype)
    if definition is None:
        raise RenderError("UnknownType", f'unknown component type "{ctype}"', name, field="type")
    properties = properties_of(spec.get("properties"), name)
    schematic = (definition.get("spec") or {}).get("schematic") or {}
    context = {**app_context(app, revision, defs.cluster_version), "name": name,
               "revision": component_revision(spec), "replicaKey": replica_key}
    if spec.get("properties") is not None:
        context["parameter"] = properties
    if "kube" in schematic:
        output, outputs = kube_schematic(schematic["kube"], properties, name), []
    elif "cue" in schematic:
        instance = evaluate(definition, properties, context, name, None)
        if ctype == REF_OBJECTS_TYPE:
            _check_trait_types(spec, defs)
            return RenderedComponent(name, ctype, {REF_OBJECTS: export(instance, "parameter", definition, name,
                                                                       None)},
                                     [], [], list(spec.get("dependsOn") or []), pending_spec=spec,
                                     properties=properties)
        if not instance.exists("output"):
            raise RenderError("TemplateError", f'component definition "{ctype}": the template has no output', name)
        output = export(instance, "output", definition, name, None)
        outputs = outputs_of(instance, definition, name, None)
    else:
        raise RenderError("TemplateError", f'component definition "{ctype}" has no schematic (cue or kube)', name)
    return with_traits(app, spec, output, outputs, defs, revision, context)


def _check_trait_types(spec: dict[str, Any], defs: Definitions) -> None:
    for trait in spec.get("traits") or []:
        if trait.get("type") not in defs.traits:
            raise RenderError("UnknownType", f'unknown trait type "{trait.get("type")}"', spec.get("name", ""),
                              trait.get("type"), "type")


def complete_ref_objects(app: dict[str, Any], comp: RenderedComponent, objects: list[dict[str, Any]],
                         defs: Definitions, revision: int) -> RenderedComponent:
    """Finish a ref-objects component once its objects were read: the first is the workload."""
    assert comp.pending_spec is not None
    spec = comp.pending_spec
    outputs = [(f"objects-{i}", o) for i, o in enumerate(objects[1:], 1)]
    context = {**app_context(app, revision, defs.cluster_version), "name": spec.get("name", ""),
               "revision": component_revision(spec), "parameter": comp.properties}
    return with_traits(app, spec, objects[0], outputs, defs, revision, context)


def render_app(app: dict[str, Any], defs: Definitions, revision: int) -> RenderedApp:
    components = (app.get("spec") or {}).get("components") or []
    seen: set[str] = set()
    rendered = []
    for spec in components:
        if spec.get("name") in seen:
            raise RenderError("InvalidParameter", "duplicate component name", spec.get("name", ""), field="name")
        seen.add(spec.get("name", ""))
        rendered.append(render_component(app, spec, defs, revision))
    for comp in rendered:
        for dep in comp.depends_on:
            if dep not in seen:
                raise RenderError("InvalidParameter", f'dependsOn names unknown component "{dep}"', comp.name,
                                  field="dependsOn")
    return RenderedApp(rendered, render_policies(app, defs, revision))


def render_policies(app: dict[str, Any], defs: Definitions, revision: int) -> list[dict[str, Any]]:
    """Policies with a CUE PolicyDefinition: their properties must satisfy its `parameter`, and what its `output`
    and `outputs` give are objects of the app, labelled as KubeVela labels them (the policy's name as the
    component). Parameter-only policies (topology, override, ...) give none. Cached as components are."""
    objects: list[dict[str, Any]] = []
    for policy in (app.get("spec") or {}).get("policies") or []:
        definition = defs.policies.get(policy.get("type", "")) if isinstance(policy, dict) else None
        if definition is None or cue_template(definition) is None:
            continue
        key = policy_key(app, policy, definition, defs, revision)
        objects.extend(cached(slot(app, "policy", policy.get("name")), key,
                              lambda: _render_policy(app, policy, definition, defs, revision)))
    return objects


def _render_policy(app: dict[str, Any], policy: dict[str, Any], definition: dict[str, Any], defs: Definitions,
                   revision: int) -> list[dict[str, Any]]:
    name = policy.get("name", "")
    where = f"policy {name}"
    context = {**app_context(app, revision, defs.cluster_version), "name": name}
    instance = evaluate(definition, properties_of(policy.get("properties"), where), context, where, None)
    found = []
    if instance.exists("output"):
        found.append(("output", export(instance, "output", definition, where, None)))
    found.extend((f"outputs.{key}", obj) for key, obj in outputs_of(instance, definition, where, None))
    marks = {labels.APP_REVISION: f'{app["metadata"]["name"]}-v{revision}'}
    return [marked(finish(obj, app, name, f"{where}: {path}"), marks) for path, obj in found]
