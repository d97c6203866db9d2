"""The simulated status of HPAs, Ingresses, PVCs and LoadBalancer Services (devcluster --simulate-workloads)."""

from __future__ import annotations

from velashard.devcluster.objectstatus import object_status

NOW = "2026-01-01T00:00:00Z"


def test_pvc_binds_with_the_requested_size_once():
    pvc = {"metadata": {"name": "d"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                              "resources": {"requests": {"storage": "2Gi"}}}}
    status = object_status("PersistentVolumeClaim", pvc, NOW)
    assert status == {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "2Gi"}}
    assert object_status("PersistentVolumeClaim", {**pvc, "status": status}, NOW) is None


def test_hpa_reports_min_replicas_per_generation():
    hpa = {"metadata": {"name": "h", "generation": 2}, "spec": {"minReplicas": 3, "maxReplicas": 5}}
    status = object_status("HorizontalPodAutoscaler", hpa, NOW)
    assert status["currentReplicas"] == status["desiredReplicas"] == 3 and status["observedGeneration"] == 2
    assert object_status("HorizontalPodAutoscaler", {**hpa, "status": status}, NOW) is None


def test_ingress_and_load_balancer_get_an_address_cluster_ip_services_do_not():
    assert object_status("Ingress", {"metadata": {}, "spec": {}}, NOW)["loadBalancer"]["ingress"][0]["ip"]
    assert object_status("Service", {"metadata": {}, "spec": {"type": "LoadBalancer"}}, NOW)
    assert object_status("Service", {"metadata": {}, "spec": {"type": "ClusterIP"}}, NOW) is None
