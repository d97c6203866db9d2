"""vela/op, the legacy surface most step definitions in the wild still import: the same actions as the newer
packages, written without `$params`/`$returns` (an action's fields are its parameters and its results are filled
into the same fields), plus the app-level helpers (#ApplyComponent, #Load, #ApplyApplication, #Deploy...).
Terraform's actions (#DeployCloudResource, #ShareCloudResource) fail the step: there is no terraform here."""

from __future__ import annotations

from typing import Any

from velashard.workflow.providers import builtin, config, email, http, kube, metrics, multicluster, oam, util
from velashard.workflow.providers.base import Provider, ProviderError, Runtime


def list_objects(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    found = kube.list_objects(params, rt)
    found["list"] = found.pop("values")
    return found


def http_do(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    return {"response": http.do(params, rt)}


def no_terraform(params: dict[str, Any], rt: Runtime) -> None:
    raise ProviderError("cloud resources need terraform, which is not supported here")


HANDLERS = {
    **kube.HANDLERS, "list": list_objects,
    **builtin.HANDLERS,
    **util.HANDLERS,
    "do": http_do,
    **email.HANDLERS,
    **metrics.HANDLERS,
    "create-config": config.create, "delete-config": config.delete, "read-config": config.read,
    "list-config": config.list_configs,
    **oam.HANDLERS,
    **multicluster.HANDLERS,
    "deploy-cloud-resource": no_terraform, "share-cloud-resource": no_terraform,
}
PROVIDER = Provider("vela/op", "op", HANDLERS, legacy=True)
