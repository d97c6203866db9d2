"""Kubernetes protobuf bodies: the envelope, field numbers and JSON's zero-value rules."""

from __future__ import annotations

import pytest

from velashard.apiserver.http import protobuf

DEPLOYMENT = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "d", "labels": {"app": "web"},
                 "creationTimestamp": "2026-01-02T03:04:05Z", "generation": 3},
    "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}}, "template": {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx", "args": ["-a", "-b"],
                                 "ports": [{"containerPort": 80, "protocol": "TCP"}],
                                 "resources": {"limits": {"cpu": "500m"}}}]}},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}}},
    "status": {},
}


def test_round_trip_keeps_explicit_zero_pointers_and_converts_special_types():
    decoded = protobuf.decode(protobuf.encode(DEPLOYMENT))
    assert decoded == DEPLOYMENT  # replicas: 0 is a pointer: kept; quantities, int-or-strings, times as JSON


def test_secret_bytes_are_base64_and_empty_omitempty_fields_are_dropped():
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "dmFsdWU="},
              "type": "Opaque"}
    body = protobuf.encode(secret)
    assert b"value" in body  # raw bytes on the wire
    assert protobuf.decode(body) == secret


def test_zero_values_written_by_proto2_are_dropped_unless_json_keeps_them():
    # what Go's generated marshaller writes for an empty ObjectMeta name and a zero minReadySeconds
    spec = (protobuf._key(5, 0) + protobuf._put_varint(0))  # minReadySeconds = 0 (omitempty)
    meta = protobuf._delimited(1, b"x") + protobuf._delimited(2, b"")  # generateName "" (omitempty)
    raw = protobuf._delimited(1, meta) + protobuf._delimited(2, spec)
    type_meta = protobuf._delimited(1, b"apps/v1") + protobuf._delimited(2, b"Deployment")
    body = protobuf.MAGIC + protobuf._delimited(1, type_meta) + protobuf._delimited(2, raw)
    assert protobuf.decode(body) == {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"},
                                     "spec": {}}


def test_unknown_kind_is_415_and_garbage_is_an_error():
    type_meta = protobuf._delimited(1, b"example.com/v1") + protobuf._delimited(2, b"Widget")
    with pytest.raises(Exception) as err:
        protobuf.decode(protobuf.MAGIC + protobuf._delimited(1, type_meta))
    assert getattr(err.value, "code", None) == 415
    with pytest.raises(protobuf.ProtobufError):
        protobuf.decode(b"not protobuf")
    with pytest.raises(protobuf.ProtobufError):
        protobuf.decode(protobuf.MAGIC + b"\x0a\xff\xff")
