"""Kubernetes protobuf for the bodies kubectl's auth commands send: reviews and TokenRequest.

`kubectl auth can-i`, `auth whoami` and `create token` post typed objects as
`application/vnd.kubernetes.protobuf`: the `k8s\\x00` magic, a runtime.Unknown envelope
(typeMeta=1, raw=2) and the object's message (metadata=1, spec=2). Only the spec fields of
these few messages are read (field numbers from k8s.io/api's generated.proto); everything else is
skipped by wire type, so unknown fields never break decoding.
"""

from __future__ import annotations

from typing import Any

MAGIC = b"k8s\x00"

# message -> field number -> (name, kind); kind: "str", "int", "strs" (repeated string) or a message name
_SCHEMA: dict[str, dict[int, tuple[str, str]]] = {
    "Unknown": {1: ("typeMeta", "TypeMeta"), 2: ("raw", "bytes")},
    "TypeMeta": {1: ("apiVersion", "str"), 2: ("kind", "str")},
    "SelfSubjectAccessReviewSpec": {1: ("resourceAttributes", "ResourceAttributes"),
                                    2: ("nonResourceAttributes", "NonResourceAttributes")},
    "SubjectAccessReviewSpec": {1: ("resourceAttributes", "ResourceAttributes"),
                                2: ("nonResourceAttributes", "NonResourceAttributes"), 3: ("user", "str"),
                                4: ("groups", "strs"), 6: ("uid", "str")},
    "ResourceAttributes": {1: ("namespace", "str"), 2: ("verb", "str"), 3: ("group", "str"), 4: ("version", "str"),
                           5: ("resource", "str"), 6: ("subresource", "str"), 7: ("name", "str")},
    "NonResourceAttributes": {1: ("path", "str"), 2: ("verb", "str")},
    "SelfSubjectRulesReviewSpec": {1: ("namespace", "str")},
    "TokenRequestSpec": {1: ("audiences", "strs"), 3: ("boundObjectRef", "BoundObjectReference"),
                         4: ("expirationSeconds", "int")},
    "BoundObjectReference": {1: ("kind", "str"), 2: ("apiVersion", "str"), 3: ("name", "str"), 4: ("uid", "str")},
    "TokenReviewSpec": {1: ("token", "str"), 2: ("audiences", "strs")},
}
_SPECS = {"SelfSubjectAccessReview": "SelfSubjectAccessReviewSpec", "SubjectAccessReview": "SubjectAccessReviewSpec",
          "LocalSubjectAccessReview": "SubjectAccessReviewSpec",
          "SelfSubjectRulesReview": "SelfSubjectRulesReviewSpec", "TokenRequest": "TokenRequestSpec",
          "TokenReview": "TokenReviewSpec", "SelfSubjectReview": ""}
for _kind, _spec in _SPECS.items():  # each object: metadata=1 (skipped), spec=2
    _SCHEMA[f"Object:{_kind}"] = {2: ("spec", _spec)} if _spec else {}


class ProtobufError(ValueError):
    pass


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _message(data: bytes, schema: str) -> dict[str, Any]:
    fields = _SCHEMA.get(schema, {})
    out: dict[str, Any] = {}
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            if number in fields:
                out[fields[number][0]] = value
        elif wire == 2:
            length, pos = _varint(data, pos)
            chunk = data[pos:pos + length]
            if len(chunk) != length:
                raise ProtobufError("truncated field")
            pos += length
            if number in fields:
                name, kind = fields[number]
                if kind == "bytes":
                    out[name] = chunk
                elif kind == "str":
                    out[name] = chunk.decode("utf-8")
                elif kind == "strs":
                    out.setdefault(name, []).append(chunk.decode("utf-8"))
                else:
                    out[name] = _message(chunk, kind)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
    return out


def decode(data: bytes, expected_kind: str) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded review or TokenRequest; ProtobufError if it is not one."""
    if not data.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf magic prefix")
    envelope = _message(data[len(MAGIC):], "Unknown")
    type_meta = envelope.get("typeMeta") or {}
    kind = type_meta.get("kind") or expected_kind
    if kind not in _SPECS:
        raise ProtobufError(f"protobuf is not supported for kind {kind}")
    body = _message(envelope.get("raw") or b"", f"Object:{kind}")
    body.update(kind=kind, apiVersion=type_meta.get("apiVersion", ""))
    return body


def supports(kind: str) -> bool:
    return kind in _SPECS
