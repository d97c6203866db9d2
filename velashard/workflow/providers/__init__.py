"""The CUE packages step templates import (`import "vela/kube"`): each one's schema a `.cue` file (package data)
and its actions a module beside it. `packages()` the compiled schemas by import path, `handler(provider, do)` the
Python that runs an action."""

from __future__ import annotations

import threading

from velashard.cue import SourcePackage, compile_package
from velashard.workflow.providers import (builtin, config, email, http, kube, metrics, multicluster, oam, op,
                                          query, util)
from velashard.workflow.providers.base import Handler, Provider

PROVIDERS: tuple[Provider, ...] = (op.PROVIDER, builtin.PROVIDER, kube.PROVIDER, util.PROVIDER, http.PROVIDER,
                                   email.PROVIDER, metrics.PROVIDER, config.PROVIDER, multicluster.PROVIDER,
                                   oam.PROVIDER, query.PROVIDER, query.LEGACY)
_BY_NAME = {p.name: p for p in PROVIDERS}
_COMPILED: dict[str, SourcePackage] = {}
_LOCK = threading.Lock()


def packages() -> dict[str, SourcePackage]:
    """The importable packages, compiled once per process."""
    with _LOCK:
        if not _COMPILED:
            _COMPILED.update({p.path: compile_package(p.path, p.schema) for p in PROVIDERS})
        return _COMPILED


def provider(name: str) -> Provider | None:
    return _BY_NAME.get(name)


def handler(provider_name: str, do: str) -> Handler | None:
    found = _BY_NAME.get(provider_name)
    return found.handlers.get(do) if found is not None else None
