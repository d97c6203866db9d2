"""vela/query, as far as steps use it: an application's applied resources, those resources live, and the endpoints
of its Services and Ingresses (KubeVela's collect-service-endpoints). An application's resources are those its
status lists as applied (`status.appliedResources`), each read as the step's author: what the author may not read
is refused, and the step fails saying so."""

from __future__ import annotations

from typing import Any

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.kube import errors
from velashard.workflow.providers.base import Provider, ProviderError, Runtime, local_only

HTTP, HTTPS = "http", "https"
# KubeVela's guess of a port's application protocol
_APP_PROTOCOLS = {80: HTTP, 8080: HTTP, 443: HTTPS, 3306: "mysql", 6379: "redis"}
_INGRESS_HOST = "ingress.controller/host"
_INGRESS_HTTP_PORT = "ingress.controller/http-port"
_INGRESS_HTTPS_PORT = "ingress.controller/https-port"


def _applied(params: dict[str, Any], rt: Runtime) -> tuple[list[dict[str, Any]], list[str] | None]:
    """The application's applied resources that pass the filter, read from the application as the author; and
    the components to keep (the status does not say which component a resource is of: its label does)."""
    app = params.get("app") if isinstance(params.get("app"), dict) else {}
    name, namespace = str(app.get("name") or ""), str(app.get("namespace") or rt.namespace)
    if not name:
        raise ProviderError("app.name is required")
    filt = app.get("filter") if isinstance(app.get("filter"), dict) else {}
    local_only(filt.get("cluster"))
    try:
        found = rt.client().get(APPLICATIONS, name, namespace)
    except errors.NotFound:
        raise ProviderError(f"query app failure: application {namespace}/{name} not found") from None
    except errors.KubeError as err:
        raise ProviderError(f"query app failure: application {namespace}/{name}: {err.message}") from None
    out = []
    for ref in (found.get("status") or {}).get("appliedResources") or []:
        if not isinstance(ref, dict) or not ref.get("kind") or not ref.get("name"):
            continue
        if filt.get("kind") and ref.get("kind") != filt["kind"]:
            continue
        if filt.get("apiVersion") and ref.get("apiVersion") != filt["apiVersion"]:
            continue
        if filt.get("clusterNamespace") and ref.get("namespace") != filt["clusterNamespace"]:
            continue
        out.append(ref)
    return out, filt.get("components") or None


def _component(obj: dict[str, Any]) -> str:
    return (obj["metadata"].get("labels") or {}).get(labels.APP_COMPONENT, "")


def _live(rt: Runtime, ref: dict[str, Any]) -> dict[str, Any] | None:
    """The resource as it is, read as the author; None when it is gone (a refusal fails the step)."""
    try:
        resource = rt.components().resource(str(ref.get("apiVersion") or ""), str(ref["kind"]))
        return rt.client().get(resource, ref["name"], ref.get("namespace") if resource.namespaced else None)
    except errors.NotFound:
        return None
    except errors.Forbidden as err:
        raise ProviderError(err.message) from None


def _in_app(params: dict[str, Any], rt: Runtime,
            kinds: tuple[str, ...] = ()) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(ref, live object) of the application's resources (of these kinds), of the components asked for."""
    refs, components = _applied(params, rt)
    found = []
    for ref in refs:
        if kinds and ref["kind"] not in kinds:
            continue
        obj = _live(rt, ref)
        if obj is not None and (components is None or _component(obj) in components):
            found.append((ref, obj))
    return found


def list_applied(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    return {"list": [{**ref, "cluster": ref.get("cluster") or "local", "component": _component(obj)}
                     for ref, obj in _in_app(params, rt)]}


def list_in_app(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    return {"list": [{"cluster": "local", "component": _component(obj), "revision": "", "object": obj}
                     for _, obj in _in_app(params, rt)]}


def _entry(obj: dict[str, Any], component: str, host: str, port: dict[str, Any], number: int, inner: bool,
           app_protocol: str, path: str = "") -> dict[str, Any]:
    meta = obj["metadata"]
    endpoint: dict[str, Any] = {"protocol": port.get("protocol") or "TCP", "appProtocol": app_protocol,
                                "host": host, "port": number}
    if port.get("name"):
        endpoint["portName"] = port["name"]
    if path:
        endpoint["path"] = path
    if inner:
        endpoint["inner"] = True
    ref = {"kind": obj.get("kind", ""), "apiVersion": obj.get("apiVersion", ""), "namespace": meta.get("namespace", ""),
           "name": meta["name"], "uid": meta.get("uid", ""), "resourceVersion": meta.get("resourceVersion", "")}
    return {"endpoint": endpoint, "ref": ref, "cluster": "local", "component": component}


def service_endpoints(svc: dict[str, Any], component: str) -> list[dict[str, Any]]:
    """A Service's endpoints: its name in the cluster (ClusterIP, ExternalName: inner), its load balancer's
    addresses, or its node ports (with no host: the nodes' addresses are not the author's to read)."""
    spec, meta = svc.get("spec") or {}, svc["metadata"]
    kind = spec.get("type") or "ClusterIP"
    out = []
    for port in spec.get("ports") or []:
        number = int(port.get("port") or 0)
        guess = _APP_PROTOCOLS.get(number, "")
        if kind in ("ClusterIP", "ExternalName"):
            out.append(_entry(svc, component, f'{meta["name"]}.{meta.get("namespace", "")}', port, number, True, guess))
        elif kind == "LoadBalancer":
            for lb in ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []:
                for host in (lb.get("hostname"), lb.get("ip")):
                    if host:
                        out.append(_entry(svc, component, host, port, number, False, guess))
        elif kind == "NodePort" and port.get("nodePort"):
            out.append(_entry(svc, component, "", port, int(port["nodePort"]), False, guess))
    return out


def ingress_endpoints(ing: dict[str, Any], component: str) -> list[dict[str, Any]]:
    """An Ingress's endpoints: one per rule and path, https where its TLS covers the host (ports and a missing
    host as the ingress controller's annotations say)."""
    spec = ing.get("spec") or {}
    annotations = ing["metadata"].get("annotations") or {}

    def secure(host: str) -> bool:
        return any(not t.get("hosts") or host in t["hosts"] for t in spec.get("tls") or [])

    def port_of(scheme: str) -> int:
        text = annotations.get(_INGRESS_HTTPS_PORT if scheme == HTTPS else _INGRESS_HTTP_PORT, "")
        return int(text) if str(text).isdigit() and int(text) > 0 else (443 if scheme == HTTPS else 80)

    out = []
    for rule in spec.get("rules") or []:
        host = rule.get("host") or ""
        scheme = HTTPS if secure(host) else HTTP
        for path in (rule.get("http") or {}).get("paths") or []:
            out.append(_entry(ing, component, host or annotations.get(_INGRESS_HOST, ""), {"protocol": "TCP"},
                              port_of(scheme), False, scheme, path.get("path") or ""))
    return out


def collect_endpoints(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    found = []
    for ref, obj in _in_app(params, rt, ("Service", "Ingress")):
        if ref["kind"] == "Service":
            found.extend(service_endpoints(obj, _component(obj)))
        elif ref["kind"] == "Ingress":
            found.extend(ingress_endpoints(obj, _component(obj)))
    return {"list": found}


HANDLERS = {"listAppliedResources": list_applied, "listResourcesInApp": list_in_app,
            "collectServiceEndpoints": collect_endpoints}
PROVIDER = Provider("vela/query", "query", HANDLERS)

# The legacy package (`import "vela/ql"`): the same actions, their parameters and results the action's own fields.
LEGACY = Provider("vela/ql", "ql", HANDLERS, legacy=True)
