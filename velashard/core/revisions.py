"""Application revisions: the hash that says something changed (the app's spec and the definitions it uses), the
ApplicationRevision records, and pruning."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from velashard.apis.oam import API_VERSION, APPLICATION_REVISIONS
from velashard.core.echoes import OwnWrites
from velashard.core.ownership import dependent_labels
from velashard.core.definitions import Definitions, version
from velashard.core.usage import COMPONENT, POLICY, TRAIT, uses
from velashard.kube import errors
from velashard.kube.client import KubeClient


def app_hash(spec: dict[str, Any], definitions: Any) -> str:
    """Hash of what determines the rendered output and the run: the app's spec and the definitions it uses
    (core/usage.py `used_definitions`)."""
    payload = json.dumps({"spec": spec, "definitions": definitions}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


_LEGACY_KINDS = {COMPONENT: "c", TRAIT: "t", POLICY: "p"}


def legacy_current(revision: dict[str, Any], spec: dict[str, Any], defs: Definitions) -> bool:
    """Whether a revision recorded before revisions covered only the definitions an app uses (its `definitions`
    then named every definition's uid and generation, and its hash covered them all) still describes the app:
    the same spec, and the same generation of each component, trait and policy definition it uses. Such an app
    keeps its revision, so an upgrade of the controller starts no workflow again."""
    recorded = (revision.get("spec") or {}).get("definitions")
    if not isinstance(recorded, str) or app_hash(spec, recorded) != revision["spec"].get("hash"):
        return False
    entries = set(recorded.split(",")) if recorded else set()
    tables = {COMPONENT: defs.components, TRAIT: defs.traits, POLICY: defs.policies}
    for kind, name in uses(spec):
        if kind not in tables:
            continue  # workflow steps: the old hash did not cover them
        found, prefix = tables[kind].get(name), f"{_LEGACY_KINDS[kind]}/{name}@"
        if found is None:
            if any(e.startswith(prefix) for e in entries):
                return False
        elif f'{prefix}{found["metadata"].get("uid", "")}:{version(found)}' not in entries:
            return False
    return True


def revision_name(app_name: str, revision: int) -> str:
    return f"{app_name}-v{revision}"


def revisions_to_prune(revisions: list[dict[str, Any]], limit: int, keep: str) -> list[str]:
    """Names of the oldest revisions beyond `limit`, never the one named `keep` (the live one)."""
    ordered = sorted(revisions, key=lambda r: (r.get("spec") or {}).get("revision", 0))
    excess = len(ordered) - limit
    return [r["metadata"]["name"] for r in ordered if r["metadata"]["name"] != keep][:max(0, excess)]


def revision_number(app: dict[str, Any], existing: list[dict[str, Any]], digest: str) -> int:
    """The revision recorded for `digest` (a status write may have failed after recording it), else the next."""
    for rev in existing:
        if (rev.get("spec") or {}).get("hash") == digest:
            return int(rev["spec"]["revision"])
    latest = (app.get("status") or {}).get("latestRevision", {}).get("revision", 0)
    return max([latest] + [(r.get("spec") or {}).get("revision", 0) for r in existing]) + 1


def revision_body(app: dict[str, Any], revision: int, digest: str, definitions: dict[str, Any]) -> dict[str, Any]:
    meta = app["metadata"]
    return {"apiVersion": API_VERSION, "kind": "ApplicationRevision",
            "metadata": {"name": revision_name(meta["name"], revision), "namespace": meta["namespace"],
                         "labels": dependent_labels(app),
                         "ownerReferences": [{"apiVersion": API_VERSION, "kind": "Application",
                                              "name": meta["name"], "uid": meta["uid"], "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": {"revision": revision, "hash": digest, "definitions": definitions,
                     "application": {"metadata": {"name": meta["name"], "namespace": meta["namespace"],
                                                  "labels": meta.get("labels") or {},
                                                  "annotations": meta.get("annotations") or {}},
                                     "spec": app.get("spec") or {}}}}


class Revisions:
    """Reads an app's revisions from the (label-selected) cache, records new ones and prunes old ones."""

    def __init__(self, client: KubeClient, informer: Any, limit: int, own_writes: OwnWrites | None = None):
        self.client, self.informer, self.limit = client, informer, limit
        self.own_writes = own_writes  # the revision's own event then wakes no one

    def of(self, app: dict[str, Any]) -> list[dict[str, Any]]:
        return [r for r in self.informer.store.by_index("app", app["metadata"]["name"])
                if r["metadata"].get("namespace") == app["metadata"]["namespace"]]

    def number(self, app: dict[str, Any], digest: str) -> int:
        return revision_number(app, self.of(app), digest)

    def still_current(self, app: dict[str, Any], name: str, defs: Definitions) -> bool:
        """Whether the app's latest revision, `name`, recorded before revisions covered only the definitions an app
        uses, still describes it (see `legacy_current`)."""
        found = next((r for r in self.of(app) if r["metadata"]["name"] == name), None)
        return found is not None and legacy_current(found, app.get("spec") or {}, defs)

    def record(self, app: dict[str, Any], revision: int, digest: str, definitions: dict[str, Any]) -> None:
        body = revision_body(app, revision, digest, definitions)
        name, namespace = body["metadata"]["name"], app["metadata"]["namespace"]
        try:
            created = self.client.create(APPLICATION_REVISIONS, body)
            if self.own_writes is not None:
                self.own_writes.wrote(created)
        except errors.AlreadyExists:
            pass  # written by an earlier attempt of this same reconcile
        existing = {r["metadata"]["name"]: r for r in self.of(app)}
        existing[name] = body  # the cache may or may not have seen it yet
        for old in revisions_to_prune(list(existing.values()), self.limit, keep=name):
            self.delete(old, namespace)

    def delete_all(self, app: dict[str, Any]) -> None:
        for rev in self.of(app):
            self.delete(rev["metadata"]["name"], app["metadata"]["namespace"])

    def delete(self, name: str, namespace: str) -> None:
        try:
            self.client.delete(APPLICATION_REVISIONS, name, namespace)
        except errors.NotFound:
            pass
