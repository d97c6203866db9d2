"""What applying desired state onto a live resource produces, across a move between shards."""

from __future__ import annotations

import copy

from velashard.apis import labels
from velashard.core import ownership
from velashard.core.ownership import merged_for_update, needs_update, with_last_applied


def deployment(shard: str, image: str = "nginx:1.25") -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
        "name": "web", "namespace": "default", "labels": {labels.APP_NAME: "web", labels.SCHEDULED_SHARD_ID: shard}},
        "spec": {"template": {"spec": {"containers": [{"name": "web", "image": image}]}}}}


def live_as_applied(desired: dict) -> dict:
    live = copy.deepcopy(with_last_applied(desired))
    live["metadata"]["resourceVersion"] = "7"
    return live


def test_the_new_owner_of_a_moved_resource_writes_nothing():
    live = live_as_applied(deployment("shard-0"))
    live["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] = "shard-1"  # the master moved it
    assert not needs_update(merged_for_update(deployment("shard-1"), live), live)


def test_a_changed_spec_is_still_applied_after_a_move():
    live = live_as_applied(deployment("shard-0"))
    live["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] = "shard-1"
    merged = merged_for_update(deployment("shard-1", image="nginx:1.27"), live)
    assert needs_update(merged, live)
    assert merged["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert merged["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] == "shard-1"


def test_an_unlabelled_resource_gets_the_shard_label():
    desired = deployment("shard-0")
    del desired["metadata"]["labels"][labels.SCHEDULED_SHARD_ID]
    live = live_as_applied(desired)  # applied before sharding was turned on
    merged = merged_for_update(deployment("shard-0"), live)
    assert needs_update(merged, live) and merged["metadata"]["labels"][labels.SCHEDULED_SHARD_ID] == "shard-0"


def test_a_pair_found_in_sync_is_remembered_per_app_and_any_change_merges_again():
    desired = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"},
               "data": {"a": "1"}}
    live = ownership.with_last_applied(desired)
    live["metadata"].update(uid="u1", resourceVersion="5")
    assert ownership.merged_if_drifted(desired, live, "ns/app") is None
    assert len(ownership.in_sync()) >= 1
    drifted = dict(live, data={"a": "2"})  # changed by hand: put back
    assert ownership.merged_if_drifted(desired, drifted, "ns/app")["data"] == {"a": "1"}
    wanted = dict(desired, data={"a": "3"})  # a new desired state: applied
    assert ownership.merged_if_drifted(wanted, live, "ns/app")["data"] == {"a": "3"}
    # a status write alone changes nothing an update writes
    assert ownership.merged_if_drifted(desired, dict(live, status={"x": 1}), "ns/app") is None
    assert ownership.merged_if_drifted(desired, live, "ns/app") is None
    ownership.forget("ns/app")
    assert "ns/app" not in ownership.in_sync()
