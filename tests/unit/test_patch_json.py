"""JSON patch (RFC 6902), including every example of its appendix A."""

from __future__ import annotations

import copy

import pytest

from velashard.patch import PatchError, apply_json_patch


@pytest.mark.parametrize("doc,ops,expected", [
    # A.1 - A.8
    ({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}], {"baz": "qux", "foo": "bar"}),
    ({"foo": ["bar", "baz"]}, [{"op": "add", "path": "/foo/1", "value": "qux"}], {"foo": ["bar", "qux", "baz"]}),
    ({"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}], {"foo": "bar"}),
    ({"foo": ["bar", "qux", "baz"]}, [{"op": "remove", "path": "/foo/1"}], {"foo": ["bar", "baz"]}),
    ({"baz": "qux", "foo": "bar"}, [{"op": "replace", "path": "/baz", "value": "boo"}], {"baz": "boo", "foo": "bar"}),
    ({"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
     [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
     {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}}),
    ({"foo": ["all", "grass", "cows", "eat"]}, [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
     {"foo": ["all", "cows", "eat", "grass"]}),
    ({"baz": "qux", "foo": ["a", 2, "c"]}, [{"op": "test", "path": "/baz", "value": "qux"},
                                           {"op": "test", "path": "/foo/1", "value": 2}],
     {"baz": "qux", "foo": ["a", 2, "c"]}),
    # A.10, A.14, A.16
    ({"foo": "bar"}, [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
     {"foo": "bar", "child": {"grandchild": {}}}),
    ({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": 10}], {"/": 9, "~1": 10}),
    ({"foo": ["bar"]}, [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}], {"foo": ["bar", ["abc", "def"]]}),
    # A.11: members other than op/path/value are ignored
    ({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}], {"foo": "bar", "baz": "qux"}),
    # more: whole-document ops, copy, escapes, JSON equality in test
    ({"a": 1}, [{"op": "replace", "path": "", "value": [1]}], [1]),
    ({"a": 1}, [{"op": "add", "path": "", "value": {"b": 2}}], {"b": 2}),
    ({"a": {"b": [1]}}, [{"op": "copy", "from": "/a", "path": "/c"}, {"op": "add", "path": "/c/b/-", "value": 2}],
     {"a": {"b": [1]}, "c": {"b": [1, 2]}}),
    ({"a": 1}, [{"op": "move", "from": "/a", "path": "/a"}], {"a": 1}),
    ({"": 1}, [{"op": "replace", "path": "/", "value": 2}], {"": 2}),
    ({"a/b": {"m~n": 1}}, [{"op": "remove", "path": "/a~1b/m~0n"}], {"a/b": {}}),
    ({"n": 1.0, "o": {"x": [1, {"y": True}]}}, [{"op": "test", "path": "/n", "value": 1},
                                                {"op": "test", "path": "/o", "value": {"x": [1.0, {"y": True}]}}],
     {"n": 1.0, "o": {"x": [1, {"y": True}]}}),
    ({"a": None}, [{"op": "test", "path": "/a", "value": None}, {"op": "replace", "path": "/a", "value": None}],
     {"a": None}),
])
def test_operations(doc, ops, expected):
    before = copy.deepcopy(doc)
    assert apply_json_patch(doc, ops) == expected
    assert doc == before


@pytest.mark.parametrize("doc,ops,message", [
    # A.9, A.12, A.13 (duplicate "op" cannot be expressed in a dict), A.15
    ({"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}],
     "json patch operation 0 (test /baz): test failed: value is 'qux', expected 'bar'"),
    ({"foo": "bar"}, [{"op": "add", "path": "/baz/bat", "value": "qux"}],
     "json patch operation 0 (add /baz/bat): path not found"),
    ({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": "10"}],
     "json patch operation 0 (test /~01): test failed: value is 10, expected '10'"),
    ({"a": 1}, [{"op": "test", "path": "/a", "value": True}], "test failed"),
    ({"a": 1}, [{"op": "test", "path": "/a", "value": 1}, {"op": "remove", "path": "/a"},
                {"op": "replace", "path": "/spec/x", "value": 1}],
     "json patch operation 2 (replace /spec/x): path not found"),
    ({"a": 1}, [{"op": "remove", "path": "/missing"}], "json patch operation 0 (remove /missing): path not found"),
    ({"l": []}, [{"op": "replace", "path": "/l/0", "value": 1}], "array index 0 out of range (length 0)"),
    ({"l": [1]}, [{"op": "add", "path": "/l/2", "value": 1}], "array index 2 out of range"),
    ({"l": [1]}, [{"op": "add", "path": "/l/01", "value": 1}], "invalid array index '01'"),
    ({"l": [1]}, [{"op": "remove", "path": "/l/-"}], "path not found"),
    ({"l": [1]}, [{"op": "replace", "path": "/l/x", "value": 1}], "invalid array index 'x'"),
    ({"a": "s"}, [{"op": "add", "path": "/a/b", "value": 1}], "path not found"),
    ({"a": 1}, [{"op": "frobnicate", "path": "/a"}], "json patch operation 0 (frobnicate /a): unknown op 'frobnicate'"),
    ({"a": 1}, [{"path": "/a"}], "unknown op None"),
    ({"a": 1}, [{"op": "add", "path": "a", "value": 1}], "invalid JSON pointer 'a'"),
    ({"a": 1}, [{"op": "add", "value": 1}], "path must be a string"),
    ({"a": 1}, [{"op": "add", "path": "/b"}], "missing value"),
    ({"a": 1}, [{"op": "copy", "path": "/b"}], "missing from"),
    ({"a": {"b": 1}}, [{"op": "move", "from": "/a", "path": "/a/b/c"}], "cannot move a value into one of its own"),
    ({"a": 1}, [{"op": "remove", "path": ""}], "cannot remove the whole document"),
    ({"a": 1}, ["add"], "json patch operation 0: must be an object"),
    ({"a": 1}, {"op": "add"}, "a json patch must be a list of operations"),
])
def test_errors_name_the_operation_and_leave_the_input_alone(doc, ops, message):
    before = copy.deepcopy(doc)
    with pytest.raises(PatchError) as err:
        apply_json_patch(doc, ops)
    assert message in str(err.value)
    assert doc == before
