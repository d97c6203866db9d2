"""Three-way merge for apply: desired wins, what we stopped applying goes, what others set stays."""

from __future__ import annotations

import copy

from velashard.patch import three_way_merge
from velashard.patch.three_way import three_way_patch


def deployment(containers, **spec):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"template": {"spec": {"containers": containers}}, **spec}}


def containers_of(obj):
    return obj["spec"]["template"]["spec"]["containers"]


def test_keeps_an_externally_added_container_and_fields_set_by_others():
    last = deployment([{"name": "app", "image": "a:1", "args": ["--old"]}])
    desired = deployment([{"name": "app", "image": "a:2"}])
    live = deployment([{"name": "app", "image": "a:1", "args": ["--old"], "imagePullPolicy": "IfNotPresent"},
                       {"name": "injected-sidecar", "image": "mesh:1"}], replicas=5)   # an autoscaler's replicas
    inputs = copy.deepcopy((last, desired, live))
    out = three_way_merge(last, desired, live, "Deployment")
    assert containers_of(out) == [{"name": "app", "image": "a:2", "imagePullPolicy": "IfNotPresent"},
                                  {"name": "injected-sidecar", "image": "mesh:1"}]
    assert out["spec"]["replicas"] == 5
    assert (last, desired, live) == inputs


def test_removes_a_container_that_left_desired():
    last = deployment([{"name": "app", "image": "a"}, {"name": "old", "image": "o"}])
    live = deployment([{"name": "app", "image": "a"}, {"name": "old", "image": "o"}, {"name": "theirs"}])
    out = three_way_merge(last, deployment([{"name": "app", "image": "a"}]), live)
    assert [c["name"] for c in containers_of(out)] == ["app", "theirs"]


def test_removes_fields_and_keys_that_left_desired_only():
    last = {"metadata": {"labels": {"mine": "1", "gone": "1"}}, "data": {"a": "1", "b": "2"}}
    desired = {"metadata": {"labels": {"mine": "2"}}, "data": {"a": "1"}}
    live = {"metadata": {"labels": {"mine": "1", "gone": "1", "theirs": "x"}, "uid": "u"},
            "data": {"a": "1", "b": "2", "c": "3"}}
    assert three_way_merge(last, desired, live, "ConfigMap") == {
        "metadata": {"labels": {"mine": "2", "theirs": "x"}, "uid": "u"}, "data": {"a": "1", "c": "3"}}


def test_first_apply_without_last_applied_only_adds():
    live = {"metadata": {"labels": {"theirs": "x"}}, "spec": {"ports": [{"port": 80, "nodePort": 30080}]}}
    desired = {"metadata": {"labels": {"mine": "1"}}, "spec": {"ports": [{"port": 80, "targetPort": 8080}]}}
    assert three_way_merge(None, desired, live, "Service") == {
        "metadata": {"labels": {"theirs": "x", "mine": "1"}},
        "spec": {"ports": [{"port": 80, "nodePort": 30080, "targetPort": 8080}]}}


def test_desired_order_wins_and_atomic_lists_are_replaced():
    last = deployment([{"name": "a"}, {"name": "b"}])
    desired = deployment([{"name": "b", "args": ["x"]}, {"name": "a"}])
    live = deployment([{"name": "a"}, {"name": "b", "args": ["y", "z"]}])
    out = three_way_merge(last, desired, live, "Deployment")
    assert containers_of(out) == [{"name": "b", "args": ["x"]}, {"name": "a"}]


def test_finalizers_others_added_survive_and_ours_leave():
    last = {"metadata": {"finalizers": ["ours/a", "ours/b"]}}
    desired = {"metadata": {"finalizers": ["ours/a"]}}
    live = {"metadata": {"finalizers": ["theirs/x", "ours/a", "ours/b"]}}
    assert three_way_merge(last, desired, live)["metadata"]["finalizers"] == ["theirs/x", "ours/a"]


def test_keyed_items_without_their_key_replace_the_list():
    out = three_way_merge(None, deployment([{"image": "x"}]), deployment([{"name": "a"}]))
    assert containers_of(out) == [{"image": "x"}]


def test_the_patch_is_what_kubectl_would_send():
    patch = three_way_patch(deployment([{"name": "app", "image": "a", "args": ["x"]}, {"name": "old"}]),
                            deployment([{"name": "app", "image": "b"}]), "Deployment")
    assert patch["spec"]["template"]["spec"] == {
        "containers": [{"name": "app", "image": "b", "args": None}, {"name": "old", "$patch": "delete"}],
        "$setElementOrder/containers": [{"name": "app"}]}
    patch = three_way_patch({"metadata": {"finalizers": ["a", "b"]}}, {"metadata": {"finalizers": ["a"]}})
    assert patch == {"metadata": {"finalizers": ["a"], "$deleteFromPrimitiveList/finalizers": ["b"],
                                  "$setElementOrder/finalizers": ["a"]}}
