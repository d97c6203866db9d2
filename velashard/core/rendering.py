"""Rendering an Application into Kubernetes objects from its component, trait and policy definitions.

Definitions carry KubeVela's schematics: `spec.schematic.cue.template` (a CUE template evaluated with the
component's properties as `parameter` and KubeVela's `context`; its errors said as the Rendered condition shows
them), or `spec.schematic.kube` ({template: literal object, parameters: [{name, type, fieldPaths, required,
default}]}) for components. A component's template gives `output` (the workload) and `outputs` (auxiliary
objects); its traits then patch and add to them in order, each seeing what was rendered so far as
`context.output`/`context.outputs` and giving `patch` (merged by KubeVela's rules), `patchOutputs`, `outputs`
and `errs`. Policies with a CUE output render objects too. Pure functions over plain data; a rendered component
is cached (`render_cache.py`) so that a re-sync evaluates nothing.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from velashard.apis import labels
from velashard.core.definitions import Definitions
from velashard.core.render_cache import cached, component_key, policy_key, slot
from velashard.core.rendered import RenderedApp, RenderedComponent, RenderError
from velashard.core.templates import app_context, compile_template, component_revision
from velashard.cue import CueError, plain
from velashard.patch import PatchError
from velashard.patch.copying import copy_json
from velashard.patch.trait_patch import apply_trait_patch

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
        with evaluate(definition, properties, context, name, None) as instance:
            if ctype == REF_OBJECTS_TYPE:
                _check_trait_types(spec, defs)
                return RenderedComponent(name, ctype, {REF_OBJECTS: export(instance, "parameter", definition, name,
                                                                           None)},
                                         [], [], list(spec.get("dependsOn") or []), pending_spec=spec,
                                         properties=properties)
            if not instance.exists("output"):
                raise RenderError("TemplateError", f'component definition "{ctype}": the template has no output',
                                  name)
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
    found = []
    with evaluate(definition, properties_of(policy.get("properties"), where), context, where, None) as instance:
        if instance.exists("output"):
            found.append(("output", export(instance, "output", definition, where, None)))
        found.extend((f"outputs.{key}", obj) for key, obj in outputs_of(instance, definition, where, None))
    marks = {labels.APP_REVISION: f'{app["metadata"]["name"]}-v{revision}'}
    return [marked(finish(obj, app, name, f"{where}: {path}"), marks) for path, obj in found]


# --- traits ---------------------------------------------------------------------------------------------


def _output_marks(trait: str, key: str, revision: str) -> dict[str, str]:
    return {labels.RESOURCE_TYPE: "TRAIT", labels.TRAIT_TYPE: trait, labels.TRAIT_RESOURCE: key,
            labels.APP_REVISION: revision}


def _workload_types(definition: dict[str, Any], ctype: str) -> set[str]:
    """The names a trait's appliesToWorkloads may use for a component: its type, its workload type
    (deployments.apps) and apiVersion/kind forms."""
    workload = (definition.get("spec") or {}).get("workload") or {}
    names = {ctype}
    if workload.get("type"):
        names.add(workload["type"])
    gvk = workload.get("definition") or {}
    if gvk.get("kind"):
        group = gvk.get("apiVersion", "").rpartition("/")[0]
        plural = gvk["kind"].lower() + ("es" if gvk["kind"].lower().endswith("s") else "s")
        names.update({f"{plural}.{group}" if group else plural, f'{gvk.get("apiVersion")}.{gvk["kind"]}'})
    return names


def _applicability(trait_def: dict[str, Any], comp_def: dict[str, Any] | None, spec: dict[str, Any],
                   ttype: str) -> list[str]:
    """What a trait's appliesToWorkloads and conflictsWith say about its use here. KubeVela renders such a trait
    anyway (its own examples rely on it): velashard renders it too and says so in the Rendered condition."""
    ctype = spec.get("type", "")
    notes = []
    tspec = trait_def.get("spec") or {}
    applies = tspec.get("appliesToWorkloads") or []
    workload_type = ((comp_def or {}).get("spec") or {}).get("workload", {}).get("type", "")
    if applies and "*" not in applies and workload_type != "autodetects.core.oam.dev" and comp_def is not None:
        names = _workload_types(comp_def, ctype)
        if not names & set(applies):
            notes.append(f'component "{spec.get("name", "")}": trait "{ttype}" does not declare that it applies to '
                         f'component type "{ctype}" (appliesToWorkloads: {", ".join(applies)})')
    conflicts = set(tspec.get("conflictsWith") or []) & {t.get("type") for t in spec.get("traits") or []}
    if conflicts:
        notes.append(f'component "{spec.get("name", "")}": trait "{ttype}" conflicts with trait '
                     f'"{sorted(conflicts)[0]}" (conflictsWith)')
    return notes


def with_traits(app: dict[str, Any], spec: dict[str, Any], output: Any, outputs: list[tuple[str, Any]],
                defs: Definitions, revision: int, context: dict[str, Any]) -> RenderedComponent:
    name = spec.get("name", "")
    app_revision = f'{app["metadata"]["name"]}-v{revision}'
    workload = finish(output, app, name, "output")
    rendered = [(k, "AuxiliaryWorkload", finish(o, app, name, f"outputs.{k}")) for k, o in outputs]
    trait_types = []
    trait_properties = {}
    notes: list[str] = []
    comp_def = defs.components.get(spec.get("type", ""))
    for trait in spec.get("traits") or []:
        ttype = trait.get("type", "") if isinstance(trait, dict) else ""
        definition = defs.traits.get(ttype)
        if definition is None:
            raise RenderError("UnknownType", f'unknown trait type "{ttype}"', name, ttype, "type")
        notes.extend(_applicability(definition, comp_def, spec, ttype))
        props = properties_of(trait.get("properties"), name, ttype)
        trait_context = {**context, "output": workload, "componentType": spec.get("type", "")}
        if rendered:
            trait_context["outputs"] = {k: o for k, _, o in rendered}
        workload, rendered = _apply_trait(app, definition, trait.get("properties"), trait_context, workload,
                                          rendered, name, ttype)
        trait_types.append(ttype)
        trait_properties[ttype] = props
    # Traits may rename the workload (e.g. json-merge-patch on a cloned object): labels are applied last.
    workload = marked(finish(workload, app, name, "output"), {labels.RESOURCE_TYPE: "WORKLOAD",
                                                              labels.WORKLOAD_TYPE: spec.get("type", ""),
                                                              labels.APP_REVISION: app_revision})
    outputs_marked = [marked(o, _output_marks(source, key, app_revision)) for key, source, o in rendered]
    return RenderedComponent(name, spec.get("type", ""), workload, _last_wins(outputs_marked), trait_types,
                             list(spec.get("dependsOn") or []), properties=context.get("parameter") or {},
                             trait_properties=trait_properties, notes=notes)


def _last_wins(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One object per identity: a later output (e.g. a gateway's Service) replaces an earlier one with the same
    kind and name (webservice's Service), as the later apply would in KubeVela."""
    by_key: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for obj in outputs:
        meta = obj["metadata"]
        by_key[(obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else "", obj["kind"],
                meta.get("namespace", ""), meta["name"])] = obj
    return list(by_key.values())


def _apply_trait(app: dict[str, Any], definition: dict[str, Any], properties: Any, context: dict[str, Any],
                 workload: dict[str, Any], rendered: list[tuple[str, str, dict[str, Any]]], component: str,
                 ttype: str) -> tuple[dict[str, Any], list[tuple[str, str, dict[str, Any]]]]:
    if cue_template(definition) is None:
        raise RenderError("TemplateError", f'trait definition "{ttype}" has no CUE schematic', component, ttype)
    with evaluate(definition, properties, context, component, ttype) as instance:
        return _trait_result(instance, app, definition, workload, rendered, component, ttype)


def _trait_result(instance: Any, app: dict[str, Any], definition: dict[str, Any], workload: dict[str, Any],
                  rendered: list[tuple[str, str, dict[str, Any]]], component: str,
                  ttype: str) -> tuple[dict[str, Any], list[tuple[str, str, dict[str, Any]]]]:
    errs = export(instance, "errs", definition, component, ttype) if instance.exists("errs") else None
    if errs:
        messages = errs if isinstance(errs, list) else [errs]
        raise RenderError("InvalidParameter", f'trait definition "{ttype}": ' + "; ".join(map(str, messages)),
                          component, ttype)
    if instance.exists("patch"):
        patch = export(instance, "patch", definition, component, ttype)
        try:
            workload = apply_trait_patch(workload, patch, instance.tags("patch"))
        except PatchError as err:
            raise RenderError("PatchError", f'trait definition "{ttype}": patch failed: {err}', component, ttype)
        if not isinstance(workload, dict) or not workload.get("metadata"):
            raise RenderError("PatchError", "patch removed the workload's metadata", component, ttype)
    rendered = list(rendered)
    if instance.exists("patchOutputs"):
        patches = export(instance, "patchOutputs", definition, component, ttype) or {}
        for key, patch in patches.items():
            for i, (k, source, obj) in enumerate(rendered):
                if k == key:
                    try:
                        obj = apply_trait_patch(obj, patch, instance.tags(f"patchOutputs[{json.dumps(key)}]"))
                    except PatchError as err:
                        raise RenderError("PatchError", f'trait definition "{ttype}": patchOutputs.{key}: {err}',
                                          component, ttype)
                    rendered[i] = (k, source, obj)
    for key, obj in outputs_of(instance, definition, component, ttype):
        rendered.append((key, ttype, finish(obj, app, component, f"outputs.{key}")))
    return workload, rendered


# --- schematics -----------------------------------------------------------------------------------------


def cue_template(definition: dict[str, Any]) -> str | None:
    return (((definition.get("spec") or {}).get("schematic") or {}).get("cue") or {}).get("template")


def _definition_kind(definition: dict[str, Any]) -> str:
    return {"ComponentDefinition": "component", "TraitDefinition": "trait",
            "PolicyDefinition": "policy"}.get(definition.get("kind", ""), "definition")


def _cue_error(err: CueError, definition: dict[str, Any], component: str, trait: str | None) -> RenderError:
    """A CUE error as the Rendered condition shows it: the definition, the field and CUE's message."""
    name = f'{_definition_kind(definition)} definition "{definition["metadata"]["name"]}"'
    path = err.path or ""
    where = "; ".join(str(p) for p in err.positions[:2])
    if path == "parameter" or path.startswith("parameter."):
        param = path[len("parameter."):] or "properties"
        missing = err.kind == "incomplete" and param != "properties"
        message = (f'{name}: parameter "{param}" is required' + (f" ({err.message})" if err.message else "")
                   if missing else f'{name}: parameter "{param}": {err.message}')
        return RenderError("InvalidParameter", message, component, trait, param)
    if err.kind == "syntax":
        return RenderError("TemplateError", f"{name}: the template does not compile: {err.message} at {where}",
                           component, trait)
    detail = f"{path}: {err.message}" if path else err.message
    return RenderError("TemplateError", f"{name}: {detail}" + (f" ({where})" if where else ""), component, trait,
                       path or None)


def evaluate(definition: dict[str, Any], parameter: Any, context: dict[str, Any], component: str,
             trait: str | None) -> Any:
    template = cue_template(definition)
    try:
        program = compile_template(template or "", f'{definition["metadata"]["name"]}.cue')
        # no properties are an empty struct, as KubeVela gives a component (`parameter: {}`)
        instance = program.evaluate({"parameter": {} if parameter is None else parameter, "context": context})
    except CueError as err:
        raise _cue_error(err, definition, component, trait) from None
    try:
        if instance.exists("parameter"):
            instance.export("parameter", check=False)  # a parameter error is the user's: say so first
    except CueError as err:
        instance.release()
        raise _cue_error(err, definition, component, trait) from None
    return instance


def export(instance: Any, expression: str, definition: dict[str, Any], component: str, trait: str | None) -> Any:
    try:
        return plain(instance.export(expression, check=False))
    except CueError as err:
        raise _cue_error(err, definition, component, trait) from None


def outputs_of(instance: Any, definition: dict[str, Any], component: str,
               trait: str | None) -> list[tuple[str, Any]]:
    """`outputs`, each read on its own as KubeVela does (an error elsewhere in the struct does not hide them)."""
    if not instance.exists("outputs"):
        return []
    try:
        keys = instance.fields("outputs")
    except CueError as err:
        raise _cue_error(err, definition, component, trait) from None
    return [(key, export(instance, f"outputs[{json.dumps(key)}]", definition, component, trait)) for key in keys]


def _set_path(obj: dict[str, Any], path: str, value: Any) -> None:
    """Set `a.b[0].c` in a nested object, creating maps along the way."""
    tokens = re.findall(r"([^.\[\]]+)|\[(\d+)\]", path)
    node: Any = obj
    for i, (name, index) in enumerate(tokens):
        last = i == len(tokens) - 1
        nxt_is_index = not last and tokens[i + 1][1] != ""
        if name:
            if last:
                node[name] = value
            else:
                node = node.setdefault(name, [] if nxt_is_index else {})
        else:
            idx = int(index)
            while len(node) <= idx:
                node.append({})
            if last:
                node[idx] = value
            else:
                node = node[idx]


_KUBE_TYPES = {"string": str, "number": (int, float), "boolean": bool, "array": list, "object": dict}


def kube_schematic(schematic: dict[str, Any], properties: dict[str, Any], component: str) -> dict[str, Any]:
    """KubeVela's CUE-free schematic: parameters set fields of a literal object by their paths."""
    params = {p["name"]: p for p in schematic.get("parameters") or []}
    for name, value in properties.items():
        if name not in params:
            raise RenderError("InvalidParameter", f'unknown parameter "{name}"', component, field=name)
        want = _KUBE_TYPES.get(params[name].get("type", "string"))
        if want and not isinstance(value, want) or isinstance(value, bool) and want == (int, float):
            raise RenderError("InvalidParameter", f'parameter "{name}" must be a {params[name].get("type")}',
                              component, field=name)
    workload = copy_json(schematic.get("template") or {})
    for name, p in params.items():
        value = properties.get(name, p.get("default"))
        if value is None:
            if p.get("required"):
                raise RenderError("InvalidParameter", f'parameter "{name}" is required', component, field=name)
            continue
        for path in p.get("fieldPaths") or []:
            _set_path(workload, path, copy_json(value))
    return workload


def properties_of(value: Any, component: str, trait: str | None = None) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RenderError("InvalidParameter", "properties must be an object", component, trait, "properties")
    return value


def marked(obj: dict[str, Any], marks: dict[str, str]) -> dict[str, Any]:
    meta = obj.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **marks}
    return obj


def finish(obj: Any, app: dict[str, Any], component: str, where: str) -> dict[str, Any]:
    if not isinstance(obj, dict) or not obj.get("kind") or not obj.get("apiVersion"):
        raise RenderError("TemplateError", f"{where} must be an object with apiVersion and kind", component)
    obj = copy_json(obj)
    meta = obj.setdefault("metadata", {})
    meta.setdefault("name", component)
    meta.setdefault("namespace", app["metadata"].get("namespace", "default"))
    meta["labels"] = {**(meta.get("labels") or {}), labels.APP_NAME: app["metadata"]["name"],
                      labels.APP_NAMESPACE: app["metadata"].get("namespace", "default"),
                      labels.APP_COMPONENT: component}
    return obj
