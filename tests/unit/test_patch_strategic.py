"""Strategic merge patch: merge keys by path, directives, list order."""

from __future__ import annotations

import copy

import pytest

from velashard.patch import PatchError, strategic_merge_patch
from velashard.patch.strategic_merge import list_strategy


def pod_template(containers, **spec):
    return {"spec": {"template": {"spec": {"containers": containers, **spec}}}}


def containers_of(obj):
    return obj["spec"]["template"]["spec"]["containers"]


@pytest.mark.parametrize("path,kind,expected", [
    (("spec", "template", "spec", "containers"), "Deployment", "name"),
    (("spec", "containers"), "Pod", "name"),
    (("spec", "jobTemplate", "spec", "template", "spec", "initContainers"), "CronJob", "name"),
    (("spec", "template", "spec", "containers", "ports"), "Deployment", "containerPort"),
    (("spec", "template", "spec", "containers", "env"), None, "name"),
    (("spec", "template", "spec", "containers", "volumeMounts"), "StatefulSet", "mountPath"),
    (("spec", "template", "spec", "volumes"), "DaemonSet", "name"),
    (("spec", "template", "spec", "hostAliases"), "Job", "ip"),
    (("spec", "ports"), "Service", "port"),
    (("spec", "ports"), None, "port"),
    (("spec", "ports"), "Deployment", None),
    (("spec", "template", "spec", "containers", "args"), "Deployment", None),
    (("spec", "template", "spec", "tolerations"), "Deployment", None),
    (("metadata", "finalizers"), "ConfigMap", "set"),
    (("spec", "template", "metadata", "finalizers"), "Deployment", "set"),
    (("metadata", "ownerReferences"), None, "uid"),
    (("status", "conditions"), "Deployment", "type"),
    (("status", "addresses"), "Node", "type"),
    (("env",), None, None),                                   # env only merges inside a container
    (("secrets",), "ServiceAccount", "name"),
    ((), None, None),
])
def test_list_strategy_is_path_aware(path, kind, expected):
    assert list_strategy(path, kind) == expected


def test_containers_env_and_ports_merge_by_key():
    live = pod_template([{"name": "app", "image": "a:1", "env": [{"name": "A", "value": "1"}],
                          "ports": [{"containerPort": 80, "protocol": "TCP"}]},
                         {"name": "sidecar", "image": "s:1"}])
    patch = pod_template([{"name": "app", "image": "a:2", "env": [{"name": "B", "value": "2"},
                                                                  {"name": "A", "value": "one"}],
                           "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 9090}]}])
    before = copy.deepcopy(live), copy.deepcopy(patch)
    out = strategic_merge_patch(live, patch, "Deployment")
    assert containers_of(out) == [
        {"name": "app", "image": "a:2", "env": [{"name": "A", "value": "one"}, {"name": "B", "value": "2"}],
         "ports": [{"containerPort": 80, "protocol": "TCP", "name": "http"}, {"containerPort": 9090}]},
        {"name": "sidecar", "image": "s:1"}]
    assert (live, patch) == before


def test_service_ports_merge_by_port():
    svc = {"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 8443}]}}
    out = strategic_merge_patch(svc, {"spec": {"ports": [{"port": 443, "name": "https"}, {"port": 53}]}}, "Service")
    assert out["spec"]["ports"] == [{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 8443,
                                                                      "name": "https"}, {"port": 53}]


def test_atomic_lists_are_replaced_and_null_deletes():
    live = pod_template([{"name": "app", "args": ["a", "b"], "image": "x"}], tolerations=[{"key": "k"}])
    live["metadata"] = {"labels": {"a": "1", "b": "2"}}
    patch = pod_template([{"name": "app", "args": ["c"], "image": None}], tolerations=[{"key": "j"}])
    patch["metadata"] = {"labels": {"a": None, "c": "3"}, "missing": None}
    out = strategic_merge_patch(live, patch, "Deployment")
    assert containers_of(out) == [{"name": "app", "args": ["c"]}]
    assert out["spec"]["template"]["spec"]["tolerations"] == [{"key": "j"}]
    assert out["metadata"] == {"labels": {"b": "2", "c": "3"}}


def test_patch_delete_in_a_list_element_and_in_a_map():
    live = pod_template([{"name": "app"}, {"name": "log-tailer"}], volumes=[{"name": "v"}])
    live["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}
    patch = pod_template([{"name": "log-tailer", "$patch": "delete"}, {"name": "gone", "$patch": "delete"}])
    patch["spec"]["strategy"] = {"rollingUpdate": {"$patch": "delete"}}
    out = strategic_merge_patch(live, patch, "Deployment")
    assert containers_of(out) == [{"name": "app"}]
    assert out["spec"]["template"]["spec"]["volumes"] == [{"name": "v"}]
    assert out["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {}}  # Kubernetes empties the map
    assert strategic_merge_patch({"a": 1}, {"$patch": "delete"}) == {}


def test_patch_replace_in_maps_and_lists():
    live = pod_template([{"name": "app", "image": "a"}, {"name": "b", "image": "b"}])
    live["spec"]["selector"] = {"matchLabels": {"a": "1", "b": "2"}}
    patch = pod_template([{"name": "c", "image": "c"}, {"$patch": "replace"}])
    patch["spec"]["selector"] = {"matchLabels": {"$patch": "replace", "c": "3"}}
    out = strategic_merge_patch(live, patch, "Deployment")
    assert containers_of(out) == [{"name": "c", "image": "c"}]
    assert out["spec"]["selector"] == {"matchLabels": {"c": "3"}}
    # On one list item: that item is replaced whole rather than merged.
    out = strategic_merge_patch(live, pod_template([{"name": "app", "$patch": "replace", "command": ["x"]}]))
    assert containers_of(out) == [{"name": "app", "command": ["x"]}, {"name": "b", "image": "b"}]
    # $patch: merge is the default behaviour spelled out.
    out = strategic_merge_patch(live, pod_template([{"name": "app", "$patch": "merge", "command": ["x"]}]))
    assert containers_of(out)[0] == {"name": "app", "image": "a", "command": ["x"]}


def test_retain_keys():
    live = {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}, "replicas": 2}}
    out = strategic_merge_patch(live, {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}})
    assert out == {"spec": {"strategy": {"type": "Recreate"}, "replicas": 2}}
    out = strategic_merge_patch(live, {"spec": {"strategy": {"$retainKeys": ["type", "rollingUpdate"],
                                                             "rollingUpdate": {"maxUnavailable": 0}}}})
    assert out["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}


def test_finalizers_merge_as_a_set_and_delete_from_primitive_list():
    live = {"metadata": {"finalizers": ["a", "b", "c"]}}
    assert strategic_merge_patch(live, {"metadata": {"finalizers": ["b", "d"]}})["metadata"]["finalizers"] == \
        ["a", "b", "c", "d"]
    out = strategic_merge_patch(live, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a", "x"],
                                                    "finalizers": ["e"]}})
    assert out["metadata"]["finalizers"] == ["b", "c", "e"]
    assert strategic_merge_patch({}, {"metadata": {"finalizers": ["a", "a"]}}) == {"metadata": {"finalizers": ["a"]}}


def test_set_element_order():
    live = pod_template([{"name": "c"}, {"name": "b", "image": "b"}, {"name": "d"}, {"name": "a"}])
    patch = pod_template([{"name": "a", "image": "a2"}, {"name": "b", "image": "b2"}])
    patch["spec"]["template"]["spec"]["$setElementOrder/containers"] = [{"name": "a"}, {"name": "b"}]
    out = strategic_merge_patch(live, patch)
    # Live-only items keep their relative order; the listed ones follow the directive's order.
    assert [c["name"] for c in containers_of(out)] == ["c", "d", "a", "b"]
    assert containers_of(out)[2:] == [{"name": "a", "image": "a2"}, {"name": "b", "image": "b2"}]
    # The directive alone reorders without changing contents; it never reaches the result.
    reorder = {"spec": {"template": {"spec": {"$setElementOrder/containers": [{"name": "a"}, {"name": "c"}]}}}}
    out = strategic_merge_patch(pod_template([{"name": "c"}, {"name": "a"}]), reorder)
    assert out == pod_template([{"name": "a"}, {"name": "c"}])
    scalar_order = {"metadata": {"$setElementOrder/finalizers": ["y", "x"], "finalizers": ["y"]}}
    assert strategic_merge_patch({"metadata": {"finalizers": ["x"]}}, scalar_order) == \
        {"metadata": {"finalizers": ["y", "x"]}}


def test_kubernetes_order_puts_items_new_to_the_list_first():
    live = pod_template([{"name": "app", "env": [{"name": "A"}]}])
    patch = pod_template([{"name": "app", "env": [{"name": "B"}]}, {"name": "sidecar"}])
    default = strategic_merge_patch(live, patch, "Deployment")
    assert [c["name"] for c in containers_of(default)] == ["app", "sidecar"]
    assert containers_of(default)[0]["env"] == [{"name": "A"}, {"name": "B"}]
    exact = strategic_merge_patch(live, patch, "Deployment", kubernetes_order=True)
    assert [c["name"] for c in containers_of(exact)] == ["app", "sidecar"]   # app is named: patch order holds
    assert containers_of(exact)[0]["env"] == [{"name": "B"}, {"name": "A"}]
    only_new = strategic_merge_patch(live, pod_template([{"name": "redis"}]), kubernetes_order=True)
    assert [c["name"] for c in containers_of(only_new)] == ["redis", "app"]  # as in the kubectl patch docs
    # Design-doc example: live [B, C, A], patch [A', B', D] -> [C, A', B', D].
    items = strategic_merge_patch(pod_template([{"name": n} for n in "BCA"]),
                                  pod_template([{"name": n, "x": 1} for n in "ABD"]), kubernetes_order=True)
    assert [c["name"] for c in containers_of(items)] == ["C", "A", "B", "D"]
    assert strategic_merge_patch({"metadata": {"finalizers": ["x"]}}, {"metadata": {"finalizers": ["y"]}},
                                 kubernetes_order=True) == {"metadata": {"finalizers": ["y", "x"]}}


def test_directives_never_leak_into_new_values():
    patch = {"spec": {"template": {"spec": {
        "containers": [{"name": "app", "env": [{"name": "X", "$patch": "delete"}, {"name": "Y", "value": None}]},
                       {"name": "gone", "$patch": "delete"}],
        "$setElementOrder/containers": [{"name": "app"}],
        "securityContext": {"$patch": "replace", "runAsUser": 1, "fsGroup": None},
        "nodeSelector": {"$retainKeys": ["a"], "a": "1"}}}}}
    out = strategic_merge_patch({}, patch, "Deployment")
    assert out == {"spec": {"template": {"spec": {"containers": [{"name": "app", "env": [{"name": "Y"}]}],
                                                  "securityContext": {"runAsUser": 1},
                                                  "nodeSelector": {"a": "1"}}}}}


def test_type_changes_replace_and_new_lists_need_no_merge_key():
    assert strategic_merge_patch({"a": [1]}, {"a": {"b": 1}}) == {"a": {"b": 1}}
    assert strategic_merge_patch({"a": {"b": 1}}, {"a": "s"}) == {"a": "s"}
    assert strategic_merge_patch({}, pod_template([{"image": "x"}])) == pod_template([{"image": "x"}])


@pytest.mark.parametrize("live,patch,message", [
    ({}, {"spec": {"$patch": "bogus"}}, "unknown patch directive 'bogus' at spec"),
    ({}, {"$patch": "bogus"}, "unknown patch directive 'bogus' at the root"),
    (pod_template([{"name": "a"}]), pod_template([{"name": "a", "$patch": "bogus"}]),
     "unknown patch directive 'bogus' in list spec.template.spec.containers"),
    (pod_template([{"name": "a"}]), pod_template([{"image": "x"}]),
     "an item of list spec.template.spec.containers is missing its merge key 'name'"),
    (pod_template([{"name": "a"}]), pod_template([{"$patch": "delete"}]), "needs the merge key 'name'"),
    (pod_template([{"name": "a"}]), pod_template(["a"]), "its items must be objects"),
    ({"spec": {"s": {"a": 1}}}, {"spec": {"s": {"$retainKeys": ["a"], "b": 2}}},
     "invalid patch format of retainKeys at spec.s: 'b' is set but not listed"),
    ({"spec": {"s": {"a": 1}}}, {"spec": {"s": {"$retainKeys": "a"}}}, "must be a list of strings"),
    ({"metadata": {"finalizers": ["a"]}}, {"metadata": {"finalizers": [{"x": 1}]}}, "list of scalars"),
    ({"metadata": {"finalizers": ["a"]}}, {"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}},
     "must be a list"),
    (pod_template([{"name": "a"}, {"name": "b"}]),
     {"spec": {"template": {"spec": {"containers": [{"name": "b", "x": 1}, {"name": "a", "x": 1}],
                                     "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}]}}}},
     "does not match $setElementOrder/containers"),
    ({}, ["not", "a", "map"], "must be a JSON object"),
])
def test_malformed_patches_raise_patch_error(live, patch, message):
    with pytest.raises(PatchError) as err:
        strategic_merge_patch(live, patch, "Deployment")
    assert message in str(err.value)
