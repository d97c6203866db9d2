"""Label and field selectors: parsing, matching and errors as kube-apiserver has them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from velashard.apiserver.storage.selectors import (FieldRequirement, LabelSelector, Requirement, SelectorError,
                                                   label_selector_from_dict, parse_field_selector, parse_label_selector,
                                                   stored_label_selector)


@pytest.mark.parametrize("text,labels,expected", [
    ("", {}, True),
    ("", None, True),
    ("a=b", {"a": "b"}, True),
    ("a=b", {}, False),
    ("a==b", {"a": "c"}, False),
    ("a==b", {"a": "b"}, True),
    ("a!=b", {}, True),                      # != matches objects without the key
    ("a!=b", {"a": "c"}, True),
    ("a!=b", {"a": "b"}, False),
    ("a in (x, y)", {"a": "y"}, True),
    ("a in (x,y)", {"a": "z"}, False),
    ("a in (x,y)", {}, False),
    ("a notin (x)", {}, True),               # notin matches objects without the key
    ("a notin (x)", {"a": "x"}, False),
    ("a notin (x)", {"a": "y"}, True),
    ("a", {"a": ""}, True),
    ("a", {"b": ""}, False),
    ("!a", {"a": "1"}, False),
    ("!a", {"b": "1"}, True),
    ("a=b,c", {"a": "b"}, False),
    ("a=b,c", {"a": "b", "c": "1"}, True),
    ("example.com/app=web , tier", {"example.com/app": "web", "tier": "x"}, True),
    ("a=", {"a": ""}, True),
    ("a=", {}, False),
    ("in=x", {"in": "x"}, True),             # 'in' is an ordinary key where a key is expected
    ("a=in", {"a": "in"}, True),
    ("a>5", {"a": "6"}, True),
    ("a>5", {"a": "5"}, False),
    ("a>5", {"a": "x"}, False),              # a non-integer value never matches > or <
    ("a>5", {}, False),
    ("a<5", {"a": "-1"}, True),
    (" \ta = b\n", {"a": "b"}, True),
    ("a=b\x00garbage", {"a": "b"}, True),     # Go's lexer stops at a NUL byte
])
def test_label_selector_matching(text, labels, expected):
    assert parse_label_selector(text).matches(labels) is expected


@pytest.mark.parametrize("text,message", [
    ("a in (x", "found '', expected: ',' or ')'"),
    ("=b", "found '=', expected: !, identifier, or 'end of string'"),
    ("a=b,", "found '', expected: identifier after ','"),
    ("a b", "found 'b', expected: in, notin, =, ==, !=, gt, lt"),
    ("a in x", "found 'x' expected: '('"),
    ("a in (x y)", "found 'y', expected: ',' or ')'"),
    ("a=b c", "found 'c', expected: ',' or 'end of string'"),
    ("a=b=c", "found '=', expected: ',' or 'end of string'"),
    ("!", "found '', expected: identifier"),
    ("!a=b", "found '=', expected: ',' or 'end of string'"),
    ("a=(b)", "found '(', expected: identifier"),
    ("a in (=)", "found '=', expected: identifier"),
    # kube-apiserver reads an empty set entry as the value ""; the project rejects it.
    ("a in ()", "for 'in', 'notin' operators, values set can't be empty"),
    ("a notin (x,)", "found ')', expected: identifier (empty values are not allowed in a set)"),
    ("a in (,x)", "found ',', expected: identifier (empty values are not allowed in a set)"),
    ("a in (x,,y)", "found ',', expected: identifier"),
    ("a,,b", "found ',', expected: identifier after ','"),
    (",a", "found ',', expected: !, identifier, or 'end of string'"),
    ("bad key!=x", "found 'key', expected: in, notin, =, ==, !=, gt, lt"),
    ("a/b/c=x", 'key: Invalid value: "a/b/c": a qualified name must consist of'),
    ("Bad_Prefix/x=y", 'prefix part a lowercase RFC 1123 subdomain'),
    ("a=-x", 'values[0][a]: Invalid value: "-x": a valid label must be an empty string'),
    ("a=" + "x" * 64, "must be no more than 63 characters"),
    ("a>x", "for 'Gt', 'Lt' operators, the value must be an integer"),
    ("a in (x,é)", 'Invalid value: "é"'),
])
def test_invalid_label_selectors_name_the_bad_part(text, message):
    with pytest.raises(SelectorError) as err:
        parse_label_selector(text)
    assert message in str(err.value)


def test_parsed_requirements_and_canonical_form():
    sel = parse_label_selector("z notin (b,a,a), y==1, !x, w, v!=, u in (p), t>3")
    assert sel.requirements == (
        Requirement("t", ">", ("3",)),
        Requirement("u", "in", ("p",)),
        Requirement("v", "!=", ("",)),
        Requirement("w", "exists"),
        Requirement("x", "!"),
        Requirement("y", "=", ("1",)),
        Requirement("z", "notin", ("a", "b")),
    )
    assert str(sel) == "t>3,u in (p),v!=,w,!x,y=1,z notin (a,b)"
    assert parse_label_selector(str(sel)) == sel
    assert parse_label_selector("").empty and not sel.empty
    assert str(LabelSelector()) == ""


@pytest.mark.parametrize("sel,labels,expected", [
    (None, {"a": "b"}, True),
    ({}, {}, True),
    ({"matchLabels": {}, "matchExpressions": []}, {"a": "b"}, True),
    ({"matchLabels": {"app": "web"}}, {"app": "web", "x": "y"}, True),
    ({"matchLabels": {"app": "web"}}, {"app": "db"}, False),
    ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}, {"tier": "b"}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}, {}, True),
    ({"matchExpressions": [{"key": "shard", "operator": "DoesNotExist"}]}, {"shard": "s"}, False),
    ({"matchExpressions": [{"key": "shard", "operator": "DoesNotExist"}]}, {}, True),
    ({"matchExpressions": [{"key": "shard", "operator": "Exists"}]}, {"shard": ""}, True),
    ({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "legacy", "operator": "DoesNotExist"}]},
     {"app": "web", "legacy": "1"}, False),
])
def test_label_selector_from_dict(sel, labels, expected):
    assert label_selector_from_dict(sel).matches(labels) is expected


def test_label_selector_from_dict_empty_and_canonical():
    assert label_selector_from_dict(None).empty and label_selector_from_dict({}).empty
    sel = label_selector_from_dict({"matchLabels": {"b": "1", "a": "2"},
                                    "matchExpressions": [{"key": "c", "operator": "In", "values": ["y", "x"]}]})
    assert str(sel) == "a=2,b=1,c in (x,y)"
    assert sel == parse_label_selector("c in (y,x), b=1, a=2")


@pytest.mark.parametrize("sel,message", [
    ({"matchExpressions": [{"key": "a", "operator": "Near"}]}, '"Near" is not a valid label selector operator'),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, "must be specified when `operator`"),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn"}]}, "must be specified when `operator`"),
    ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}, "may not be specified"),
    ({"matchExpressions": [{"operator": "Exists"}]}, "matchExpressions[0].key: Required value"),
    ({"matchExpressions": [{"key": "bad key", "operator": "Exists"}]}, 'Invalid value: "bad key"'),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["bad value"]}]}, 'Invalid value: "bad value"'),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]}, "must be a list of strings"),
    ({"matchLabels": {"a": 1}}, "must be strings"),
    ({"matchLabels": ["a"]}, "must be a map"),
    ({"matchExpressions": {"key": "a"}}, "must be a list"),
    ("app=web", "must be an object"),
])
def test_label_selector_from_dict_errors(sel, message):
    with pytest.raises(SelectorError) as err:
        label_selector_from_dict(sel)
    assert message in str(err.value)


@pytest.mark.parametrize("text,fields,expected", [
    ("", {}, True),
    ("metadata.name=a", {"metadata.name": "a"}, True),
    ("metadata.name==a", {"metadata.name": "b"}, False),
    ("metadata.name!=a", {"metadata.name": "b"}, True),
    ("spec.nodeName=", {}, True),                       # a missing field compares as ""
    ("spec.nodeName!=", {}, False),
    ("metadata.name=a,status.phase!=Running", {"metadata.name": "a", "status.phase": "Pending"}, True),
    ("metadata.name=a,status.phase!=Running", {"metadata.name": "a", "status.phase": "Running"}, False),
    (r"metadata.name=a\,b", {"metadata.name": "a,b"}, True),
    (r"metadata.name=a\=b\\c", {"metadata.name": "a=b\\c"}, True),
    ("metadata.name=a,,", {"metadata.name": "a"}, True),    # empty terms are skipped
])
def test_field_selector_matching(text, fields, expected):
    assert parse_field_selector(text).matches(fields) is expected


def test_field_selector_requirements_and_fields():
    sel = parse_field_selector("status.phase!=Running,metadata.name=a")
    assert sel.requirements == (FieldRequirement("metadata.name", "=", "a"),
                                FieldRequirement("status.phase", "!=", "Running"))
    assert sel.fields() == {"metadata.name", "status.phase"}
    # Nothing is trimmed: the server rejects " metadata.name" as an unsupported field label.
    assert parse_field_selector(" metadata.name=a").fields() == {" metadata.name"}
    assert parse_field_selector("=a").fields() == {""}
    assert str(parse_field_selector(r"metadata.name=a\,b")) == r"metadata.name=a\,b"
    assert parse_field_selector("").empty


@pytest.mark.parametrize("text,message", [
    ("metadata.name", "invalid selector: 'metadata.name'; can't understand 'metadata.name'"),
    ("a=b,c", "can't understand 'c'"),
    ("a=b=c", "unescaped character in value: ="),
    (r"a=b\x", r"invalid escape sequence: \x"),
    ("a=b\\", "invalid escape sequence: \\"),
])
def test_invalid_field_selectors(text, message):
    with pytest.raises(SelectorError) as err:
        parse_field_selector(text)
    assert message in str(err.value)


# --- properties ---------------------------------------------------------------------------------------------

_alnum = "abcxyzAZ019"
_name = st.builds(lambda a, mid, b: a + mid + b, st.sampled_from(_alnum), st.text(alphabet=_alnum + "._-", max_size=6),
                  st.sampled_from(_alnum)) | st.sampled_from(_alnum)
_prefix = st.sampled_from(["", "example.com/", "a.b-c/"])
_label_key = st.builds(lambda p, n: p + n, _prefix, _name) | st.sampled_from(["in", "notin"])
_label_value = _name | st.just("")
_selector_chars = st.sampled_from(list("ab=!(),<> \tin0-./") + ["in", "notin", "\x00", "é"])


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60) | st.lists(_selector_chars, max_size=25).map("".join))
def test_parser_never_raises_anything_but_selector_error(text):
    try:
        sel = parse_label_selector(text)
    except SelectorError:
        return
    assert parse_label_selector(str(sel)) == sel


def _render(key: str, op: str, values: list[str]) -> str:
    if op in ("=", "==", "!="):
        return f"{key} {op} {values[0]}" if values[0] else f"{key}{op}"
    if op in ("in", "notin"):
        return f"{key} {op} ({', '.join(v or 'empty' for v in values)})"   # no empty entries in a set
    return key if op == "exists" else "!" + key


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(_label_key, st.sampled_from(["=", "==", "!=", "in", "notin", "exists", "!"]),
                          st.lists(_label_value, min_size=1, max_size=3)), max_size=5),
       st.dictionaries(_label_key, _label_value, max_size=5))
def test_canonical_form_round_trips_and_matches_the_same(reqs, labels):
    sel = parse_label_selector(",".join(_render(*r) for r in reqs))
    again = parse_label_selector(str(sel))
    assert again == sel
    assert again.matches(labels) == sel.matches(labels)
    # The selector means the conjunction of its parts.
    assert sel.matches(labels) == all(parse_label_selector(_render(*r)).matches(labels) for r in reqs)


def test_a_stored_selector_is_parsed_once_and_by_identity():
    stored = {"matchLabels": {"team": "a"}}
    first = stored_label_selector(stored)
    assert stored_label_selector(stored) is first
    assert first.matches({"team": "a"}) and not first.matches({"team": "b"})
    other = {"matchLabels": {"team": "b"}}  # another object: parsed on its own
    assert stored_label_selector(other).matches({"team": "b"})
    assert stored_label_selector(None).matches({}) and stored_label_selector({}).matches({"x": "y"})
