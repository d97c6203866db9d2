"""Finalizers, deletion, garbage collection of dependents and namespace termination."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.helpers import eventually


def cm(name: str, **meta) -> client.V1ConfigMap:
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, **meta))


def gone(read, *args) -> bool:
    try:
        read(*args)
    except ApiException as err:
        return err.status == 404
    return False


def test_finalizer_keeps_object_until_removed(api_client, namespace):
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(namespace, cm("f", finalizers=["example.com/keep"]))
    core.delete_namespaced_config_map("f", namespace)
    pending = core.read_namespaced_config_map("f", namespace)
    assert pending.metadata.deletion_timestamp is not None
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map("f", namespace, {"metadata": {"finalizers": ["example.com/keep",
                                                                                      "example.com/new"]}})
    assert err.value.status == 422
    core.patch_namespaced_config_map("f", namespace, {"metadata": {"finalizers": None}})
    assert gone(core.read_namespaced_config_map, "f", namespace)


def owned_by(owner) -> list[client.V1OwnerReference]:
    return [client.V1OwnerReference(api_version="v1", kind="ConfigMap", name=owner.metadata.name,
                                    uid=owner.metadata.uid)]


def test_background_garbage_collection(api_client, namespace):
    core = client.CoreV1Api(api_client)
    owner = core.create_namespaced_config_map(namespace, cm("owner"))
    core.create_namespaced_config_map(namespace, cm("child", owner_references=owned_by(owner)))
    other = core.create_namespaced_config_map(namespace, cm("other-owner"))
    core.create_namespaced_config_map(namespace, cm("shared", owner_references=owned_by(owner) + owned_by(other)))
    core.delete_namespaced_config_map("owner", namespace)
    eventually(lambda: gone(core.read_namespaced_config_map, "child", namespace))
    # A dependent with another live owner stays, without the dangling reference.
    shared = eventually(lambda: (lambda o: o if len(o.metadata.owner_references) == 1 else None)(
        core.read_namespaced_config_map("shared", namespace)))
    assert shared.metadata.owner_references[0].uid == other.metadata.uid


def test_orphan_and_foreground_propagation(api_client, namespace):
    core = client.CoreV1Api(api_client)
    owner = core.create_namespaced_config_map(namespace, cm("o1"))
    core.create_namespaced_config_map(namespace, cm("kept", owner_references=owned_by(owner)))
    core.delete_namespaced_config_map("o1", namespace, propagation_policy="Orphan")
    eventually(lambda: gone(core.read_namespaced_config_map, "o1", namespace))
    kept = core.read_namespaced_config_map("kept", namespace)
    assert not kept.metadata.owner_references

    owner = core.create_namespaced_config_map(namespace, cm("o2"))
    core.create_namespaced_config_map(namespace, cm("dep", owner_references=owned_by(owner),
                                                    finalizers=["example.com/slow"]))
    core.delete_namespaced_config_map("o2", namespace, propagation_policy="Foreground")
    # The owner waits in foreground deletion while its dependent exists.
    eventually(lambda: core.read_namespaced_config_map("dep", namespace).metadata.deletion_timestamp)
    assert "foregroundDeletion" in core.read_namespaced_config_map("o2", namespace).metadata.finalizers
    core.patch_namespaced_config_map("dep", namespace, {"metadata": {"finalizers": None}})
    eventually(lambda: gone(core.read_namespaced_config_map, "o2", namespace))


def test_namespace_termination_deletes_content(api_client):
    core = client.CoreV1Api(api_client)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="doomed")))
    ns = core.read_namespace("doomed")
    assert ns.metadata.labels["kubernetes.io/metadata.name"] == "doomed"
    assert ns.status.phase == "Active"
    core.create_namespaced_config_map("doomed", cm("c1"))
    core.create_namespaced_config_map("doomed", cm("c2", finalizers=["example.com/hold"]))
    core.delete_namespace("doomed")
    assert core.read_namespace("doomed").status.phase == "Terminating"
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("doomed", cm("late"))
    assert err.value.status == 403
    eventually(lambda: gone(core.read_namespaced_config_map, "c1", "doomed"))
    assert not gone(core.read_namespace, "doomed")
    core.patch_namespaced_config_map("c2", "doomed", {"metadata": {"finalizers": None}})
    eventually(lambda: gone(core.read_namespace, "doomed"))


def test_delete_returns_status_and_collection_delete(api_client, namespace):
    core = client.CoreV1Api(api_client)
    for i in range(3):
        core.create_namespaced_config_map(namespace, cm(f"dc{i}", labels={"batch": "x" if i < 2 else "y"}))
    core.delete_collection_namespaced_config_map(namespace, label_selector="batch=x")
    assert [c.metadata.name for c in core.list_namespaced_config_map(namespace).items] == ["dc2"]
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_config_map("dc2", namespace, body=client.V1DeleteOptions(
            preconditions=client.V1Preconditions(uid="not-the-uid")))
    assert err.value.status == 409
