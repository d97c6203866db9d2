"""KubeVela's trait patch rules (StrategyUnify) over plain data, tags as the CUE evaluator reads them."""

from __future__ import annotations

import pytest

from velashard.cue.api import compile_sources
from velashard.patch import PatchError
from velashard.patch.trait_patch import apply_trait_patch

WORKLOAD = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"},
            "spec": {"template": {"spec": {
                "containers": [{"name": "main", "image": "nginx", "env": [{"name": "A", "value": "1"}]}],
                "volumes": [{"name": "data", "emptyDir": {}}]}}}}


def patched(template: str, base: dict = WORKLOAD) -> dict:
    inst = compile_sources({"trait.cue": template}).evaluate({})
    return apply_trait_patch(base, inst.export("patch", check=False), inst.tags("patch"))


def pod(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"]


def test_patch_key_merges_items_by_key_and_appends_new_ones() -> None:
    out = patched('''patch: spec: template: spec: {
        // +patchKey=name
        containers: [{name: "side", image: "busybox"}, {name: "main", imagePullPolicy: "Always"}]
    }''')
    assert [c["name"] for c in pod(out)["containers"]] == ["main", "side"]
    assert pod(out)["containers"][0] == {"name": "main", "image": "nginx", "imagePullPolicy": "Always",
                                         "env": [{"name": "A", "value": "1"}]}


def test_patch_key_is_inherited_by_nested_lists() -> None:
    out = patched('''patch: spec: template: spec: {
        // +patchKey=name
        containers: [{name: "main", env: [{name: "B", value: "2"}]}]
    }''')
    assert pod(out)["containers"][0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]


def test_without_a_key_lists_merge_element_by_element() -> None:
    out = patched('patch: spec: template: spec: containers: [{resources: limits: cpu: "1"}]')
    assert pod(out)["containers"][0]["resources"] == {"limits": {"cpu": "1"}}
    with pytest.raises(PatchError, match="incompatible list lengths"):
        patched('patch: spec: template: spec: containers: []', base={"spec": {"template": {"spec": {
            "containers": [{"name": "a"}, {"name": "b"}]}}}})


def test_scalar_conflicts_are_errors_naming_the_path() -> None:
    with pytest.raises(PatchError, match=r'spec.template.spec.containers\[0\].image: conflicting values "nginx" '
                                         r'and "httpd"'):
        patched('patch: spec: template: spec: containers: [{image: "httpd"}]')


def test_retain_keys_replaces_a_field_and_replace_a_list() -> None:
    out = patched('''patch: spec: template: spec: {
        // +patchKey=name
        // +patchStrategy=retainKeys
        containers: [{name: "main", image: "httpd"}]
        // +patchStrategy=replace
        volumes: [{name: "cache", emptyDir: medium: "Memory"}]
    }''')
    assert pod(out)["containers"] == [{"name": "main", "image": "httpd"}]
    assert pod(out)["volumes"] == [{"name": "cache", "emptyDir": {"medium": "Memory"}}]
    out = patched('''patch: spec: {
        // +patchStrategy=retainKeys
        template: spec: containers: [{name: "only"}]
    }''')
    assert pod(out) == {"containers": [{"name": "only"}]}


def test_json_merge_patch_and_json_patch_strategies() -> None:
    out = patched('''// +patchStrategy=jsonMergePatch
    patch: {metadata: name: "renamed", spec: template: spec: volumes: null}''')
    assert out["metadata"]["name"] == "renamed" and "volumes" not in pod(out)
    out = patched('''// +patchStrategy=jsonPatch
    patch: operations: [{op: "replace", path: "/spec/template/spec/containers/0/image", value: "httpd"}]''')
    assert pod(out)["containers"][0]["image"] == "httpd"
    assert pod(WORKLOAD)["containers"][0]["image"] == "nginx"


def test_an_open_patch_list_merges_into_a_longer_one() -> None:
    base = {"spec": {"template": {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}}}
    out = patched('patch: spec: template: spec: containers: [{volumeMounts: [{name: "v", mountPath: "/v"}]}, ...]',
                  base)
    assert pod(out)["containers"] == [{"name": "a", "volumeMounts": [{"name": "v", "mountPath": "/v"}]},
                                      {"name": "b"}]


def test_a_list_tail_constrains_every_element_of_the_workloads_list() -> None:
    base = {"spec": {"template": {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}}}
    out = patched('patch: spec: template: spec: containers: [...{lifecycle: preStop: exec: command: ["sleep", "5"]}]',
                  base)
    assert [c["lifecycle"]["preStop"]["exec"]["command"] for c in pod(out)["containers"]] == [["sleep", "5"]] * 2
