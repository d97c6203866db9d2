"""Grouping a failed shard's revisions and trackers by app, for moves that list them once."""

from __future__ import annotations

from velashard.apis import labels
from velashard.apis.oam import APPLICATION_REVISIONS, RESOURCE_TRACKERS
from velashard.sharding.move import group_dependents


def test_a_shards_dependents_are_grouped_by_the_app_they_belong_to():
    def obj(name: str, app: str, namespace: str | None, app_namespace: str | None) -> dict:
        lbls = {labels.APP_NAME: app, **({labels.APP_NAMESPACE: app_namespace} if app_namespace else {})}
        return {"metadata": {"name": name, "labels": lbls, **({"namespace": namespace} if namespace else {})}}

    grouped = group_dependents([obj("a-v1", "a", "ns1", None), obj("a-v1", "a", "ns2", None)],
                               [obj("a-ns1", "a", None, "ns1"), {"metadata": {"name": "stray", "labels": {}}}])
    assert {k: [(r, o["metadata"]["name"]) for r, o in v] for k, v in grouped.items()} == {
        ("ns1", "a"): [(APPLICATION_REVISIONS, "a-v1"), (RESOURCE_TRACKERS, "a-ns1")],
        ("ns2", "a"): [(APPLICATION_REVISIONS, "a-v1")]}
