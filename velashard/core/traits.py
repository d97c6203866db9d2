"""Traits applied to a rendered component, in order: each sees the workload and outputs rendered so far as
`context.output`/`context.outputs` and gives `patch` (merged into the workload by KubeVela's rules),
`patchOutputs`, `outputs` and `errs`; whether the trait declares that it applies here."""

from __future__ import annotations

import json
from typing import Any

from velashard.apis import labels
from velashard.core.rendered import Definitions, RenderedComponent, RenderError, finish, marked, properties_of
from velashard.core.schematics import cue_template, evaluate, export, outputs_of
from velashard.patch import PatchError
from velashard.patch.trait_patch import apply_trait_patch


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
    instance = evaluate(definition, properties, context, component, ttype)
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
