"""vela/oam: the app's components to templates: apply one (rendered and applied by core, waiting until it is
healthy unless told not to), render one without applying it, and load the app's components and policies."""

from __future__ import annotations

from typing import Any

from velashard.apis.oam import APPLICATIONS
from velashard.kube import errors
from velashard.workflow.delivery import ComponentResult, DeliveryError
from velashard.workflow.providers.base import Provider, ProviderError, Runtime, local_only


def _component(params: dict[str, Any]) -> dict[str, Any]:
    value = params.get("value")
    if not isinstance(value, dict) or not value.get("name") or not value.get("type"):
        raise ProviderError("value must be a component with a name and a type")
    return {k: v for k, v in value.items() if k not in ("inputs", "outputs")}


def _returns(result: ComponentResult) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if result.output is not None:
        out["output"] = result.output
    if result.outputs:
        out["outputs"] = result.outputs
    return out


def apply_component(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    local_only(params.get("cluster"))
    try:
        result = rt.components().apply_component(_component(params), params.get("namespace") or None,
                                                  params.get("patch"))
    except DeliveryError as err:
        raise ProviderError(str(err)) from None
    if params.get("waitHealthy", True) and not result.healthy:
        rt.action.wait_for("wait healthy" + (f": {result.message}" if result.message else ""))
    return _returns(result)


def render_component(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    local_only(params.get("cluster"))
    try:
        result = rt.components().render_component(_component(params), params.get("namespace") or None,
                                                   params.get("patch"))
    except DeliveryError as err:
        raise ProviderError(str(err)) from None
    return _returns(result)


def _spec(params: dict[str, Any], rt: Runtime) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    name = params.get("app")
    if not name:
        return rt.components().components(), rt.components().policies()
    try:
        other = rt.client().get(APPLICATIONS, str(name), rt.namespace)
    except errors.KubeError as err:
        raise ProviderError(f"application {rt.namespace}/{name}: {err.message}") from None
    spec = other.get("spec") or {}
    return list(spec.get("components") or []), list(spec.get("policies") or [])


def _bare(component: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in component.items() if k not in ("inputs", "outputs")}


def load(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    return {"value": {c["name"]: _bare(c) for c in _spec(params, rt)[0]}}


def load_in_order(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    return {"value": [_bare(c) for c in _spec(params, rt)[0]]}


def load_policies(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    return {"value": {p["name"]: p for p in _spec(params, rt)[1] if p.get("name")}}


HANDLERS = {"component-apply": apply_component, "component-render": render_component, "load": load,
            "load-comps-in-order": load_in_order, "load-policies": load_policies}
PROVIDER = Provider("vela/oam", "oam", HANDLERS)
