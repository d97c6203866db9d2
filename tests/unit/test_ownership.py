"""What applying desired state onto a live resource produces, across a move between shards."""

from __future__ import annotations

import copy

from velashard.apis import labels
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
