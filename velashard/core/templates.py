"""Definitions' CUE templates: compiled once per text (so once per definition generation) and shared by every
evaluation and thread; the context KubeVela gives them."""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

from cachetools import LRUCache

from velashard.cue.api import Program, compile_sources
from velashard.cue.errors import CueError

_PROGRAMS: LRUCache = LRUCache(maxsize=512)
_DECLARED = "context: _\nparameter: _\n"
_LOCK = threading.Lock()

# What KubeVela reports for a cluster whose version is not known; the controller passes the real one.
DEFAULT_CLUSTER_VERSION = {"major": "1", "minor": 32, "gitVersion": "v1.32.0", "platform": "linux/amd64"}


def compile_template(text: str, name: str = "template.cue") -> Program:
    """The compiled program of a template (cached by its text); CueError names line and column. `context` and
    `parameter` are declared beside the template (in a file of their own, so that positions stay the
    template's), as KubeVela does, so that references to them resolve; the values come with each evaluation."""
    key = hashlib.sha256(text.encode()).digest()
    with _LOCK:  # an LRU cache reorders itself on reads: workers share it
        found = _PROGRAMS.get(key)
    if found is None:
        try:
            found = compile_sources({name: text, "velashard-context.cue": _DECLARED})
        except CueError as err:
            found = err
        with _LOCK:
            _PROGRAMS[key] = found
    if isinstance(found, CueError):
        raise found
    return found


def template_cache_info() -> tuple[int, int]:
    return len(_PROGRAMS), _PROGRAMS.maxsize



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
