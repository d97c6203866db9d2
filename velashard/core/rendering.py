"""Rendering an Application into Kubernetes objects from its component and trait definitions.

Definitions carry templates in a sandboxed language (Jinja2's SandboxedEnvironment producing YAML)
under `spec.schematic.jinja` ({template, parameters: JSON schema, patchType for traits}), or
KubeVela's CUE-free `spec.schematic.kube` ({template: literal object, parameters: [{name, type,
fieldPaths, required, default}]}) for components. Pure functions over plain data.
"""

from __future__ import annotations

import copy
import re
import threading
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import yaml
from cachetools import LRUCache
from jinja2 import StrictUndefined, TemplateError as JinjaTemplateError
from jinja2.sandbox import SandboxedEnvironment

from velashard.apis import labels
from velashard.core.catalog.podparts import GLOBALS as POD_PARTS
from velashard.patch import PatchError, apply_json_patch, json_merge_patch, strategic_merge_patch

_ENV = SandboxedEnvironment(undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, autoescape=False)
_ENV.filters["toyaml"] = lambda v: yaml.safe_dump(v, default_flow_style=True, width=10**9).strip().removesuffix(
    "\n...").removesuffix("...").strip()
_ENV.filters["zip_env"] = lambda pair: {"name": pair[0], "value": pair[1]}
_ENV.globals["dict"] = dict
_ENV.globals["drop_args"] = lambda args, drop: [
    a for a in args if a not in drop and not any(d.endswith(("=", "-")) and a.startswith(d) for d in drop)]
_ENV.globals["pick"] = lambda mapping, *keys: {k: mapping[k] for k in keys if k in mapping}
_ENV.globals.update(POD_PARTS)
_TEMPLATES: LRUCache = LRUCache(maxsize=512)
_TEMPLATES_LOCK = threading.Lock()

REF_OBJECTS = "__refObjects__"


class RenderError(Exception):
    """Why an app could not be rendered, naming the component, trait and field."""

    def __init__(self, reason: str, message: str, component: str, trait: str | None = None,
                 field: str | None = None):
        where = f'component "{component}"' + (f' trait "{trait}"' if trait else "")
        super().__init__(f"{where}: {message}")
        self.reason = reason
        self.component = component
        self.trait = trait
        self.field = field


@dataclass
class Definitions:
    """Definitions by name, as the controller's informers hold them."""

    components: dict[str, dict[str, Any]] = field(default_factory=dict)
    traits: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_objects(cls, components: list[dict[str, Any]], traits: list[dict[str, Any]]) -> "Definitions":
        return cls({d["metadata"]["name"]: d for d in components}, {d["metadata"]["name"]: d for d in traits})

    def fingerprint(self) -> str:
        parts = sorted(f'{kind}/{n}@{d["metadata"].get("uid", "")}:{d["metadata"].get("resourceVersion", "")}'
                       for kind, table in (("c", self.components), ("t", self.traits)) for n, d in table.items())
        return ",".join(parts)


@dataclass
class RenderedComponent:
    name: str
    type: str
    workload: dict[str, Any]
    outputs: list[dict[str, Any]]
    traits: list[str]
    depends_on: list[str]
    # ref-objects components wait for the controller to read the referenced objects
    pending_spec: dict[str, Any] | None = None

    @property
    def objects(self) -> list[dict[str, Any]]:
        return [self.workload] + self.outputs


@dataclass
class RenderedApp:
    components: list[RenderedComponent]


def _compiled(definition: dict[str, Any], template: str) -> Any:
    meta = definition["metadata"]
    key = (meta.get("uid") or meta["name"], meta.get("resourceVersion", ""), template)
    with _TEMPLATES_LOCK:  # an LRU cache reorders itself on reads: workers share it
        compiled = _TEMPLATES.get(key)
    if compiled is None:
        compiled = _ENV.from_string(template)
        with _TEMPLATES_LOCK:
            _TEMPLATES[key] = compiled
    return compiled


def template_cache_info() -> tuple[int, int]:
    return len(_TEMPLATES), _TEMPLATES.maxsize


def _with_defaults(schema: dict[str, Any], value: Any) -> Any:
    """Fill `default`s from the schema, in nested objects and array items too."""
    if isinstance(value, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if not isinstance(sub, dict):
                continue
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                value[name] = _with_defaults(sub, value[name])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_with_defaults(schema["items"], item) for item in value]
    return value


def _validate_parameters(schema: dict[str, Any] | None, properties: Any, component: str,
                         trait: str | None) -> dict[str, Any]:
    """Apply defaults and validate against the definition's JSON schema; unknown parameters are errors."""
    if properties is None:
        properties = {}
    if not isinstance(properties, dict):
        raise RenderError("InvalidParameter", "properties must be an object", component, trait, "properties")
    schema = copy.deepcopy(schema or {"type": "object", "additionalProperties": True})
    schema.setdefault("type", "object")
    schema.setdefault("additionalProperties", False)
    params = _with_defaults(schema, copy.deepcopy(properties))
    try:
        validator = jsonschema.Draft7Validator(schema)
        errors = sorted(validator.iter_errors(params), key=lambda e: list(e.path))
    except jsonschema.SchemaError as err:
        raise RenderError("TemplateError", f"the definition's parameter schema is invalid: {err.message}",
                          component, trait)
    if errors:
        err = errors[0]
        path = ".".join(str(p) for p in err.path)
        if err.validator == "additionalProperties":
            unknown = re.findall(r"'([^']+)'", err.message)
            name = unknown[0] if unknown else path
            raise RenderError("InvalidParameter", f'unknown parameter "{name}"', component, trait, name)
        if err.validator == "required":
            missing = re.findall(r"'([^']+)'", err.message)
            path = ".".join(filter(None, [path, missing[0] if missing else ""]))
        raise RenderError("InvalidParameter", f'parameter "{path or "properties"}": {err.message}', component, trait,
                          path or "properties")
    return params


def _render_template(definition: dict[str, Any], template: str, variables: dict[str, Any], component: str,
                     trait: str | None) -> dict[str, Any]:
    try:
        text = _compiled(definition, template).render(**variables)
        result = yaml.safe_load(text) or {}
    except JinjaTemplateError as err:
        raise RenderError("TemplateError", f"template error: {err}", component, trait)
    except yaml.YAMLError as err:
        raise RenderError("TemplateError", f"template did not produce valid YAML: {err}", component, trait)
    if not isinstance(result, dict):
        raise RenderError("TemplateError", "template must produce a mapping", component, trait)
    return result


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


def _kube_schematic(definition: dict[str, Any], schematic: dict[str, Any], properties: dict[str, Any],
                    component: str) -> dict[str, Any]:
    params = schematic.get("parameters") or []
    schema = {"type": "object", "additionalProperties": False, "required": [p["name"] for p in params
                                                                           if p.get("required")],
              "properties": {p["name"]: {k: v for k, v in (("type", p.get("type")), ("default", p.get("default")))
                                         if v is not None} for p in params}}
    values = _validate_parameters(schema, properties, component, None)
    workload = copy.deepcopy(schematic.get("template") or {})
    for p in params:
        if p["name"] in values:
            for path in p.get("fieldPaths") or []:
                _set_path(workload, path, values[p["name"]])
    return {"output": workload}


def _context(app: dict[str, Any], component: str, revision: int) -> dict[str, Any]:
    meta = app["metadata"]
    return {"appName": meta["name"], "appNamespace": meta.get("namespace", "default"), "name": component,
            "namespace": meta.get("namespace", "default"), "revision": f'{meta["name"]}-v{revision}',
            "appRevision": f'{meta["name"]}-v{revision}', "appLabels": dict(meta.get("labels") or {}),
            "appAnnotations": dict(meta.get("annotations") or {})}


def _marked(obj: dict[str, Any], marks: dict[str, str]) -> dict[str, Any]:
    meta = obj.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **marks}
    return obj


def _output_marks(trait: str, key: str, revision: str) -> dict[str, str]:
    return {labels.RESOURCE_TYPE: "TRAIT", labels.TRAIT_TYPE: trait, labels.TRAIT_RESOURCE: key,
            labels.APP_REVISION: revision}


def _finish(obj: Any, app: dict[str, Any], component: str, where: str) -> dict[str, Any]:
    if not isinstance(obj, dict) or not obj.get("kind") or not obj.get("apiVersion"):
        raise RenderError("TemplateError", f"{where} must be an object with apiVersion and kind", component)
    obj = copy.deepcopy(obj)
    meta = obj.setdefault("metadata", {})
    meta.setdefault("name", component)
    meta.setdefault("namespace", app["metadata"].get("namespace", "default"))
    meta["labels"] = {**(meta.get("labels") or {}), labels.APP_NAME: app["metadata"]["name"],
                      labels.APP_NAMESPACE: app["metadata"].get("namespace", "default"),
                      labels.APP_COMPONENT: component}
    return obj


def render_component(app: dict[str, Any], spec: dict[str, Any], defs: Definitions, revision: int) -> RenderedComponent:
    name, ctype = spec.get("name", ""), spec.get("type", "")
    definition = defs.components.get(ctype)
    if definition is None:
        raise RenderError("UnknownType", f'unknown component type "{ctype}"', name, field="type")
    schematic = (definition.get("spec") or {}).get("schematic") or {}
    context = _context(app, name, revision)
    if "kube" in schematic:
        result = _kube_schematic(definition, schematic["kube"], spec.get("properties") or {}, name)
    elif "jinja" in schematic:
        jinja = schematic["jinja"]
        params = _validate_parameters(jinja.get("parameters"), spec.get("properties"), name, None)
        if jinja.get("refObjects"):
            for trait in spec.get("traits") or []:
                if trait.get("type") not in defs.traits:
                    raise RenderError("UnknownType", f'unknown trait type "{trait.get("type")}"', name,
                                      trait.get("type"), "type")
            return RenderedComponent(name, ctype, {REF_OBJECTS: params}, [], [], list(spec.get("dependsOn") or []),
                                     pending_spec=spec)
        result = _render_template(definition, jinja.get("template", ""), {"parameter": params, "context": context},
                                  name, None)
    else:
        raise RenderError("TemplateError", f'component definition "{ctype}" has no schematic (jinja or kube)', name)
    if "output" not in result:
        raise RenderError("TemplateError", "component template produced no output", name)
    return _with_traits(app, spec, result["output"], list((result.get("outputs") or {}).items()), defs, revision)


def complete_ref_objects(app: dict[str, Any], comp: RenderedComponent, objects: list[dict[str, Any]],
                         defs: Definitions, revision: int) -> RenderedComponent:
    """Finish a ref-objects component once its objects were read: the first is the workload."""
    assert comp.pending_spec is not None
    outputs = [(f"ref-{i}", o) for i, o in enumerate(objects[1:], 1)]
    return _with_traits(app, comp.pending_spec, objects[0], outputs, defs, revision)


def _with_traits(app: dict[str, Any], spec: dict[str, Any], output: Any, outputs: list[tuple[str, Any]],
                 defs: Definitions, revision: int) -> RenderedComponent:
    name = spec.get("name", "")
    app_revision = f'{app["metadata"]["name"]}-v{revision}'
    workload = _finish(output, app, name, "output")
    rendered_outputs = [_marked(_finish(o, app, name, f"outputs.{k}"), _output_marks("AuxiliaryWorkload", k,
                                                                                     app_revision))
                        for k, o in outputs]
    trait_types = []
    for trait in spec.get("traits") or []:
        workload, extra = _apply_trait(app, trait, workload, defs, name, revision)
        rendered_outputs.extend(_marked(o, _output_marks(trait.get("type", ""), key, app_revision))
                                for key, o in extra)
        trait_types.append(trait.get("type", ""))
    # Traits may rename the workload (e.g. json-merge-patch on a cloned object): labels are applied last.
    workload = _marked(_finish(workload, app, name, "output"), {labels.RESOURCE_TYPE: "WORKLOAD",
                                                                labels.WORKLOAD_TYPE: spec.get("type", ""),
                                                                labels.APP_REVISION: app_revision})
    return RenderedComponent(name, spec.get("type", ""), workload, _last_wins(rendered_outputs), trait_types,
                             list(spec.get("dependsOn") or []))


def _last_wins(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One object per identity: a later output (e.g. a gateway's Service) replaces an earlier one with the same
    kind and name (webservice's Service), as the later apply would in KubeVela."""
    by_key: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for obj in outputs:
        meta = obj["metadata"]
        by_key[(obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else "", obj["kind"],
                meta.get("namespace", ""), meta["name"])] = obj
    return list(by_key.values())


def _apply_trait(app: dict[str, Any], trait: dict[str, Any], workload: dict[str, Any], defs: Definitions,
                 component: str, revision: int) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    ttype = trait.get("type", "")
    definition = defs.traits.get(ttype)
    if definition is None:
        raise RenderError("UnknownType", f'unknown trait type "{ttype}"', component, ttype, "type")
    jinja = ((definition.get("spec") or {}).get("schematic") or {}).get("jinja") or {}
    params = _validate_parameters(jinja.get("parameters"), trait.get("properties"), component, ttype)
    target = params.get("containerName")
    if target:  # KubeVela's default "" means the first container
        names = [c.get("name") for c in (((workload.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
            "containers") or [] if isinstance(c, dict)]
        if target not in names:
            raise RenderError("InvalidParameter", f'parameter "containerName": no container named "{target}" in the '
                              f'workload (containers: {", ".join(map(str, names)) or "none"})', component, ttype,
                              "containerName")
    context = {**_context(app, component, revision), "output": copy.deepcopy(workload)}
    result = _render_template(definition, jinja.get("template", ""), {"parameter": params, "context": context},
                              component, ttype)
    patch = result.get("patch")
    if patch is not None:
        kind = jinja.get("patchType", "strategic")
        try:
            if kind == "json-patch":
                workload = apply_json_patch(workload, patch)
            elif kind == "json-merge-patch":
                workload = json_merge_patch(workload, patch)
            else:
                workload = strategic_merge_patch(workload, patch, workload.get("kind"))
        except PatchError as err:
            raise RenderError("PatchError", f"patch failed: {err}", component, ttype)
        if not isinstance(workload, dict) or not workload.get("metadata"):
            raise RenderError("PatchError", "patch removed the workload's metadata", component, ttype)
    return workload, [(k, _finish(o, app, component, f"outputs.{k}")) for k, o in (result.get("outputs") or {}).items()]


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
    return RenderedApp(rendered)
