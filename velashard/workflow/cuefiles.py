"""The CUE files velashard/workflow ships as package data: the providers' schemas (providers/<package>.cue) and
the engine's own step templates (steps/<type>.cue). Each is read once per process."""

from __future__ import annotations

import functools
from importlib import resources


@functools.cache
def read(package: str, *path: str) -> str:
    """The text of the file at `path` in the Python package `package` (installed or in a source tree)."""
    return resources.files(package).joinpath(*path).read_text(encoding="utf-8")
