"""JSON merge patch (RFC 7386)."""

from __future__ import annotations

import copy

import pytest

from velashard.patch import json_merge_patch


@pytest.mark.parametrize("target,patch,expected", [  # RFC 7386 appendix A, every example
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
])
def test_rfc7386_examples(target, patch, expected):
    assert json_merge_patch(target, patch) == expected


def test_inputs_are_never_mutated_or_shared():
    target = {"spec": {"template": {"labels": {"a": "1"}}, "keep": [1, 2]}}
    patch = {"spec": {"template": {"labels": {"b": "2"}}, "new": {"x": [1]}}}
    before_target, before_patch = copy.deepcopy(target), copy.deepcopy(patch)
    out = json_merge_patch(target, patch)
    assert out == {"spec": {"template": {"labels": {"a": "1", "b": "2"}}, "keep": [1, 2], "new": {"x": [1]}}}
    out["spec"]["keep"].append(3)
    out["spec"]["new"]["x"].append(2)
    assert target == before_target and patch == before_patch
