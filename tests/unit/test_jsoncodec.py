"""kube/jsoncodec.py reads and writes what the standard library does, where orjson alone would not."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st

from velashard.kube import jsoncodec

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) |
                    st.text(), lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=30)


@given(JSON)
def test_it_reads_and_writes_as_the_standard_library(value):
    standard = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    assert json.loads(jsoncodec.dumps(value)) == json.loads(standard)
    assert jsoncodec.loads(standard) == json.loads(standard)


@pytest.mark.parametrize("text", [b"123456789012345678901234567890", b"-9999999999999999999",
                                  b'{"n": [1, 184467440737095516150]}', b"1e400", b'"\\ud800"'])
def test_what_orjson_would_round_or_refuse_is_read_by_the_standard_library(text):
    assert jsoncodec.loads(text) == json.loads(text)
    assert type(jsoncodec.loads(text)) is type(json.loads(text))


def test_what_orjson_cannot_write_the_standard_library_does():
    assert json.loads(jsoncodec.dumps({"big": 2 ** 70})) == {"big": 2 ** 70}
    assert jsoncodec.dumps({1: "a"}) == b'{"1":"a"}'


def test_a_kubernetes_object_is_written_to_the_same_bytes():
    obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "wéb", "labels": {"a": "b"}},
           "spec": {"replicas": 3, "template": {"spec": {"containers": [{"image": "nginx:1", "args": ["-x"]}]}}}}
    assert jsoncodec.dumps(obj) == json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def test_what_is_not_json_fails_as_the_standard_library_says():
    with pytest.raises(json.JSONDecodeError):
        jsoncodec.loads(b'{"a": ')
