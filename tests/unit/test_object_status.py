"""The simulated status of HPAs, Ingresses, PVCs and LoadBalancer Services (`velashard apiserver --simulate-workloads`)."""

from __future__ import annotations

from velashard.apiserver.simulation.objectstatus import object_status

NOW = "2026-01-01T00:00:00Z"


def test_pvc_binds_with_the_requested_size_once():
    pvc = {"metadata": {"name": "d"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                              "resources": {"requests": {"storage": "2Gi"}}}}
    status = object_status("PersistentVolumeClaim", pvc, NOW)
    assert status == {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "2Gi"}}
    assert object_status("PersistentVolumeClaim", {**pvc, "status": status}, NOW) is None


def test_hpa_keeps_its_target_within_bounds_and_says_it_can_scale():
    from velashard.apiserver.simulation.workloads import hpa_status

    hpa = {"metadata": {"name": "h", "generation": 2}, "spec": {"minReplicas": 3, "maxReplicas": 5}}
    status = hpa_status(hpa, current=1, now=NOW)
    assert status["currentReplicas"] == 1 and status["desiredReplicas"] == 3 and status["observedGeneration"] == 2
    assert status["lastScaleTime"] == NOW
    assert {c["type"]: c["status"] for c in status["conditions"]} == {"AbleToScale": "True", "ScalingActive": "True"}
    assert hpa_status(hpa, current=9, now=NOW)["desiredReplicas"] == 5
    assert "lastScaleTime" not in hpa_status(hpa, current=4, now=NOW)
    assert object_status("HorizontalPodAutoscaler", hpa, NOW) is None  # simulated with its target, not here


def test_ingress_and_load_balancer_get_an_address_cluster_ip_services_do_not():
    assert object_status("Ingress", {"metadata": {}, "spec": {}}, NOW)["loadBalancer"]["ingress"][0]["ip"]
    assert object_status("Service", {"metadata": {}, "spec": {"type": "LoadBalancer"}}, NOW)
    assert object_status("Service", {"metadata": {}, "spec": {"type": "ClusterIP"}}, NOW) is None
