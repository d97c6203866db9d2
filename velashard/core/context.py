"""What one reconcile of one Application knows: a private copy of the app, the definitions it renders with,
the client that acts as the app's author, what the author was refused, and the live objects it has read or
written so far (so a step never reads again what an earlier step saw)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from velashard.core.definitions import Definitions
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.resources import Resource

ObjectKey = tuple[str, str, "str | None", str]  # plural, group, namespace, name


@dataclass
class ReconcileContext:
    app: dict[str, Any]
    definitions: Definitions
    author: KubeClient  # everything the app makes the cluster do goes through this client (see core/authors.py)
    objects: dict[ObjectKey, dict[str, Any]] = field(default_factory=dict)
    forbidden: list[str] = field(default_factory=list)  # every refusal the author met, in order
    authors_reads: set[ObjectKey] = field(default_factory=set)  # objects read past the cache, as the author
    absent: set[tuple[str, str, str, str]] = field(default_factory=set)  # apiVersion, kind, namespace, name

    @property
    def name(self) -> str:
        return self.app["metadata"]["name"]

    @property
    def namespace(self) -> str:
        return self.app["metadata"]["namespace"]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def recall(self, res: Resource, name: str, namespace: str | None) -> dict[str, Any] | None:
        return self.objects.get((res.plural, res.group, namespace, name))

    def saw(self, res: Resource, obj: dict[str, Any], as_author: bool = False) -> None:
        meta = obj["metadata"]
        key = (res.plural, res.group, meta.get("namespace"), meta["name"])
        self.objects[key] = obj
        if as_author:
            self.authors_reads.add(key)

    def missed(self, res: Resource, name: str, namespace: str | None) -> None:
        """An object looked for in a cache and not found (core/settled.py counts its absence as a read)."""
        self.absent.add((res.api_version, res.kind, namespace or "", name))

    def read_as_author(self, res: Resource, name: str, namespace: str | None) -> bool:
        return (res.plural, res.group, namespace, name) in self.authors_reads


def noting_refusals(forbidden: list[str]) -> Callable[[errors.Forbidden], None]:
    """The author's client's callback for refusals: each message added to `forbidden` (a context's) once. Not the
    context's own method: the context holds the client, and a client holding the context back made a cycle, so that
    every reconcile's context (the app, its definitions, what it read) waited for the cyclic collector instead of
    being freed when the reconcile ended (2 KiB per app of a converging shard held until a full collection)."""
    def refused(err: errors.Forbidden) -> None:
        if err.message not in forbidden:
            forbidden.append(err.message)
    return refused
