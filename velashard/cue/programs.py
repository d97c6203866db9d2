"""Compiled programs kept by their sources' text, shared by every evaluation and thread: a text is compiled once,
and one that does not compile keeps its error, so a broken definition is not compiled again at every reconcile."""

from __future__ import annotations

import hashlib
import threading

from cachetools import LRUCache

from velashard.cue.api import Program, compile_sources
from velashard.cue.errors import CueError
from velashard.cue.values import SourcePackage


class ProgramCache:
    """A bounded (least recently used) cache of compile_sources' results, programs and errors alike.

    The key is the sources' texts, in order, and the packages they may import; file names are not in it: they only
    name positions, so a text met again under another name is the program (or error) compiled first."""

    def __init__(self, maxsize: int) -> None:
        self._found: LRUCache = LRUCache(maxsize=maxsize)
        self._lock = threading.Lock()  # an LRU cache reorders itself on reads: threads share it

    def program(self, sources: dict[str, str], packages: dict[str, SourcePackage] | None = None) -> Program:
        """compile_sources(sources, packages), from the cache when these texts were compiled before; CueError
        (the same one each time) when they do not compile."""
        digest = hashlib.sha256()
        for text in sources.values():
            data = text.encode("utf-8", "surrogatepass")
            digest.update(len(data).to_bytes(8, "big"))
            digest.update(data)
        key = (digest.digest(), tuple(sorted((packages or {}).items())))
        with self._lock:
            found = self._found.get(key)
        if found is None:
            try:
                found = compile_sources(sources, packages)
            except CueError as err:
                found = err
            with self._lock:
                self._found[key] = found
        if isinstance(found, CueError):
            raise found
        return found

    def info(self) -> tuple[int, int]:
        """(programs and errors held, the most it holds)."""
        with self._lock:
            return len(self._found), self._found.maxsize


# Definitions' templates (components, traits, policies, workflow steps) and their status programs: a few hundred
# definitions in a cluster, each changing with its generation.
PROGRAMS = ProgramCache(maxsize=1024)


def compile_cached(sources: dict[str, str], packages: dict[str, SourcePackage] | None = None) -> Program:
    """compile_sources through the process's cache of definitions' programs (see ProgramCache)."""
    return PROGRAMS.program(sources, packages)
