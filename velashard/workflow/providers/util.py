"""vela/util: small helpers for templates: bytes as a string, a patch merged into an object, and the step's log
(data into the controller's log and kept for `velashard workflow logs`, or where the step's logs are)."""

from __future__ import annotations

import json
from typing import Any

from velashard.patch import PatchError
from velashard.patch.trait_patch import apply_trait_patch
from velashard.workflow.providers.base import Provider, ProviderError, Runtime
from velashard.observability import fields

LOG_CONFIG = "logConfig"  # the mutable value KubeVela keeps log sources under, per step
LOG_DATA = "logData"  # ours: the data each step logged last, for `velashard workflow logs`
MAX_LOGGED = 4096


def convert_string(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    value = params.get("bt")
    if isinstance(value, bytes):
        return {"str": value.decode("utf-8", "replace")}
    if isinstance(value, str):
        return {"str": value}
    raise ProviderError("bt must be bytes")


def patch_object(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    value, patch = params.get("value"), params.get("patch")
    if not isinstance(value, dict) or not isinstance(patch, dict):
        raise ProviderError("value and patch must be objects")
    try:
        return {"result": apply_trait_patch(value, patch, rt.tags(("patch",)))}
    except PatchError as err:
        return {"err": str(err)}


def _table(rt: Runtime, key: str) -> dict[str, Any]:
    raw = rt.context.get_mutable(key)
    try:
        table = json.loads(raw) if raw else {}
    except ValueError:
        table = {}
    return table if isinstance(table, dict) else {}


def log(params: dict[str, Any], rt: Runtime) -> None:
    config = _table(rt, LOG_CONFIG)
    step = dict(config.get(rt.step_name) or {})
    data = params.get("data")
    if data is not None:
        text = data if isinstance(data, str) else json.dumps(data, sort_keys=True)
        text = text[-MAX_LOGGED:]  # the controller's log line and what is kept: the end of what was logged
        step["data"] = True
        rt.log.info(text, extra=fields(key=f'{rt.namespace}/{rt.app["metadata"]["name"]}', step=rt.step_name,
                                       step_id=rt.step_id, level=params.get("level", 3)))
        logged = _table(rt, LOG_DATA)
        logged[rt.step_name] = text
        rt.context.set_mutable(json.dumps(logged, sort_keys=True), LOG_DATA)
    source = params.get("source")
    if isinstance(source, dict):
        where = dict(step.get("source") or {})
        if source.get("url"):
            where["url"] = source["url"]
        if source.get("resources"):
            where["resources"] = source["resources"]
        step["source"] = where
    config[rt.step_name] = step
    rt.context.set_mutable(json.dumps(config, sort_keys=True), LOG_CONFIG)
    return None


HANDLERS = {"string": convert_string, "patch-k8s-object": patch_object, "log": log}
PROVIDER = Provider("vela/util", "util", HANDLERS)
