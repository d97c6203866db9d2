"""Definitions' CUE templates: compiled once per text (so once per definition generation, by cue/'s program
cache) and shared by every evaluation and thread; the context KubeVela gives them."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from velashard.cue import Program, compile_cached

_DECLARED = "context: _\nparameter: _\n"

# What KubeVela reports for a cluster whose version is not known; the controller passes the real one.
DEFAULT_CLUSTER_VERSION = {"major": "1", "minor": 32, "gitVersion": "v1.32.0", "platform": "linux/amd64"}


def compile_template(text: str, name: str = "template.cue") -> Program:
    """The compiled program of a template (cached by its text); CueError names line and column. `context` and
    `parameter` are declared beside the template (in a file of their own, so that positions stay the
    template's), as KubeVela does, so that references to them resolve; the values come with each evaluation."""
    return compile_cached({name: text, "velashard-context.cue": _DECLARED})


def component_revision(component: dict[str, Any]) -> str:
    """context.revision: a hash of the component's spec, as KubeVela's (it changes only with the component)."""
    return hashlib.sha256(json.dumps(component, sort_keys=True, default=str).encode()).hexdigest()[:16]


def cluster_version_context(version: dict[str, Any] | None) -> dict[str, Any]:
    """context.clusterVersion from the API server's /version (minor as a number, "29+" -> 29)."""
    if not version:
        return dict(DEFAULT_CLUSTER_VERSION)
    digits = "".join(ch for ch in str(version.get("minor", "")) if ch.isdigit())
    return {"major": str(version.get("major", "")), "minor": int(digits) if digits else 0,
            "gitVersion": str(version.get("gitVersion", "")), "platform": str(version.get("platform", ""))}


def app_context(app: dict[str, Any], revision: int, cluster_version: dict[str, Any] | None = None) -> dict[str, Any]:
    """The part of the context every component and trait of an app shares."""
    meta = app["metadata"]
    annotations = dict(meta.get("annotations") or {})
    return {"appName": meta["name"], "namespace": meta.get("namespace", "default"),
            "appRevision": f'{meta["name"]}-v{revision}', "appRevisionNum": revision,
            "appLabels": dict(meta.get("labels") or {}), "appAnnotations": annotations,
            "components": list((app.get("spec") or {}).get("components") or []),
            "publishVersion": annotations.get("app.oam.dev/publishVersion", ""),
            "workflowName": annotations.get("app.oam.dev/workflowName", ""), "replicaKey": "",
            "cluster": "local", "clusterVersion": cluster_version_context(cluster_version)}
