"""The managed-resource cache keeps what apply, drift and health read."""

from velashard.core.health import resource_health
from velashard.kube.transforms import for_managed_resources


def deployment() -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "n", "generation": 2, "resourceVersion": "7",
                         "finalizers": ["x/y"], "labels": {"a": "b"},
                         "annotations": {"app.oam.dev/last-applied-configuration": "{}",
                                         "kubectl.kubernetes.io/last-applied-configuration": "{}"},
                         "managedFields": [{"manager": "m"}]},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
            "status": {"observedGeneration": 2, "replicas": 2, "availableReplicas": 2, "updatedReplicas": 2,
                       "conditions": [{"type": "Available", "status": "True", "reason": "R", "message": "m",
                                       "lastUpdateTime": "t", "lastTransitionTime": "t"}],
                       "nested": {"big": "x" * 100}}}


def test_keeps_what_an_update_and_health_read():
    obj = for_managed_resources(deployment())
    meta = obj["metadata"]
    assert meta["finalizers"] == ["x/y"] and meta["labels"] == {"a": "b"} and meta["resourceVersion"] == "7"
    assert meta["annotations"] == {"app.oam.dev/last-applied-configuration": "{}"}
    assert "managedFields" not in meta
    assert obj["spec"] == deployment()["spec"]
    assert obj["status"]["conditions"] == [{"type": "Available", "status": "True", "reason": "R", "message": "m"}]
    assert "nested" not in obj["status"]
    assert resource_health(obj) == resource_health(deployment()) == (True, "Ready:2/2")


def test_objects_without_status_pass():
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}
    assert for_managed_resources(dict(obj)) == obj


def test_without_drops_only_the_named_fields():
    from velashard.kube.transforms import without
    rev = {"metadata": {"name": "a-v1", "managedFields": []}, "spec": {"revision": 1, "hash": "h",
                                                                      "application": {"spec": {}}}}
    assert without(("spec", "application"), ("status", "x"))(rev) == {"metadata": {"name": "a-v1"},
                                                                       "spec": {"revision": 1, "hash": "h"}}
