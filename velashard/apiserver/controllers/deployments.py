"""The Deployment controller's ReplicaSet bookkeeping, simulated: one ReplicaSet per pod template
revision, with the revision annotations `kubectl rollout history|undo` read.

`plan` is a pure function from a Deployment and the ReplicaSets it controls to the writes the
controller would make; `workloads.WorkloadSimulator` carries them out.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from velashard.patch.copying import copy_json

REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
HASH_LABEL = "pod-template-hash"
# Annotations of the Deployment that are not copied to its ReplicaSets (the controller's own, and kubectl's).
_NOT_COPIED = {REVISION, REVISION_HISTORY, DESIRED_REPLICAS, MAX_REPLICAS,
               "kubectl.kubernetes.io/last-applied-configuration"}
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def template_hash(template: Any) -> str:
    """A short, stable, label-safe hash of a pod template (32 bits of BLAKE2 over its canonical JSON; the
    Deployment controller's is FNV-1a over its own printing, which a Python loop took ~0.1 us a byte for)."""
    text = json.dumps(template, sort_keys=True, separators=(",", ":"))
    value = int.from_bytes(hashlib.blake2s(text.encode(), digest_size=4).digest(), "big")
    out = ""
    while value:
        value, digit = divmod(value, len(_ALPHABET))
        out += _ALPHABET[digit]
    return out or _ALPHABET[0]


def replicaset_name(deploy: dict[str, Any]) -> str:
    """The name of the ReplicaSet of the Deployment's current template."""
    template = _without_nulls((deploy.get("spec") or {}).get("template") or {})
    return f'{deploy["metadata"]["name"]}-{template_hash(template)}'


def _revision(rs: dict[str, Any]) -> int:
    try:
        return int((rs["metadata"].get("annotations") or {}).get(REVISION, "0"))
    except ValueError:
        return 0


def _without_nulls(value: Any) -> Any:
    """The value as the controller's typed comparison sees it: explicit nulls are absent fields."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _without_hash(template: dict[str, Any]) -> dict[str, Any]:
    template = _without_nulls(template)
    labels = (template.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(HASH_LABEL, None)
    return template


def _max_surge(deploy: dict[str, Any], replicas: int) -> int:
    strategy = (deploy.get("spec") or {}).get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return 0
    surge = (strategy.get("rollingUpdate") or {}).get("maxSurge", "25%")
    if isinstance(surge, str) and surge.endswith("%"):
        try:
            return math.ceil(replicas * int(surge[:-1]) / 100)
        except ValueError:
            return 0
    return surge if isinstance(surge, int) else 0


@dataclass
class Plan:
    create: list[dict[str, Any]] = field(default_factory=list)
    update: list[dict[str, Any]] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    deployment_revision: str = ""


def plan(deploy: dict[str, Any], owned: list[dict[str, Any]]) -> Plan:
    """The ReplicaSet writes that bring `owned` in line with `deploy`'s template and replicas."""
    meta, spec = deploy["metadata"], deploy.get("spec") or {}
    template = _without_nulls(spec.get("template") or {})
    replicas = spec.get("replicas", 1)
    result = Plan()
    current = next((rs for rs in owned if _without_hash((rs.get("spec") or {}).get("template") or {}) == template),
                   None)
    top = max((_revision(rs) for rs in owned), default=0)
    copied = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in _NOT_COPIED}
    sizing = {DESIRED_REPLICAS: str(replicas), MAX_REPLICAS: str(replicas + _max_surge(deploy, replicas))}
    if current is None and spec.get("paused") and owned:
        # a paused Deployment rolls nothing out: its newest ReplicaSet stays current until it is resumed
        current = max(owned, key=_revision)
        result.deployment_revision = str(_revision(current))
        return result
    if current is None:
        digest = template_hash(template)
        labels = dict((template.get("metadata") or {}).get("labels") or {}, **{HASH_LABEL: digest})
        selector = copy_json(spec.get("selector") or {})
        selector["matchLabels"] = dict(selector.get("matchLabels") or {}, **{HASH_LABEL: digest})
        rs_template = copy_json(template)
        rs_template.setdefault("metadata", {})["labels"] = labels
        revision = top + 1
        result.create.append({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": replicaset_name(deploy), "namespace": meta.get("namespace", ""),
                         "labels": labels, "annotations": dict(copied, **sizing, **{REVISION: str(revision)}),
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": meta["name"],
                                              "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
            "spec": {"replicas": replicas, "minReadySeconds": spec.get("minReadySeconds", 0),
                     "selector": selector, "template": rs_template}})
    else:
        revision = _revision(current)
        wanted = copy_json(current)
        annotations = dict(wanted["metadata"].get("annotations") or {}, **copied, **sizing)
        if revision < top:  # rolled back to an older template: it becomes the newest revision
            history = [h for h in annotations.get(REVISION_HISTORY, "").split(",") if h] + [str(revision)]
            annotations[REVISION_HISTORY] = ",".join(history)
            revision = top + 1
        annotations[REVISION] = str(revision)
        wanted["metadata"]["annotations"] = annotations
        wanted["spec"] = dict(wanted.get("spec") or {}, replicas=replicas)
        if wanted != current:
            result.update.append(wanted)
    old = sorted((rs for rs in owned if rs is not current), key=_revision)
    for rs in old:
        if (rs.get("spec") or {}).get("replicas", 0) != 0:
            result.update.append(dict(copy_json(rs), spec=dict(rs.get("spec") or {}, replicas=0)))
    limit = spec.get("revisionHistoryLimit", 10)
    if isinstance(limit, int) and len(old) > limit:
        result.delete = [rs["metadata"]["name"] for rs in old[:len(old) - limit]]
    result.deployment_revision = str(revision)
    return result
