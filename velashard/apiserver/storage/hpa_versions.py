"""HorizontalPodAutoscaler between autoscaling/v1 and autoscaling/v2 (the storage version), as kube-apiserver
converts it (k8s.io/kubernetes pkg/apis/autoscaling/v1/conversion.go), plus each version's defaults.

v1 has only `targetCPUUtilizationPercentage` and `currentCPUUtilizationPercentage`. Everything else v2 holds
travels in annotations of the v1 object, so that a v1 client that reads, changes and writes back loses nothing:

- `autoscaling.alpha.kubernetes.io/metrics`: the spec metrics other than CPU utilization, in v1's
  (v2beta1-shaped) MetricSpec form;
- `.../current-metrics`: every status metric, in v1's MetricStatus form;
- `.../conditions`: the status conditions;
- `.../behavior`: the spec behavior, as Go marshals the *internal* type (field names without json tags:
  `ScaleUp`, `StabilizationWindowSeconds`, ...), read back ignoring case as encoding/json does.

Going to v2 those annotations are turned back into fields and removed. A v1 object with no CPU target and no
other metrics gets the CPU 80% metric kube-apiserver adds there ("autoscaling/v1 formerly had an implicit
default applied in the controller"), so it reads back through v1 with `targetCPUUtilizationPercentage: 80`.

Objects are plain dicts; inputs are never changed. `partial=True` converts a server-side apply configuration:
only what it names, with no defaults and no zero values filled in.
"""

from __future__ import annotations

import copy
import json
from typing import Any

METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/metrics"
CURRENT_METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/current-metrics"
CONDITIONS_ANNOTATION = "autoscaling.alpha.kubernetes.io/conditions"
BEHAVIOR_ANNOTATION = "autoscaling.alpha.kubernetes.io/behavior"
ROUND_TRIP_ANNOTATIONS = (METRICS_ANNOTATION, BEHAVIOR_ANNOTATION, CURRENT_METRICS_ANNOTATION,
                          CONDITIONS_ANNOTATION)
DEFAULT_CPU_UTILIZATION = 80

V1, V2 = "autoscaling/v1", "autoscaling/v2"

# v2 behavior defaults (pkg/apis/autoscaling/v2/defaults.go), filled in only when a behavior is given.
_SCALE_UP = {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
             "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                          {"type": "Percent", "value": 100, "periodSeconds": 15}]}
# The scale-down window stays unset: the controller's --horizontal-pod-autoscaler-downscale-stabilization decides.
_SCALE_DOWN = {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _present(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else None


def _dict(obj: Any, key: str) -> dict[str, Any]:
    value = _present(obj, key)
    return value if isinstance(value, dict) else {}


def _list(obj: Any, key: str) -> list[Any]:
    value = _present(obj, key)
    return value if isinstance(value, list) else []


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        out[key] = value


def _ref(ref: Any) -> dict[str, Any]:
    """CrossVersionObjectReference: kind and name always, apiVersion when set."""
    out = {"kind": _present(ref, "kind") or "", "name": _present(ref, "name") or ""}
    _put(out, "apiVersion", _present(ref, "apiVersion") or None)
    return out


def _is_cpu_utilization(metric: Any) -> bool:
    resource = _dict(metric, "resource")
    return (_present(metric, "type") == "Resource" and resource.get("name") == "cpu"
            and _dict(resource, "target").get("averageUtilization") is not None)


def _cpu_metric(percent: Any) -> dict[str, Any]:
    return {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                      "averageUtilization": percent}}}


# --- metric specs and statuses: v2 <-> v1's MetricSpec / MetricStatus (the annotation forms) ---------

def _metric_spec_to_v1(m: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": m.get("type", "")}
    if isinstance(m.get("object"), dict):
        src, target = m["object"], _dict(m["object"], "target")
        ident = _dict(src, "metric")
        v: dict[str, Any] = {"target": _ref(_present(src, "describedObject")), "metricName": ident.get("name", ""),
                             "targetValue": target.get("value", "0")}
        _put(v, "selector", ident.get("selector"))
        _put(v, "averageValue", target.get("averageValue"))
        out["object"] = v
    if isinstance(m.get("pods"), dict):
        ident, target = _dict(m["pods"], "metric"), _dict(m["pods"], "target")
        v = {"metricName": ident.get("name", ""), "targetAverageValue": target.get("averageValue", "0")}
        _put(v, "selector", ident.get("selector"))
        out["pods"] = v
    for key in ("resource", "containerResource"):
        if isinstance(m.get(key), dict):
            src, target = m[key], _dict(m[key], "target")
            v = {"name": src.get("name", "")}
            _put(v, "targetAverageUtilization", target.get("averageUtilization"))
            _put(v, "targetAverageValue", target.get("averageValue"))
            if key == "containerResource":
                v["container"] = src.get("container", "")
            out[key] = v
    if isinstance(m.get("external"), dict):
        ident, target = _dict(m["external"], "metric"), _dict(m["external"], "target")
        v = {"metricName": ident.get("name", "")}
        _put(v, "metricSelector", ident.get("selector"))
        _put(v, "targetValue", target.get("value"))
        _put(v, "targetAverageValue", target.get("averageValue"))
        out["external"] = v
    return out


def _identifier(src: dict[str, Any], selector_key: str) -> dict[str, Any]:
    out = {"name": src.get("metricName", "")}
    _put(out, "selector", src.get(selector_key))
    return out


def _metric_spec_to_v2(m: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": m.get("type", "")}
    if isinstance(m.get("object"), dict):
        src = m["object"]
        target = {"type": "Value" if src.get("averageValue") is None else "AverageValue",
                  "value": src.get("targetValue", "0")}
        _put(target, "averageValue", src.get("averageValue"))
        out["object"] = {"describedObject": _ref(src.get("target")), "metric": _identifier(src, "selector"),
                         "target": target}
    if isinstance(m.get("pods"), dict):
        src = m["pods"]
        out["pods"] = {"metric": _identifier(src, "selector"),
                       "target": {"type": "AverageValue", "averageValue": src.get("targetAverageValue", "0")}}
    for key in ("resource", "containerResource"):
        if isinstance(m.get(key), dict):
            src = m[key]
            target = {"type": "AverageValue" if src.get("targetAverageUtilization") is None else "Utilization"}
            _put(target, "averageUtilization", src.get("targetAverageUtilization"))
            _put(target, "averageValue", src.get("targetAverageValue"))
            v: dict[str, Any] = {"name": src.get("name", "")}
            if key == "containerResource":
                v["container"] = src.get("container", "")
            v["target"] = target
            out[key] = v
    if isinstance(m.get("external"), dict):
        src = m["external"]
        target = {"type": "AverageValue" if src.get("targetValue") is None else "Value"}
        _put(target, "value", src.get("targetValue"))
        _put(target, "averageValue", src.get("targetAverageValue"))
        out["external"] = {"metric": _identifier(src, "metricSelector"), "target": target}
    return out


def _metric_status_to_v1(m: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": m.get("type", "")}
    if isinstance(m.get("object"), dict):
        src, current = m["object"], _dict(m["object"], "current")
        ident = _dict(src, "metric")
        v: dict[str, Any] = {"target": _ref(src.get("describedObject")), "metricName": ident.get("name", ""),
                             "currentValue": current.get("value", "0")}
        _put(v, "selector", ident.get("selector"))
        _put(v, "averageValue", current.get("averageValue"))
        out["object"] = v
    if isinstance(m.get("pods"), dict):
        ident, current = _dict(m["pods"], "metric"), _dict(m["pods"], "current")
        v = {"metricName": ident.get("name", ""), "currentAverageValue": current.get("averageValue", "0")}
        _put(v, "selector", ident.get("selector"))
        out["pods"] = v
    for key in ("resource", "containerResource"):
        if isinstance(m.get(key), dict):
            src, current = m[key], _dict(m[key], "current")
            v = {"name": src.get("name", "")}
            _put(v, "currentAverageUtilization", current.get("averageUtilization"))
            v["currentAverageValue"] = current.get("averageValue", "0")
            if key == "containerResource":
                v["container"] = src.get("container", "")
            out[key] = v
    if isinstance(m.get("external"), dict):
        ident, current = _dict(m["external"], "metric"), _dict(m["external"], "current")
        v = {"metricName": ident.get("name", "")}
        _put(v, "metricSelector", ident.get("selector"))
        v["currentValue"] = current.get("value", "0")
        _put(v, "currentAverageValue", current.get("averageValue"))
        out["external"] = v
    return out


def _metric_status_to_v2(m: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": m.get("type", "")}
    if isinstance(m.get("object"), dict):
        src = m["object"]
        current = {"value": src.get("currentValue", "0")}
        _put(current, "averageValue", src.get("averageValue"))
        out["object"] = {"metric": _identifier(src, "selector"), "current": current,
                         "describedObject": _ref(src.get("target"))}
    if isinstance(m.get("pods"), dict):
        src = m["pods"]
        out["pods"] = {"metric": _identifier(src, "selector"),
                       "current": {"averageValue": src.get("currentAverageValue", "0")}}
    for key in ("resource", "containerResource"):
        if isinstance(m.get(key), dict):
            src = m[key]
            current = {"averageValue": src.get("currentAverageValue", "0")}
            _put(current, "averageUtilization", src.get("currentAverageUtilization"))
            v: dict[str, Any] = {"name": src.get("name", "")}
            if key == "containerResource":
                v["container"] = src.get("container", "")
            v["current"] = current
            out[key] = v
    if isinstance(m.get("external"), dict):
        src = m["external"]
        current = {"value": src.get("currentValue", "0")}
        _put(current, "averageValue", src.get("currentAverageValue"))
        out["external"] = {"metric": _identifier(src, "metricSelector"), "current": current}
    return out


# --- behavior: the internal Go type's JSON --------------------------------------------------------

def _rules_to_go(rules: Any) -> Any:
    if not isinstance(rules, dict):
        return None
    policies = rules.get("policies")
    return {"StabilizationWindowSeconds": rules.get("stabilizationWindowSeconds"),
            "SelectPolicy": rules.get("selectPolicy"),
            "Policies": None if not isinstance(policies, list) else [
                {"Type": p.get("type", ""), "Value": p.get("value", 0), "PeriodSeconds": p.get("periodSeconds", 0)}
                for p in policies if isinstance(p, dict)]}


def behavior_to_annotation(behavior: dict[str, Any]) -> str:
    return _dumps({"ScaleUp": _rules_to_go(behavior.get("scaleUp")),
                   "ScaleDown": _rules_to_go(behavior.get("scaleDown"))})


def _get_ci(obj: Any, name: str) -> Any:
    """A key as encoding/json matches it: exactly, else ignoring case."""
    if not isinstance(obj, dict):
        return None
    if name in obj:
        return obj[name]
    return next((v for k, v in obj.items() if isinstance(k, str) and k.lower() == name.lower()), None)


def _rules_from_go(rules: Any) -> dict[str, Any] | None:
    if not isinstance(rules, dict):
        return None
    out: dict[str, Any] = {}
    _put(out, "stabilizationWindowSeconds", _get_ci(rules, "StabilizationWindowSeconds"))
    _put(out, "selectPolicy", _get_ci(rules, "SelectPolicy"))
    policies = _get_ci(rules, "Policies")
    if isinstance(policies, list):
        out["policies"] = [{"type": _get_ci(p, "Type") or "", "value": _get_ci(p, "Value") or 0,
                            "periodSeconds": _get_ci(p, "PeriodSeconds") or 0}
                           for p in policies if isinstance(p, dict)]
    return out


def behavior_from_annotation(text: str) -> dict[str, Any] | None:
    """The v2 behavior an annotation holds; None when it does not decode or is the zero behavior."""
    try:
        raw = json.loads(text)
    except ValueError:
        return None
    out: dict[str, Any] = {}
    for go_name, name in (("ScaleUp", "scaleUp"), ("ScaleDown", "scaleDown")):
        rules = _rules_from_go(_get_ci(raw, go_name))
        if rules is not None:
            out[name] = rules
    return out or None


def _annotation_list(annotations: dict[str, Any], key: str) -> list[Any] | None:
    text = annotations.get(key)
    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None  # kube-apiserver answers an error here; a broken annotation is dropped instead
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else None


def _drop_round_trip(meta: dict[str, Any]) -> None:
    annotations = meta.get("annotations")
    if not isinstance(annotations, dict) or not any(k in annotations for k in ROUND_TRIP_ANNOTATIONS):
        return
    kept = {k: v for k, v in annotations.items() if k not in ROUND_TRIP_ANNOTATIONS}
    if kept:
        meta["annotations"] = kept
    else:
        meta.pop("annotations")


# --- whole objects --------------------------------------------------------------------------------

def v2_to_v1(obj: dict[str, Any]) -> dict[str, Any]:
    """A stored autoscaling/v2 HorizontalPodAutoscaler as autoscaling/v1 shows it."""
    out = {k: v for k, v in obj.items() if k not in ("spec", "status")}
    out["apiVersion"] = V1
    meta = out["metadata"] = dict(obj.get("metadata") or {})
    _drop_round_trip(meta)
    in_spec, in_status = _dict(obj, "spec"), _dict(obj, "status")
    metrics = [m for m in _list(in_spec, "metrics") if isinstance(m, dict)]

    spec: dict[str, Any] = {"scaleTargetRef": _ref(in_spec.get("scaleTargetRef"))}
    _put(spec, "minReplicas", in_spec.get("minReplicas"))
    spec["maxReplicas"] = in_spec.get("maxReplicas", 0)
    for m in metrics:  # the first CPU resource metric decides, as in kube-apiserver
        if m.get("type") == "Resource" and _dict(m, "resource").get("name") == "cpu":
            _put(spec, "targetCPUUtilizationPercentage", _dict(m["resource"], "target").get("averageUtilization"))
            break
    out["spec"] = spec

    status: dict[str, Any] = {}
    _put(status, "observedGeneration", in_status.get("observedGeneration"))
    _put(status, "lastScaleTime", in_status.get("lastScaleTime"))
    status["currentReplicas"] = in_status.get("currentReplicas", 0)
    status["desiredReplicas"] = in_status.get("desiredReplicas", 0)
    current = [m for m in _list(in_status, "currentMetrics") if isinstance(m, dict)]
    for m in current:  # no break upstream: the last CPU utilization wins
        if m.get("type") == "Resource" and _dict(m, "resource").get("name") == "cpu":
            _put(status, "currentCPUUtilizationPercentage", _dict(m["resource"], "current").get("averageUtilization"))
    out["status"] = status

    extra: dict[str, str] = {}
    others = [_metric_spec_to_v1(m) for m in metrics if not _is_cpu_utilization(m)]
    if others:
        extra[METRICS_ANNOTATION] = _dumps(others)
    if current:
        extra[CURRENT_METRICS_ANNOTATION] = _dumps([_metric_status_to_v1(m) for m in current])
    if isinstance(in_spec.get("behavior"), dict):
        extra[BEHAVIOR_ANNOTATION] = behavior_to_annotation(in_spec["behavior"])
    conditions = _list(in_status, "conditions")
    if conditions:
        extra[CONDITIONS_ANNOTATION] = _dumps(conditions)
    if extra:
        meta["annotations"] = dict(meta.get("annotations") or {}, **extra)
    return out


def v1_to_v2(obj: dict[str, Any], partial: bool = False) -> dict[str, Any]:
    """An autoscaling/v1 HorizontalPodAutoscaler as the autoscaling/v2 object it stands for, v1 defaults applied
    (minReplicas 1, and the implicit CPU 80% metric); `partial` converts only what an apply configuration names."""
    out = {k: v for k, v in obj.items() if k not in ("spec", "status")}
    out["apiVersion"] = V2
    meta = out["metadata"] = dict(obj.get("metadata") or {}) if isinstance(obj.get("metadata"), dict) else {}
    annotations = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
    in_spec, in_status = _dict(obj, "spec"), _dict(obj, "status")

    spec: dict[str, Any] = {}
    if not partial or "scaleTargetRef" in in_spec:
        spec["scaleTargetRef"] = _ref(in_spec.get("scaleTargetRef"))
    _put(spec, "minReplicas", in_spec.get("minReplicas", None if partial else 1))
    if not partial or "maxReplicas" in in_spec:
        spec["maxReplicas"] = in_spec.get("maxReplicas", 0)
    metrics: list[dict[str, Any]] = []
    if in_spec.get("targetCPUUtilizationPercentage") is not None:
        metrics.append(_cpu_metric(in_spec["targetCPUUtilizationPercentage"]))
    others = _annotation_list(annotations, METRICS_ANNOTATION)
    if others is not None:
        metrics = [_metric_spec_to_v2(m) for m in others] + metrics  # the CPU target goes last
    if isinstance(annotations.get(BEHAVIOR_ANNOTATION), str):
        _put(spec, "behavior", behavior_from_annotation(annotations[BEHAVIOR_ANNOTATION]))
    if not metrics and not partial:
        metrics.append(_cpu_metric(DEFAULT_CPU_UTILIZATION))
    if metrics:
        spec["metrics"] = metrics

    status: dict[str, Any] = {}
    _put(status, "observedGeneration", in_status.get("observedGeneration"))
    _put(status, "lastScaleTime", in_status.get("lastScaleTime"))
    for key in ("currentReplicas", "desiredReplicas"):
        _put(status, key, in_status.get(key, None if partial else 0))
    if in_status.get("currentCPUUtilizationPercentage") is not None:
        status["currentMetrics"] = [{"type": "Resource", "resource": {
            "name": "cpu", "current": {"averageUtilization": in_status["currentCPUUtilizationPercentage"]}}}]
    current = _annotation_list(annotations, CURRENT_METRICS_ANNOTATION)
    if current is not None:  # "the ones here have more information"
        status["currentMetrics"] = [_metric_status_to_v2(m) for m in current]
    conditions = _annotation_list(annotations, CONDITIONS_ANNOTATION)
    if conditions is not None:
        status["conditions"] = conditions

    if spec or not partial:
        out["spec"] = spec
    if status or (not partial and "status" in obj):
        out["status"] = status
    _drop_round_trip(meta)
    if not meta and partial and "metadata" not in obj:
        out.pop("metadata")
    return out


def default_v2(obj: dict[str, Any]) -> None:
    """autoscaling/v2 defaults, in place: minReplicas 1, the CPU 80% metric when none is given, and the
    behavior's unset rules when a behavior is given."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("minReplicas", 1)
    if not spec.get("metrics"):
        spec["metrics"] = [_cpu_metric(DEFAULT_CPU_UTILIZATION)]
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        for key, defaults in (("scaleUp", _SCALE_UP), ("scaleDown", _SCALE_DOWN)):
            rules = behavior.get(key)
            if not isinstance(rules, dict):
                rules = behavior[key] = {}
            for field, value in defaults.items():
                if rules.get(field) is None:
                    rules[field] = copy.deepcopy(value)
