"""JSON merge patch, JSON patch, strategic merge patch and the three-way merge."""

from __future__ import annotations

import pytest

from velashard.patch import PatchError, apply_json_patch, json_merge_patch, strategic_merge_patch, three_way_merge


@pytest.mark.parametrize("target,patch,expected", [  # RFC 7386 appendix A
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
])
def test_json_merge_patch(target, patch, expected):
    assert json_merge_patch(target, patch) == expected


def test_json_patch_operations():
    doc = {"foo": ["bar", "baz"], "a": {"b": 1}}
    out = apply_json_patch(doc, [
        {"op": "add", "path": "/foo/1", "value": "qux"},
        {"op": "add", "path": "/foo/-", "value": "end"},
        {"op": "replace", "path": "/a/b", "value": 2},
        {"op": "copy", "from": "/a", "path": "/c"},
        {"op": "move", "from": "/c/b", "path": "/d"},
        {"op": "remove", "path": "/foo/0"},
        {"op": "test", "path": "/d", "value": 2},
        {"op": "add", "path": "/x~1y", "value": "slash"},
    ])
    assert out == {"foo": ["qux", "baz", "end"], "a": {"b": 2}, "c": {}, "d": 2, "x/y": "slash"}
    assert doc == {"foo": ["bar", "baz"], "a": {"b": 1}}  # inputs are never mutated


@pytest.mark.parametrize("ops,fragment", [
    ([{"op": "test", "path": "/a", "value": 2}], "test failed"),
    ([{"op": "remove", "path": "/missing"}], "path not found"),
    ([{"op": "replace", "path": "/list/9", "value": 1}], "out of range"),
    ([{"op": "frobnicate", "path": "/a"}], "unknown op"),
    ([{"op": "add", "path": "no-slash", "value": 1}], "invalid JSON pointer"),
    ([{"op": "test", "path": "/a", "value": True}], "test failed"),
])
def test_json_patch_errors_name_the_operation(ops, fragment):
    with pytest.raises(PatchError) as err:
        apply_json_patch({"a": 1, "list": []}, ops)
    assert fragment in str(err.value) and "operation 0" in str(err.value)


def pod_template(containers):
    return {"spec": {"template": {"spec": {"containers": containers}}}}


def test_strategic_merge_by_merge_keys():
    live = pod_template([{"name": "app", "image": "a:1", "env": [{"name": "A", "value": "1"}],
                          "ports": [{"containerPort": 80, "protocol": "TCP"}]},
                         {"name": "sidecar", "image": "s:1"}])
    patch = pod_template([{"name": "app", "image": "a:2", "env": [{"name": "B", "value": "2"}],
                           "ports": [{"containerPort": 80, "name": "http"}]},
                          {"name": "sidecar", "$patch": "delete"}])
    out = strategic_merge_patch(live, patch, "Deployment")
    containers = out["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["app"]
    assert containers[0]["image"] == "a:2"
    assert containers[0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert containers[0]["ports"] == [{"containerPort": 80, "protocol": "TCP", "name": "http"}]


def test_service_ports_merge_by_port_and_directives():
    svc = {"spec": {"ports": [{"port": 80, "targetPort": 8080}], "selector": {"a": "b", "c": "d"}},
           "metadata": {"finalizers": ["x"]}}
    out = strategic_merge_patch(svc, {"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443}],
                                               "selector": {"$patch": "replace", "e": "f"}},
                                      "metadata": {"finalizers": ["y"]}}, "Service")
    assert out["spec"]["ports"] == [{"port": 80, "targetPort": 8080, "name": "http"}, {"port": 443}]
    assert out["spec"]["selector"] == {"e": "f"}
    assert out["metadata"]["finalizers"] == ["x", "y"]
    retained = strategic_merge_patch({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"x": 1}}}},
                                     {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}})
    assert retained == {"spec": {"strategy": {"type": "Recreate"}}}
    with pytest.raises(PatchError):
        strategic_merge_patch({}, {"spec": {"$patch": "bogus"}})


def test_three_way_merge_keeps_what_others_set():
    last = pod_template([{"name": "app", "image": "a:1", "args": ["--old"]}])
    desired = pod_template([{"name": "app", "image": "a:2"}])
    live = pod_template([{"name": "app", "image": "a:1", "args": ["--old"], "imagePullPolicy": "IfNotPresent"},
                         {"name": "injected-sidecar", "image": "mesh:1"}])
    live["spec"]["replicas"] = 5  # e.g. set by an autoscaler, never applied by us
    out = three_way_merge(last, desired, live, "Deployment")
    containers = out["spec"]["template"]["spec"]["containers"]
    assert containers[0] == {"name": "app", "image": "a:2", "imagePullPolicy": "IfNotPresent"}
    assert containers[1]["name"] == "injected-sidecar"
    assert out["spec"]["replicas"] == 5
    dropped = three_way_merge(pod_template([{"name": "app", "image": "a"}, {"name": "old", "image": "o"}]),
                              pod_template([{"name": "app", "image": "a"}]),
                              pod_template([{"name": "app", "image": "a"}, {"name": "old", "image": "o"}]))
    assert [c["name"] for c in dropped["spec"]["template"]["spec"]["containers"]] == ["app"]
