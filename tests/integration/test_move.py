"""Moving an app between shards: dependents first, and rolled back when the app itself cannot move."""

from __future__ import annotations

import pytest

from velashard.apis import labels
from velashard.apis.oam import API_VERSION, APPLICATION_REVISIONS, APPLICATIONS, RESOURCE_TRACKERS
from velashard.core.install import install
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.sharding.move import set_shard


def test_a_failed_app_patch_rolls_dependents_back(make_apiserver):
    server = make_apiserver()
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test")
    install(kube)
    owner = {labels.APP_NAME: "a", labels.APP_NAMESPACE: "default", labels.SCHEDULED_SHARD_ID: "s1"}
    app = kube.create(APPLICATIONS, {"apiVersion": API_VERSION, "kind": "Application", "metadata": {
        "name": "a", "namespace": "default", "labels": {labels.SCHEDULED_SHARD_ID: "s1"}},
        "spec": {"components": []}})
    kube.create(APPLICATION_REVISIONS, {"apiVersion": API_VERSION, "kind": "ApplicationRevision", "metadata": {
        "name": "a-v1", "namespace": "default", "labels": owner}, "spec": {}})
    kube.create(RESOURCE_TRACKERS, {"apiVersion": API_VERSION, "kind": "ResourceTracker", "metadata": {
        "name": "a-default", "labels": owner}, "spec": {}})
    kube.patch(APPLICATIONS, "a", {"metadata": {"annotations": {"touched": "yes"}}}, "default")  # app is now stale
    with pytest.raises(errors.Conflict):
        set_shard(kube, app, "s2", "test")
    assert kube.get(APPLICATIONS, "a", "default")["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] == "s1"
    assert kube.get(APPLICATION_REVISIONS, "a-v1", "default")["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] == "s1"
    assert kube.get(RESOURCE_TRACKERS, "a-default")["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] == "s1"
    moved = set_shard(kube, kube.get(APPLICATIONS, "a", "default"), "s2", "test")
    assert moved["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] == "s2"
    assert kube.get(RESOURCE_TRACKERS, "a-default")["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] == "s2"


def test_managed_resources_move_with_the_app_and_back_on_failure(make_apiserver):
    from velashard.kube.resources import CONFIGMAPS
    server = make_apiserver()
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test")
    install(kube)
    owner = {labels.APP_NAME: "a", labels.APP_NAMESPACE: "default", labels.SCHEDULED_SHARD_ID: "s1"}
    app = kube.create(APPLICATIONS, {"apiVersion": API_VERSION, "kind": "Application", "metadata": {
        "name": "a", "namespace": "default", "labels": {labels.SCHEDULED_SHARD_ID: "s1"}},
        "spec": {"components": []}})
    kube.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "mine", "namespace": "default", "labels": owner}})
    theirs = {labels.APP_NAME: "b", labels.APP_NAMESPACE: "default", labels.SCHEDULED_SHARD_ID: "s3"}
    kube.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "theirs", "namespace": "default", "labels": theirs}})
    refs = [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "default", "name": n}
            for n in ("mine", "theirs", "gone")]
    kube.create(RESOURCE_TRACKERS, {"apiVersion": API_VERSION, "kind": "ResourceTracker", "metadata": {
        "name": "a-default", "labels": owner}, "spec": {"managedResources": refs}})

    def shard_of(name: str) -> str | None:
        return kube.get(CONFIGMAPS, name, "default")["metadata"]["labels"].get(labels.SCHEDULED_SHARD_ID)

    kube.patch(APPLICATIONS, "a", {"metadata": {"annotations": {"touched": "yes"}}}, "default")  # app is now stale
    with pytest.raises(errors.Conflict):
        set_shard(kube, app, "s2", "test")
    assert shard_of("mine") == "s1" and shard_of("theirs") == "s3"
    set_shard(kube, kube.get(APPLICATIONS, "a", "default"), "s2", "test")
    assert shard_of("mine") == "s2"
    assert shard_of("theirs") == "s3"  # recorded by the app but owned by another: left alone
