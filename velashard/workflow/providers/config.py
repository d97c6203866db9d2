"""vela/config: KubeVela's configs, Secrets labelled `config.oam.dev/catalog: velacore-config` whose
`input-properties` key holds the config's properties as JSON. A config made from a template (the ConfigMap
`config-template-<name>`, its CUE under `template`) also takes the Secret the template's `template.output`
renders, its type label and its sensitivity. Created configs are applied for the app (and go with it); reads,
lists and deletes are done as the app's author."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from velashard.cue import CueError, compile_sources, plain
from velashard.kube import errors
from velashard.kube.resources import CONFIGMAPS, SECRETS
from velashard.workflow.delivery import DeliveryError
from velashard.workflow.providers.base import Provider, ProviderError, Runtime

CATALOG, CATALOG_VALUE = "config.oam.dev/catalog", "velacore-config"
TYPE, SCOPE = "config.oam.dev/type", "config.oam.dev/scope"
SENSITIVE, ALIAS, DESCRIPTION = "config.oam.dev/sensitive", "config.oam.dev/alias", "config.oam.dev/description"
TEMPLATE_NAMESPACE = "config.oam.dev/template-namespace"
PROPERTIES = "input-properties"
TEMPLATE_PREFIX = "config-template-"
SYSTEM_NAMESPACE = "vela-system"


def _names(params: dict[str, Any]) -> tuple[str, str]:
    name, namespace = params.get("name"), params.get("namespace")
    if not isinstance(name, str) or not name or not isinstance(namespace, str) or not namespace:
        raise ProviderError("name and namespace are required")
    return name, namespace


def _split_template(text: str) -> tuple[str, str]:
    if "/" in text:
        namespace, name = text.split("/", 1)
        return namespace, name
    return SYSTEM_NAMESPACE, text


def _from_template(rt: Runtime, template: str, name: str, namespace: str,
                   properties: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
    """(the Secret the template renders, labels, annotations)."""
    t_namespace, t_name = _split_template(template)
    try:
        holder = rt.client().get(CONFIGMAPS, TEMPLATE_PREFIX + t_name, t_namespace)
    except errors.NotFound:
        raise ProviderError(f"the config template {t_namespace}/{t_name} does not exist") from None
    except errors.KubeError as err:
        raise ProviderError(f"config template {t_namespace}/{t_name}: {err.message}") from None
    meta = holder.get("metadata") or {}
    text = (holder.get("data") or {}).get("template") or ""
    secret: dict[str, Any] = {}
    if text.strip():
        try:
            instance = compile_sources({"template.cue": text, "declared.cue": "context: _\n"}).evaluate(
                {"context": {"name": name, "namespace": namespace}, "template": {"parameter": properties}})
            if instance.exists("template.output"):
                secret = plain(instance.export("template.output", check=False))
        except CueError as err:
            raise ProviderError(f"config template {t_namespace}/{t_name}: {err}") from None
    labels = {CATALOG: CATALOG_VALUE, TYPE: t_name, SCOPE: (meta.get("labels") or {}).get(SCOPE, "")}
    sensitive = (meta.get("annotations") or {}).get(SENSITIVE, "false")
    return secret, labels, {SENSITIVE: sensitive, TEMPLATE_NAMESPACE: t_namespace}


def create(params: dict[str, Any], rt: Runtime) -> None:
    name, namespace = _names(params)
    properties = params.get("config") or {}
    secret: dict[str, Any] = {}
    labels, annotations = {CATALOG: CATALOG_VALUE, TYPE: ""}, {}
    if params.get("template"):
        secret, labels, annotations = _from_template(rt, str(params["template"]), name, namespace, properties)
    meta = dict(secret.get("metadata") or {})
    body = {**secret, "apiVersion": "v1", "kind": "Secret", "metadata": {
        **meta, "name": meta.get("name") or name, "namespace": namespace,
        "labels": {**(meta.get("labels") or {}), **labels},
        "annotations": {**(meta.get("annotations") or {}), **annotations, ALIAS: "", DESCRIPTION: ""}}}
    data = dict(body.get("data") or {})
    data[PROPERTIES] = base64.b64encode(json.dumps(properties, sort_keys=True).encode()).decode()
    body["data"] = data
    try:
        live = rt.client().get(SECRETS, body["metadata"]["name"], namespace)
        if (live["metadata"].get("labels") or {}).get(TYPE, "") != labels[TYPE]:
            raise ProviderError(f"config {namespace}/{name} was made from another template; it cannot change")
    except errors.NotFound:
        pass
    except errors.KubeError as err:
        raise ProviderError(f"config {namespace}/{name}: {err.message}") from None
    try:
        rt.components().dispatch([body])
    except DeliveryError as err:
        raise ProviderError(str(err)) from None
    return None


def _properties(secret: dict[str, Any]) -> dict[str, Any]:
    raw = (secret.get("data") or {}).get(PROPERTIES, "")
    try:
        value = json.loads(base64.b64decode(raw) or b"{}")
    except (binascii.Error, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def read(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    name, namespace = _names(params)
    try:
        secret = rt.client().get(SECRETS, name, namespace)
    except errors.KubeError as err:
        raise ProviderError(f"config {namespace}/{name}: {err.message}") from None
    if (secret["metadata"].get("annotations") or {}).get(SENSITIVE) == "true":
        raise ProviderError(f"config {namespace}/{name} is sensitive: it cannot be read")
    return {"config": _properties(secret)}


def list_configs(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    template, namespace = params.get("template"), params.get("namespace")
    if not template or not namespace:
        raise ProviderError("template and namespace are required")
    name = _split_template(str(template))[1]
    try:
        items, _ = rt.client().list_all(SECRETS, str(namespace), f"{CATALOG}={CATALOG_VALUE},{TYPE}={name}")
    except errors.KubeError as err:
        raise ProviderError(f"configs in {namespace}: {err.message}") from None
    configs = []
    for secret in items:
        annotations = secret["metadata"].get("annotations") or {}
        entry = {"name": secret["metadata"]["name"], "alias": annotations.get(ALIAS, ""),
                 "description": annotations.get(DESCRIPTION, "")}
        if annotations.get(SENSITIVE) != "true":
            entry["config"] = _properties(secret)
        configs.append(entry)
    return {"configs": configs}


def delete(params: dict[str, Any], rt: Runtime) -> None:
    name, namespace = _names(params)
    try:
        rt.client().delete(SECRETS, name, namespace)
    except errors.NotFound:
        pass
    except errors.KubeError as err:
        raise ProviderError(f"config {namespace}/{name}: {err.message}") from None
    return None


HANDLERS = {"create": create, "read": read, "list": list_configs, "delete": delete}
PROVIDER = Provider("vela/config", "config", HANDLERS)
