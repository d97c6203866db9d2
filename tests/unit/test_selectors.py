"""Label and field selector parsing and matching."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from velashard.devcluster.selectors import (SelectorError, label_selector_from_dict, parse_field_selector,
                                            parse_label_selector)


@pytest.mark.parametrize("text,labels,expected", [
    ("", {}, True),
    ("a=b", {"a": "b"}, True),
    ("a==b", {"a": "c"}, False),
    ("a!=b", {}, True),                      # != matches objects without the key
    ("a!=b", {"a": "b"}, False),
    ("a in (x, y)", {"a": "y"}, True),
    ("a notin (x)", {}, True),               # notin matches objects without the key
    ("a notin (x)", {"a": "x"}, False),
    ("a", {"a": ""}, True),
    ("!a", {"a": "1"}, False),
    ("!a", {"b": "1"}, True),
    ("a=b,c", {"a": "b"}, False),
    ("example.com/app=web , tier", {"example.com/app": "web", "tier": "x"}, True),
    ("a=", {"a": ""}, True),
])
def test_label_selector_matching(text, labels, expected):
    assert parse_label_selector(text).matches(labels) is expected


@pytest.mark.parametrize("text", ["a in ()", "a in (x", "=b", "a=b,", "a b", "a in x", "bad key!=x", "a=b c",
                                  "!", "a=(b)", "a notin (x,)"])
def test_invalid_label_selectors_raise_selector_error(text):
    with pytest.raises(SelectorError):
        parse_label_selector(text)


def test_label_selector_from_dict():
    sel = label_selector_from_dict({"matchLabels": {"app": "web"}, "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["a", "b"]},
        {"key": "legacy", "operator": "DoesNotExist"}]})
    assert sel.matches({"app": "web", "tier": "a"})
    assert not sel.matches({"app": "web", "tier": "a", "legacy": "1"})
    assert label_selector_from_dict(None).empty and label_selector_from_dict({}).empty
    with pytest.raises(SelectorError):
        label_selector_from_dict({"matchExpressions": [{"key": "a", "operator": "Near"}]})
    with pytest.raises(SelectorError):
        label_selector_from_dict({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})


def test_field_selectors():
    sel = parse_field_selector("metadata.name=a,status.phase!=Running")
    assert sel.fields() == {"metadata.name", "status.phase"}
    assert sel.matches({"metadata.name": "a", "status.phase": "Pending"})
    assert not sel.matches({"metadata.name": "a", "status.phase": "Running"})
    assert parse_field_selector("").matches({})
    with pytest.raises(SelectorError):
        parse_field_selector("metadata.name")


_alnum = "abcxyz019"
_label_key = st.builds(lambda a, mid, b: a + mid + b, st.sampled_from("abcxyz"),
                       st.text(alphabet=_alnum + ".-", max_size=6), st.sampled_from(_alnum)) | st.sampled_from("abc")
_label_value = st.builds(lambda a, mid, b: a + mid + b, st.sampled_from(_alnum),
                         st.text(alphabet=_alnum + "._-", max_size=5), st.sampled_from(_alnum))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_parser_never_raises_anything_but_selector_error(text):
    try:
        parse_label_selector(text)
    except SelectorError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_label_key, st.sampled_from(["=", "!=", "in", "notin", "exists", "!"]),
                          st.lists(_label_value, min_size=1, max_size=3)), max_size=4),
       st.dictionaries(_label_key, _label_value, max_size=4))
def test_canonical_form_round_trips(reqs, labels):
    parts = []
    for key, op, values in reqs:
        if op in ("=", "!="):
            parts.append(f"{key}{op}{values[0]}")
        elif op in ("in", "notin"):
            parts.append(f"{key} {op} ({','.join(values)})")
        elif op == "exists":
            parts.append(key)
        else:
            parts.append("!" + key)
    sel = parse_label_selector(",".join(parts))
    again = parse_label_selector(str(sel))
    assert again == sel
    assert again.matches(labels) == sel.matches(labels)
