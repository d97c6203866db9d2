"""HorizontalPodAutoscaler autoscaling/v1 <-> autoscaling/v2, as kube-apiserver converts it."""

from __future__ import annotations

import json

from velashard.apiserver.storage import hpa_versions as hv

REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


def _v2(**spec):
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": REF, "minReplicas": 1, "maxReplicas": 5, **spec}}


def _cpu(n):
    return {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": n}}}


def test_the_cpu_target_is_the_cpu_utilization_metric_both_ways():
    v1 = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
          "spec": {"scaleTargetRef": REF, "maxReplicas": 5, "targetCPUUtilizationPercentage": 60}}
    v2 = hv.v1_to_v2(v1)
    assert v2["apiVersion"] == "autoscaling/v2"
    assert v2["spec"] == {"scaleTargetRef": REF, "minReplicas": 1, "maxReplicas": 5, "metrics": [_cpu(60)]}
    back = hv.v2_to_v1(v2)
    assert back["spec"] == {"scaleTargetRef": REF, "minReplicas": 1, "maxReplicas": 5,
                            "targetCPUUtilizationPercentage": 60}
    assert "annotations" not in back["metadata"]
    assert back["status"] == {"currentReplicas": 0, "desiredReplicas": 0}  # not omitempty in v1
    assert v1["spec"].get("minReplicas") is None  # inputs are not changed


def test_no_target_and_no_other_metrics_means_cpu_80_percent():
    v2 = hv.v1_to_v2({"metadata": {"name": "web"}, "spec": {"scaleTargetRef": REF, "maxReplicas": 3}})
    assert v2["spec"]["metrics"] == [_cpu(80)]
    assert hv.v2_to_v1(v2)["spec"]["targetCPUUtilizationPercentage"] == 80


def test_metrics_v1_cannot_express_round_trip_through_the_annotation():
    memory = {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue",
                                                                          "averageValue": "500Mi"}}}
    pods = {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue",
                                                                         "averageValue": "10"}}}
    external = {"type": "External", "external": {"metric": {"name": "queue", "selector": {"matchLabels": {"q": "a"}}},
                                                  "target": {"type": "Value", "value": "30"}}}
    obj = {"type": "Object", "object": {"describedObject": {"kind": "Ingress", "name": "main",
                                                            "apiVersion": "networking.k8s.io/v1"},
                                        "metric": {"name": "rps"}, "target": {"type": "Value", "value": "2k"}}}
    v2 = _v2(metrics=[memory, _cpu(50), pods, external, obj])
    v1 = hv.v2_to_v1(v2)
    assert v1["spec"]["targetCPUUtilizationPercentage"] == 50
    stored = json.loads(v1["metadata"]["annotations"][hv.METRICS_ANNOTATION])
    assert stored[0] == {"type": "Resource", "resource": {"name": "memory", "targetAverageValue": "500Mi"}}
    assert stored[1] == {"type": "Pods", "pods": {"metricName": "qps", "targetAverageValue": "10"}}
    assert stored[2] == {"type": "External", "external": {"metricName": "queue",
                                                          "metricSelector": {"matchLabels": {"q": "a"}},
                                                          "targetValue": "30"}}
    assert stored[3]["object"] == {"target": {"kind": "Ingress", "name": "main", "apiVersion": "networking.k8s.io/v1"},
                                   "metricName": "rps", "targetValue": "2k"}
    back = hv.v1_to_v2(v1)
    # the CPU target comes back last, after the annotation's metrics
    assert back["spec"]["metrics"] == [memory, pods, external, obj, _cpu(50)]
    assert "annotations" not in back["metadata"]


def test_status_cpu_and_the_current_metrics_and_conditions_annotations():
    conditions = [{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale",
                   "lastTransitionTime": "2024-01-01T00:00:00Z"}]
    current = [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 42,
                                                                          "averageValue": "120m"}}},
               {"type": "Pods", "pods": {"metric": {"name": "qps"}, "current": {"averageValue": "7"}}}]
    v2 = dict(_v2(metrics=[_cpu(50)]), status={"observedGeneration": 3, "currentReplicas": 2, "desiredReplicas": 2,
                                              "currentMetrics": current, "conditions": conditions})
    v1 = hv.v2_to_v1(v2)
    assert v1["status"] == {"observedGeneration": 3, "currentReplicas": 2, "desiredReplicas": 2,
                            "currentCPUUtilizationPercentage": 42}
    annotations = v1["metadata"]["annotations"]
    assert json.loads(annotations[hv.CONDITIONS_ANNOTATION]) == conditions
    assert json.loads(annotations[hv.CURRENT_METRICS_ANNOTATION])[0] == {
        "type": "Resource", "resource": {"name": "cpu", "currentAverageUtilization": 42, "currentAverageValue": "120m"}}
    assert hv.METRICS_ANNOTATION not in annotations  # the only spec metric is the CPU target
    back = hv.v1_to_v2(v1)
    assert back["status"]["conditions"] == conditions
    assert back["status"]["currentMetrics"] == current
    # without the annotation the CPU percentage alone comes back
    v1["metadata"].pop("annotations")
    assert hv.v1_to_v2(v1)["status"]["currentMetrics"] == [
        {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 42}}}]


def test_behavior_travels_as_the_internal_go_type():
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 60, "selectPolicy": "Min",
                              "policies": [{"type": "Pods", "value": 1, "periodSeconds": 30}]}}
    v1 = hv.v2_to_v1(_v2(metrics=[_cpu(50)], behavior=behavior))
    text = v1["metadata"]["annotations"][hv.BEHAVIOR_ANNOTATION]
    assert json.loads(text) == {"ScaleUp": None, "ScaleDown": {
        "StabilizationWindowSeconds": 60, "SelectPolicy": "Min",
        "Policies": [{"Type": "Pods", "Value": 1, "PeriodSeconds": 30}]}}
    assert hv.v1_to_v2(v1)["spec"]["behavior"] == behavior
    # read back ignoring case, as encoding/json does; the zero behavior is no behavior
    assert hv.behavior_from_annotation('{"scaleup":{"selectpolicy":"Disabled"}}') == {
        "scaleUp": {"selectPolicy": "Disabled"}}
    assert hv.behavior_from_annotation("{}") is None
    assert hv.behavior_from_annotation("not json") is None


def test_stale_round_trip_annotations_are_replaced_not_kept():
    v2 = _v2(metrics=[_cpu(50)])
    v2["metadata"]["annotations"] = {hv.METRICS_ANNOTATION: "[]", "team": "a"}
    assert hv.v2_to_v1(v2)["metadata"]["annotations"] == {"team": "a"}


def test_an_apply_configuration_converts_only_what_it_names():
    config = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
              "spec": {"maxReplicas": 7}}
    assert hv.v1_to_v2(config, partial=True) == {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                                                 "metadata": {"name": "web"}, "spec": {"maxReplicas": 7}}
    config["spec"]["targetCPUUtilizationPercentage"] = 65
    assert hv.v1_to_v2(config, partial=True)["spec"] == {"maxReplicas": 7, "metrics": [_cpu(65)]}


def test_v2_defaults():
    obj = {"spec": {"maxReplicas": 3}}
    hv.default_v2(obj)
    assert obj["spec"] == {"maxReplicas": 3, "minReplicas": 1, "metrics": [_cpu(80)]}
    obj = {"spec": {"minReplicas": 2, "maxReplicas": 3, "metrics": [_cpu(50)],
                    "behavior": {"scaleDown": {"policies": []}}}}
    hv.default_v2(obj)
    assert obj["spec"]["minReplicas"] == 2 and obj["spec"]["metrics"] == [_cpu(50)]
    assert obj["spec"]["behavior"] == {
        "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                    "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                 {"type": "Percent", "value": 100, "periodSeconds": 15}]},
        "scaleDown": {"selectPolicy": "Max", "policies": []}}  # the window is the controller's flag
