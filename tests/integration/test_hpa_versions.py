"""HorizontalPodAutoscaler served at autoscaling/v1 and autoscaling/v2 (the preferred and storage version): one
stored object seen through either version, with kube-apiserver's conversion, through the official client."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import urllib.request
from pathlib import Path

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from tests.integration.helpers import eventually

METRICS = "autoscaling.alpha.kubernetes.io/metrics"
CONDITIONS = "autoscaling.alpha.kubernetes.io/conditions"


def _v1(name: str, cpu: int | None = 60, labels: dict[str, str] | None = None) -> client.V1HorizontalPodAutoscaler:
    return client.V1HorizontalPodAutoscaler(
        metadata=client.V1ObjectMeta(name=name, labels=labels), spec=client.V1HorizontalPodAutoscalerSpec(
            max_replicas=5, target_cpu_utilization_percentage=cpu,
            scale_target_ref=client.V1CrossVersionObjectReference(api_version="apps/v1", kind="Deployment",
                                                                  name=name)))


def test_discovery_lists_both_versions_with_v2_preferred(api_client):
    group = next(g for g in client.ApisApi(api_client).get_api_versions().groups if g.name == "autoscaling")
    assert [v.version for v in group.versions] == ["v2", "v1"]
    assert group.preferred_version.version == "v2"
    v1 = client.AutoscalingV1Api(api_client).get_api_resources()
    hpa = next(r for r in v1.resources if r.name == "horizontalpodautoscalers")
    assert hpa.kind == "HorizontalPodAutoscaler" and hpa.short_names == ["hpa"] and hpa.namespaced
    assert "horizontalpodautoscalers/status" in {r.name for r in v1.resources}


def test_one_object_through_both_versions(api_client, namespace):
    v1, v2 = client.AutoscalingV1Api(api_client), client.AutoscalingV2Api(api_client)
    created = v1.create_namespaced_horizontal_pod_autoscaler(namespace, _v1("web"))
    assert created.spec.min_replicas == 1 and created.spec.target_cpu_utilization_percentage == 60
    seen = v2.read_namespaced_horizontal_pod_autoscaler("web", namespace)
    assert seen.metadata.resource_version == created.metadata.resource_version
    assert seen.metadata.uid == created.metadata.uid
    [metric] = seen.spec.metrics
    assert (metric.type, metric.resource.name, metric.resource.target.type,
            metric.resource.target.average_utilization) == ("Resource", "cpu", "Utilization", 60)

    # v2 adds a metric v1 cannot express: v1 keeps it in an annotation, and a v1 update gives it back
    seen.spec.metrics.append(client.V2MetricSpec(type="Pods", pods=client.V2PodsMetricSource(
        metric=client.V2MetricIdentifier(name="qps"),
        target=client.V2MetricTarget(type="AverageValue", average_value="10"))))
    v2.replace_namespaced_horizontal_pod_autoscaler("web", namespace, seen)
    old = v1.read_namespaced_horizontal_pod_autoscaler("web", namespace)
    assert json.loads(old.metadata.annotations[METRICS]) == [
        {"type": "Pods", "pods": {"metricName": "qps", "targetAverageValue": "10"}}]
    old.spec.max_replicas = 8
    old.spec.target_cpu_utilization_percentage = 75
    updated = v1.replace_namespaced_horizontal_pod_autoscaler("web", namespace, old)
    assert updated.spec.max_replicas == 8
    now = v2.read_namespaced_horizontal_pod_autoscaler("web", namespace)
    assert [m.type for m in now.spec.metrics] == ["Pods", "Resource"]
    assert now.spec.metrics[1].resource.target.average_utilization == 75
    assert not (now.metadata.annotations or {}).get(METRICS)  # round-trip annotations are never stored

    # patches apply to the object as the version asked for shows it
    v1.patch_namespaced_horizontal_pod_autoscaler("web", namespace, {"spec": {"targetCPUUtilizationPercentage": 40}})
    assert v2.read_namespaced_horizontal_pod_autoscaler("web", namespace).spec.metrics[1].resource.target \
        .average_utilization == 40
    v1.delete_namespaced_horizontal_pod_autoscaler("web", namespace)
    with pytest.raises(ApiException) as err:
        v2.read_namespaced_horizontal_pod_autoscaler("web", namespace)
    assert err.value.status == 404


def test_no_cpu_target_reads_back_as_the_80_percent_default(api_client, namespace):
    v1, v2 = client.AutoscalingV1Api(api_client), client.AutoscalingV2Api(api_client)
    created = v1.create_namespaced_horizontal_pod_autoscaler(namespace, _v1("idle", cpu=None))
    assert created.spec.target_cpu_utilization_percentage == 80
    assert v2.read_namespaced_horizontal_pod_autoscaler("idle", namespace).spec.metrics[0].resource.target \
        .average_utilization == 80


def test_list_selectors_and_status_through_v1(api_client, namespace):
    v1, v2 = client.AutoscalingV1Api(api_client), client.AutoscalingV2Api(api_client)
    v1.create_namespaced_horizontal_pod_autoscaler(namespace, _v1("a", labels={"tier": "web"}))
    v2.create_namespaced_horizontal_pod_autoscaler(namespace, client.V2HorizontalPodAutoscaler(
        metadata=client.V1ObjectMeta(name="b", labels={"tier": "db"}), spec=client.V2HorizontalPodAutoscalerSpec(
            max_replicas=3, scale_target_ref=client.V2CrossVersionObjectReference(kind="StatefulSet", name="b"))))
    listed = v1.list_namespaced_horizontal_pod_autoscaler(namespace, label_selector="tier=db")
    assert [h.metadata.name for h in listed.items] == ["b"]
    assert listed.items[0].spec.target_cpu_utilization_percentage == 80
    everywhere = v1.list_horizontal_pod_autoscaler_for_all_namespaces(label_selector="tier in (web,db)")
    assert {h.metadata.name for h in everywhere.items if h.metadata.namespace == namespace} == {"a", "b"}

    # the status subresource through v1: the CPU percentage becomes a current metric, conditions survive
    hpa = v1.read_namespaced_horizontal_pod_autoscaler_status("a", namespace)
    hpa.status = client.V1HorizontalPodAutoscalerStatus(current_replicas=2, desired_replicas=3,
                                                        current_cpu_utilization_percentage=91)
    hpa.spec.max_replicas = 99  # ignored by a status write
    v1.replace_namespaced_horizontal_pod_autoscaler_status("a", namespace, hpa)
    stored = v2.read_namespaced_horizontal_pod_autoscaler("a", namespace)
    assert stored.spec.max_replicas == 5
    assert stored.status.desired_replicas == 3
    assert stored.status.current_metrics[0].resource.current.average_utilization == 91
    stored.status.conditions = [client.V2HorizontalPodAutoscalerCondition(type="ScalingActive", status="True",
                                                                           reason="ValidMetricFound")]
    v2.replace_namespaced_horizontal_pod_autoscaler_status("a", namespace, stored)
    as_v1 = v1.read_namespaced_horizontal_pod_autoscaler("a", namespace)
    assert as_v1.status.current_cpu_utilization_percentage == 91
    assert json.loads(as_v1.metadata.annotations[CONDITIONS])[0]["reason"] == "ValidMetricFound"
    v1.replace_namespaced_horizontal_pod_autoscaler_status("a", namespace, as_v1)  # a v1 status round trip
    assert v2.read_namespaced_horizontal_pod_autoscaler("a", namespace).status.conditions[0].reason == \
        "ValidMetricFound"


def test_server_side_apply_through_v1(api_client, namespace):
    v1 = client.AutoscalingV1Api(api_client)
    body = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "ssa"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "ssa"},
                     "maxReplicas": 4, "targetCPUUtilizationPercentage": 55}}
    applied = v1.patch_namespaced_horizontal_pod_autoscaler("ssa", namespace, body, field_manager="vela",
                                                            _content_type="application/apply-patch+yaml")
    assert applied.api_version == "autoscaling/v1" and applied.spec.target_cpu_utilization_percentage == 55
    body["spec"]["maxReplicas"] = 6
    again = v1.patch_namespaced_horizontal_pod_autoscaler("ssa", namespace, body, field_manager="vela",
                                                          _content_type="application/apply-patch+yaml")
    assert again.spec.max_replicas == 6 and again.metadata.generation == 2
    with pytest.raises(ApiException) as err:  # another manager's change of the same field conflicts
        v1.patch_namespaced_horizontal_pod_autoscaler(
            "ssa", namespace, dict(body, spec=dict(body["spec"], maxReplicas=9)), field_manager="other",
            _content_type="application/apply-patch+yaml")
    assert err.value.status == 409


def test_watch_events_come_in_the_version_asked_for(api_client, namespace):
    v1, v2 = client.AutoscalingV1Api(api_client), client.AutoscalingV2Api(api_client)
    rv = v2.list_namespaced_horizontal_pod_autoscaler(namespace).metadata.resource_version
    events: dict[str, list] = {"v1": [], "v2": []}

    def follow(version: str, api) -> None:
        stream = watch.Watch()
        for event in stream.stream(api.list_namespaced_horizontal_pod_autoscaler, namespace, resource_version=rv,
                                   timeout_seconds=5):
            events[version].append((event["type"], event["raw_object"]))
            if len(events[version]) == 2:
                stream.stop()

    threads = [threading.Thread(target=follow, args=("v1", v1)), threading.Thread(target=follow, args=("v2", v2))]
    for t in threads:
        t.start()
    v2.create_namespaced_horizontal_pod_autoscaler(namespace, client.V2HorizontalPodAutoscaler(
        metadata=client.V1ObjectMeta(name="w"), spec=client.V2HorizontalPodAutoscalerSpec(
            max_replicas=3, scale_target_ref=client.V2CrossVersionObjectReference(kind="Deployment", name="w"))))
    v1.patch_namespaced_horizontal_pod_autoscaler("w", namespace, {"spec": {"targetCPUUtilizationPercentage": 30}})
    for t in threads:
        t.join(10)
    assert [t for t, _ in events["v1"]] == ["ADDED", "MODIFIED"] == [t for t, _ in events["v2"]]
    for (_, one), (_, two) in zip(events["v1"], events["v2"]):
        assert one["apiVersion"] == "autoscaling/v1" and two["apiVersion"] == "autoscaling/v2"
        assert one["metadata"]["resourceVersion"] == two["metadata"]["resourceVersion"]
    assert events["v1"][1][1]["spec"]["targetCPUUtilizationPercentage"] == 30
    assert events["v2"][1][1]["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 30


def test_the_workload_simulator_sets_status_seen_through_v1(api_client, namespace):
    apps = client.AppsV1Api(api_client)
    apps.create_namespaced_deployment(namespace, client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web"), spec=client.V1DeploymentSpec(
            replicas=1, selector=client.V1LabelSelector(match_labels={"app": "web"}),
            template=client.V1PodTemplateSpec(metadata=client.V1ObjectMeta(labels={"app": "web"}),
                                              spec=client.V1PodSpec(containers=[client.V1Container(
                                                  name="web", image="nginx")])))))
    hpa = _v1("web")
    hpa.spec.min_replicas = 2
    client.AutoscalingV1Api(api_client).create_namespaced_horizontal_pod_autoscaler(namespace, hpa)
    eventually(lambda: apps.read_namespaced_deployment_scale("web", namespace).spec.replicas == 2)
    status = eventually(lambda: client.AutoscalingV1Api(api_client).read_namespaced_horizontal_pod_autoscaler(
        "web", namespace).status.desired_replicas == 2)
    assert status


def test_table_output_for_both_versions(apiserver, api_client, namespace):
    client.AutoscalingV1Api(api_client).create_namespaced_horizontal_pod_autoscaler(namespace, _v1("t"))
    for version in ("v1", "v2"):
        request = urllib.request.Request(
            f"{apiserver.url}/apis/autoscaling/{version}/namespaces/{namespace}/horizontalpodautoscalers",
            headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io",
                     "Authorization": f"Bearer {apiserver.admin_token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            table = json.loads(response.read())
        names = [c["name"] for c in table["columnDefinitions"]]
        assert names == ["Name", "Reference", "Targets", "MinPods", "MaxPods", "Replicas", "Age"]
        assert table["rows"][0]["cells"][:5] == ["t", "Deployment/t", "cpu: <unknown>/60%", "1", 5]


def test_v1_answers_json_to_a_protobuf_client(apiserver, api_client, namespace):
    """autoscaling/v1 HorizontalPodAutoscaler is not in the generated protobuf tables: JSON instead (clients
    that prefer protobuf list JSON as their fallback); v2 is encoded."""
    client.AutoscalingV1Api(api_client).create_namespaced_horizontal_pod_autoscaler(namespace, _v1("p"))
    types = {}
    for version in ("v1", "v2"):
        request = urllib.request.Request(
            f"{apiserver.url}/apis/autoscaling/{version}/namespaces/{namespace}/horizontalpodautoscalers/p",
            headers={"Accept": "application/vnd.kubernetes.protobuf, application/json",
                     "Authorization": f"Bearer {apiserver.admin_token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            types[version] = response.headers["Content-Type"]
    assert types == {"v1": "application/json", "v2": "application/vnd.kubernetes.protobuf"}


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_applies_and_gets_a_v1_hpa(apiserver, namespace, tmp_path: Path):
    def kubectl(*args: str) -> str:
        proc = subprocess.run(["kubectl", "--kubeconfig", apiserver.kubeconfig, "--cache-dir", str(tmp_path / "c"),
                               "-n", namespace, *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    manifest = tmp_path / "hpa.yaml"
    manifest.write_text("apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata: {name: k}\n"
                        "spec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: k}\n"
                        "  minReplicas: 1\n  maxReplicas: 3\n  targetCPUUtilizationPercentage: 50\n")
    assert "created" in kubectl("apply", "-f", str(manifest))
    assert "unchanged" in kubectl("apply", "-f", str(manifest))
    manifest.write_text(manifest.read_text().replace("maxReplicas: 3", "maxReplicas: 4"))
    assert "configured" in kubectl("apply", "-f", str(manifest))
    assert "cpu: <unknown>/50%" in kubectl("get", "hpa", "k")
    assert kubectl("get", "all").count("horizontalpodautoscaler.autoscaling/k") == 1
    as_v1 = json.loads(kubectl("get", "horizontalpodautoscalers.v1.autoscaling", "k", "-o", "json"))
    assert as_v1["apiVersion"] == "autoscaling/v1" and as_v1["spec"]["maxReplicas"] == 4
    as_v2 = json.loads(kubectl("get", "hpa", "k", "-o", "json"))
    assert as_v2["apiVersion"] == "autoscaling/v2"
    assert as_v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 50
    kubectl("delete", "-f", str(manifest))
