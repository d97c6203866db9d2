"""Generate velashard/apiserver/http/protobuf_fields_generated.py: the protobuf field numbers of the built-in kinds
the embedded API server decodes from Kubernetes protobuf request bodies.

Reads a checkout of k8s.io/api and k8s.io/apimachinery (their generated.proto for field numbers and
types, their types.go for which Go fields are pointers or lack omitempty, i.e. keep zero values in
JSON) and writes a table of facts in our own format; no .proto or Go file is copied.

    python hack/gen_protobuf_fields.py /path/to/k8s.io/api /path/to/k8s.io/apimachinery > \
        velashard/apiserver/http/protobuf_fields_generated.py
"""

from __future__ import annotations

import os
import pprint
import re
import sys

ROOTS = {
    ("v1", "ConfigMap"): "k8s.io.api.core.v1.ConfigMap", ("v1", "Secret"): "k8s.io.api.core.v1.Secret",
    ("v1", "Namespace"): "k8s.io.api.core.v1.Namespace",
    ("v1", "ServiceAccount"): "k8s.io.api.core.v1.ServiceAccount", ("v1", "Service"): "k8s.io.api.core.v1.Service",
    ("v1", "Pod"): "k8s.io.api.core.v1.Pod",
    ("apps/v1", "Deployment"): "k8s.io.api.apps.v1.Deployment",
    ("apps/v1", "StatefulSet"): "k8s.io.api.apps.v1.StatefulSet",
    ("apps/v1", "DaemonSet"): "k8s.io.api.apps.v1.DaemonSet",
    ("apps/v1", "ReplicaSet"): "k8s.io.api.apps.v1.ReplicaSet",
    ("batch/v1", "Job"): "k8s.io.api.batch.v1.Job", ("batch/v1", "CronJob"): "k8s.io.api.batch.v1.CronJob",
    ("rbac.authorization.k8s.io/v1", "Role"): "k8s.io.api.rbac.v1.Role",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "k8s.io.api.rbac.v1.RoleBinding",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "k8s.io.api.rbac.v1.ClusterRole",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "k8s.io.api.rbac.v1.ClusterRoleBinding",
    ("autoscaling/v1", "Scale"): "k8s.io.api.autoscaling.v1.Scale",
    ("autoscaling/v2", "HorizontalPodAutoscaler"): "k8s.io.api.autoscaling.v2.HorizontalPodAutoscaler",
    ("meta.k8s.io/v1", "DeleteOptions"): "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions",
}
API_PACKAGES = ["core/v1", "apps/v1", "batch/v1", "rbac/v1", "autoscaling/v1", "autoscaling/v2"]
MACHINERY_PACKAGES = ["pkg/apis/meta/v1", "pkg/runtime", "pkg/util/intstr", "pkg/api/resource"]
_FIELD = re.compile(r"^\s*(optional|repeated)?\s*([\w.]+)\s+(\w+)\s*=\s*(\d+)\s*;")
_MAP = re.compile(r"^\s*map<\s*([\w.]+)\s*,\s*([\w.]+)\s*>\s+(\w+)\s*=\s*(\d+)\s*;")
_GO_FIELD = re.compile(r'^\s*(\w+)\s+(\*?)([\w.\[\]*]+)\s+`json:"([\w-]*)(,[^"]*)?"')
SCALARS = {"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "double", "float", "fixed64"}


def parse_proto(text: str) -> tuple[str, dict[str, list[tuple]]]:
    package = re.search(r"^package ([\w.]+);", text, re.M).group(1)
    messages: dict[str, list[tuple]] = {}
    current = None
    for line in text.splitlines():
        start = re.match(r"^message (\w+) \{", line)
        if start:
            current = messages.setdefault(start.group(1), [])
            continue
        if line.startswith("}"):
            current = None
            continue
        if current is None or line.strip().startswith("//"):
            continue
        m = _MAP.match(line)
        if m:
            current.append((int(m.group(4)), m.group(3), "map", m.group(1), m.group(2)))
            continue
        m = _FIELD.match(line)
        if m:
            label, kind, name, number = m.groups()
            current.append((int(number), name, "repeated" if label == "repeated" else "", kind, None))
    return package, messages


def parse_go(text: str) -> dict[tuple[str, str], bool]:
    """(struct, json name) -> whether a zero value is kept in JSON (pointer, or no omitempty)."""
    keep: dict[tuple[str, str], bool] = {}
    struct = None
    for line in text.splitlines():
        start = re.match(r"^type (\w+) struct \{", line)
        if start:
            struct = start.group(1)
            continue
        if line.startswith("}"):
            struct = None
            continue
        m = _GO_FIELD.match(line) if struct else None
        if m:
            _, pointer, _, json_name, options = m.groups()
            keep[(struct, json_name)] = bool(pointer) or "omitempty" not in (options or "")
    return keep


def resolve(kind: str, package: str, known: set[str]) -> str:
    if kind in SCALARS:
        return kind
    if kind.startswith("."):
        return kind[1:]
    return f"{package}.{kind}" if f"{package}.{kind}" in known else kind


def main(api: str, machinery: str) -> None:
    fields: dict[str, tuple[str, list[tuple]]] = {}
    keep: dict[tuple[str, str], bool] = {}
    sources = [(os.path.join(api, p), p) for p in API_PACKAGES] + [(os.path.join(machinery, p), p)
                                                                   for p in MACHINERY_PACKAGES]
    for directory, _ in sources:
        with open(os.path.join(directory, "generated.proto")) as fh:
            package, messages = parse_proto(fh.read())
        for name, body in messages.items():
            fields[f"{package}.{name}"] = (package, body)
        types_go = os.path.join(directory, "types.go")
        if os.path.exists(types_go):
            with open(types_go) as fh:
                for (struct, json_name), value in parse_go(fh.read()).items():
                    keep[(f"{package}.{struct}", json_name)] = value
    known = set(fields)
    table: dict[str, dict[int, tuple]] = {}
    todo = list(ROOTS.values())
    while todo:
        name = todo.pop()
        if name in table or name not in fields:
            continue
        package, body = fields[name]
        entry: dict[int, tuple] = {}
        for number, field, label, kind, value_kind in body:
            kind = resolve(kind, package, known)
            value_kind = resolve(value_kind, package, known) if value_kind else None
            entry[number] = (field, label, kind, value_kind, keep.get((name, field), False))
            for referenced in (kind, value_kind):
                if referenced and referenced not in SCALARS:
                    todo.append(referenced)
        table[name] = entry
    print('"""Protobuf field numbers of the built-in kinds the embedded API server decodes.')
    print()
    print("Generated by hack/gen_protobuf_fields.py from k8s.io/api and k8s.io/apimachinery; do not edit.")
    print("Each message maps a field number to (json name, label, type, map value type, keep zero value).")
    print('"""')
    print()
    print("# flake8: noqa")
    print("ROOTS = " + pprint.pformat(ROOTS, width=120))
    print()
    print("MESSAGES = " + pprint.pformat(dict(sorted(table.items())), width=120))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
