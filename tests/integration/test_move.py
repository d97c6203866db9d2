"""Moving an app between shards: dependents first, and rolled back when the app itself cannot move."""

from __future__ import annotations

import pytest

from velashard.apis import labels
from velashard.apis.oam import (API_VERSION, APPLICATION_REVISIONS, APPLICATIONS, RESOURCE_TRACKERS,
                                WORKFLOW_API_VERSION, WORKFLOW_RUNS)
from velashard.core.install import install
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.resources import EVENTS
from velashard.sharding.move import set_shard
from velashard.sharding.proof import Signer, subject

SIGNER = Signer.generate()


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
        set_shard(kube, app, "s2", "test", SIGNER)
    assert kube.get(APPLICATIONS, "a", "default")["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] == "s1"
    assert kube.get(APPLICATION_REVISIONS, "a-v1", "default")["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] == "s1"
    assert kube.get(RESOURCE_TRACKERS, "a-default")["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] == "s1"
    moved = set_shard(kube, kube.get(APPLICATIONS, "a", "default"), "s2", "test", SIGNER)
    assert moved["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] == "s2"
    assert SIGNER.proves("default", "a", "s2", moved["metadata"]["annotations"][labels.ASSIGNMENT_PROOF])
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
        set_shard(kube, app, "s2", "test", SIGNER)
    assert shard_of("mine") == "s1" and shard_of("theirs") == "s3"
    set_shard(kube, kube.get(APPLICATIONS, "a", "default"), "s2", "test", SIGNER)
    assert shard_of("mine") == "s2"
    assert shard_of("theirs") == "s3"  # recorded by the app but owned by another: left alone


def test_a_failed_shards_dependents_are_listed_once_and_each_app_moves_with_its_own(make_apiserver):
    from velashard.sharding.move import shard_dependents
    server = make_apiserver()
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test")
    install(kube)
    for name in ("a", "b"):
        owner = {labels.APP_NAME: name, labels.APP_NAMESPACE: "default", labels.SCHEDULED_SHARD_ID: "gone"}
        kube.create(APPLICATIONS, {"apiVersion": API_VERSION, "kind": "Application", "metadata": {
            "name": name, "namespace": "default", "labels": {labels.SCHEDULED_SHARD_ID: "gone"}},
            "spec": {"components": []}})
        for rev in ("v1", "v2"):
            kube.create(APPLICATION_REVISIONS, {"apiVersion": API_VERSION, "kind": "ApplicationRevision",
                                                "metadata": {"name": f"{name}-{rev}", "namespace": "default",
                                                             "labels": owner}, "spec": {}})
        kube.create(RESOURCE_TRACKERS, {"apiVersion": API_VERSION, "kind": "ResourceTracker", "metadata": {
            "name": f"{name}-default", "labels": owner}, "spec": {}})
    since = server.audit.since(0)["items"][-1]["seq"]
    found = shard_dependents(kube, "gone")
    assert {k: sorted(o["metadata"]["name"] for _, o in v) for k, v in found.items()} == {
        ("default", "a"): ["a-default", "a-v1", "a-v2"], ("default", "b"): ["b-default", "b-v1", "b-v2"]}
    set_shard(kube, kube.get(APPLICATIONS, "a", "default"), "s2", "failover", SIGNER, found[("default", "a")])
    lists = [r for r in server.audit.since(since)["items"] if r["verb"] == "list"]
    assert len(lists) == 2  # one list of revisions and one of trackers for the whole shard, none per app
    assert {kube.get(APPLICATION_REVISIONS, f"a-{rev}", "default")["metadata"]["labels"][labels.SCHEDULED_SHARD_ID]
            for rev in ("v1", "v2")} == {"s2"}
    assert kube.get(RESOURCE_TRACKERS, "a-default")["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] == "s2"
    assert kube.get(RESOURCE_TRACKERS, "b-default")["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] == "gone"
    assert kube.get(APPLICATIONS, "a", "default")["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] == "s2"


def test_a_workflow_run_moves_alone_with_its_own_proof_and_a_placement_event(make_apiserver):
    server = make_apiserver()
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test")
    install(kube)
    owner = {labels.APP_NAME: "r", labels.APP_NAMESPACE: "default", labels.SCHEDULED_SHARD_ID: "gone"}
    kube.create(RESOURCE_TRACKERS, {"apiVersion": API_VERSION, "kind": "ResourceTracker", "metadata": {
        "name": "r-default", "labels": owner}, "spec": {}})  # an app's of the same name: not the run's to move
    run = kube.create(WORKFLOW_RUNS, {"apiVersion": WORKFLOW_API_VERSION, "kind": "WorkflowRun", "metadata": {
        "name": "r", "namespace": "default", "labels": {labels.SCHEDULED_SHARD_ID: "gone"}},
        "spec": {"workflowSpec": {"steps": [{"name": "wait", "type": "suspend"}]}}})
    moved = set_shard(kube, run, "s2", "orphaned", SIGNER, lost_at="2026-01-02T03:04:05Z", resource=WORKFLOW_RUNS)
    assert moved["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] == "s2"
    proof = moved["metadata"]["annotations"][labels.ASSIGNMENT_PROOF]
    assert SIGNER.proves("default", subject("WorkflowRun", "r"), "s2", proof)
    assert not SIGNER.proves("default", "r", "s2", proof)  # no app's proof
    assert kube.get(RESOURCE_TRACKERS, "r-default")["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] == "gone"
    events, _ = kube.list_all(EVENTS, "default")
    [event] = [e for e in events if e["involvedObject"]["name"] == "r"]
    assert event["involvedObject"]["kind"] == "WorkflowRun"
    assert event["involvedObject"]["apiVersion"] == WORKFLOW_API_VERSION
    assert event["reason"] == "Rescheduled"
    assert event["metadata"]["annotations"] == {
        labels.EVENT_FROM_SHARD: "gone", labels.EVENT_TO_SHARD: "s2", labels.EVENT_MOVE_REASON: "orphaned",
        labels.EVENT_SHARD_LOST_AT: "2026-01-02T03:04:05Z"}
