"""Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) decoded to JSON objects.

The wire format is decoded here (varints, length-delimited fields, fixed 32/64-bit values; a few dozen
lines, smaller than a dependency); the message schemas (field numbers, types, which zero values
JSON keeps) come from `protobuf_fields_generated`, made from k8s.io/api by hack/gen_protobuf_fields.py.
A body is the 4-byte magic `k8s\\x00` and a runtime.Unknown whose typeMeta names the kind and whose
raw bytes are the kind's message.
"""

from __future__ import annotations

import base64
import json
import struct
from datetime import datetime, timezone
from typing import Any

from velashard.apiserver import errors
from velashard.apiserver.http.protobuf_fields_generated import MESSAGES, ROOTS

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
_META = "k8s.io.apimachinery.pkg.apis.meta.v1."
_TIME = {_META + "Time", _META + "MicroTime"}
_INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"
_QUANTITY = "k8s.io.apimachinery.pkg.api.resource.Quantity"
_RAW = "k8s.io.apimachinery.pkg.runtime.RawExtension"
_FIELDS_V1 = _META + "FieldsV1"


class ProtobufError(ValueError):
    pass


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProtobufError("varint too long")


def fields(data: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) in order: ints for varints and fixed values, bytes for the rest."""
    out = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 2:
            size, pos = _varint(data, pos)
            value, pos = data[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire} for field {number}")
        if pos > len(data):
            raise ProtobufError(f"field {number} runs past the end of the message")
        out.append((number, wire, value))
    return out


def _signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def _scalar(kind: str, wire: int, value: Any) -> Any:
    if kind == "string":
        return value.decode("utf-8")
    if kind == "bytes":
        return base64.b64encode(value).decode()
    if kind == "bool":
        return bool(value)
    if kind in ("int32", "int64"):
        return _signed(value, 64)
    if kind in ("uint32", "uint64"):
        return value
    if kind == "double":
        return struct.unpack("<d", value)[0]
    if kind == "float":
        return struct.unpack("<f", value)[0]
    if kind == "fixed64":
        return struct.unpack("<Q", value)[0]
    raise ProtobufError(f"unsupported scalar type {kind}")


def _packed(kind: str, data: bytes) -> list[Any]:
    values, pos = [], 0
    while pos < len(data):
        value, pos = _varint(data, pos)
        values.append(_scalar(kind, 0, value))
    return values


def _value(kind: str, wire: int, value: Any) -> Any:
    if kind in MESSAGES or kind in (_FIELDS_V1, _RAW):
        if wire != 2:
            raise ProtobufError(f"message {kind} must be length-delimited")
        return message(kind, value)
    return _scalar(kind, wire, value)


def _is_zero(value: Any) -> bool:
    return value is None or value == "" or value is False or (value == 0 and not isinstance(value, bool))


def message(name: str, data: bytes) -> Any:
    """The JSON form of message `name` encoded in `data`."""
    if name == _RAW or name == _FIELDS_V1:
        raw = dict((n, v) for n, _, v in fields(data)).get(1, b"")
        return json.loads(raw) if raw else None
    decoded = {n: v for n, _, v in fields(data)} if name in _TIME or name in (_INT_OR_STRING, _QUANTITY) else None
    if name in _TIME:
        seconds, nanos = _signed(decoded.get(1, 0), 64), decoded.get(2, 0)
        if not seconds and not nanos:
            return None
        moment = datetime.fromtimestamp(seconds, timezone.utc)
        if name.endswith("MicroTime"):
            return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos // 1000:06d}Z"
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    if name == _INT_OR_STRING:
        return decoded.get(3, b"").decode() if decoded.get(1, 0) == 1 else _signed(decoded.get(2, 0), 64)
    if name == _QUANTITY:
        return decoded.get(1, b"").decode()
    schema = MESSAGES.get(name)
    if schema is None:
        raise ProtobufError(f"no protobuf schema for {name}")
    out: dict[str, Any] = {}
    keep: dict[str, bool] = {}
    for number, wire, value in fields(data):
        field = schema.get(number)
        if field is None:
            raise ProtobufError(f"unknown field number {number} in {name.rsplit('.', 1)[-1]}")
        json_name, label, kind, value_kind, keep_zero = field
        keep[json_name] = keep_zero
        if label == "map":
            entry = {n: v for n, _, v in fields(value)}
            key = _scalar(kind, 2, entry.get(1, b""))
            out.setdefault(json_name, {})[key] = _value(value_kind, 2, entry[2]) if 2 in entry else \
                ("" if value_kind in ("string", "bytes") else None)
        elif label == "repeated":
            items = out.setdefault(json_name, [])
            if wire == 2 and kind not in MESSAGES and kind not in ("string", "bytes") and kind not in _TIME:
                items.extend(_packed(kind, value))
            else:
                items.append(_value(kind, wire, value))
        else:
            out[json_name] = _value(kind, wire, value)
    # proto2 writes every non-pointer field; JSON leaves out zero values of omitempty ones
    return {k: v for k, v in out.items() if not (_is_zero(v) and not (keep[k] and v is not None))}


def decode(data: bytes) -> dict[str, Any]:
    """A request body in the `k8s\\x00` envelope as the JSON object it encodes."""
    if not data.startswith(MAGIC):
        raise ProtobufError("the body does not start with the Kubernetes protobuf magic number")
    unknown = {n: v for n, _, v in fields(data[len(MAGIC):])}
    type_meta = {n: v.decode() for n, _, v in fields(unknown.get(1, b""))}
    api_version, kind = type_meta.get(1, ""), type_meta.get(2, "")
    if unknown.get(3):
        raise ProtobufError(f"unsupported content encoding {unknown[3].decode()!r}")
    root = ROOTS.get((api_version, kind))
    if root is None:
        raise errors.APIError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format "
                              f"({MEDIA_TYPE} for {kind or 'an unnamed kind'} {api_version}) - accepted media "
                              f"types include: application/json, application/yaml")
    obj = message(root, unknown.get(2, b""))
    return {"apiVersion": api_version, "kind": kind, **obj}


def _key(number: int, wire: int) -> bytes:
    return _put_varint((number << 3) | wire)


def _put_varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _delimited(number: int, payload: bytes) -> bytes:
    return _key(number, 2) + _put_varint(len(payload)) + payload


def _parse_time(text: str) -> tuple[int, int]:
    base, _, fraction = text.rstrip("Z").partition(".")
    moment = datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    nanos = int((fraction + "000000000")[:9]) if fraction else 0
    return int(moment.timestamp()), nanos


def _encode_value(number: int, kind: str, value: Any) -> bytes:
    if kind == "string":
        return _delimited(number, str(value).encode())
    if kind == "bytes":
        return _delimited(number, base64.b64decode(value))
    if kind in ("bool", "int32", "int64", "uint32", "uint64"):
        return _key(number, 0) + _put_varint(int(value))
    if kind == "double":
        return _key(number, 1) + struct.pack("<d", float(value))
    if kind == "float":
        return _key(number, 5) + struct.pack("<f", float(value))
    return _delimited(number, encode_message(kind, value))


def encode_message(name: str, obj: Any) -> bytes:
    """The protobuf encoding of the JSON form `obj` of message `name` (fields it does not know are left out)."""
    if name in (_RAW, _FIELDS_V1):
        return _delimited(1, json.dumps(obj, separators=(",", ":")).encode())
    if name in _TIME:
        seconds, nanos = _parse_time(obj)
        return _key(1, 0) + _put_varint(seconds) + (_key(2, 0) + _put_varint(nanos) if nanos else b"")
    if name == _INT_OR_STRING:
        if isinstance(obj, str):
            return _key(1, 0) + _put_varint(1) + _key(2, 0) + _put_varint(0) + _delimited(3, obj.encode())
        return _key(1, 0) + _put_varint(0) + _key(2, 0) + _put_varint(int(obj)) + _delimited(3, b"")
    if name == _QUANTITY:
        return _delimited(1, str(obj).encode())
    out = bytearray()
    for number, (json_name, label, kind, value_kind, _) in sorted(MESSAGES[name].items()):
        value = obj.get(json_name) if isinstance(obj, dict) else None
        if value is None:
            continue
        if label == "map":
            for key in sorted(value):
                entry = _encode_value(1, kind, key)
                if value[key] is not None:
                    entry += _encode_value(2, value_kind, value[key])
                out += _delimited(number, entry)
        elif label == "repeated":
            for item in value:
                out += _encode_value(number, kind, item)
        else:
            out += _encode_value(number, kind, value)
    return bytes(out)


def encodable(api_version: str, kind: str) -> bool:
    return (api_version, kind) in ROOTS


def encode(obj: dict[str, Any]) -> bytes:
    """An object of a kind in ROOTS in the `k8s\\x00` envelope."""
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    type_meta = _delimited(1, api_version.encode()) + _delimited(2, kind.encode())
    raw = encode_message(ROOTS[(api_version, kind)], obj)
    return MAGIC + _delimited(1, type_meta) + _delimited(2, raw) + _delimited(3, b"") + _delimited(4, b"")
