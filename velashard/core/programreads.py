"""What a status program can read of its context, judged from its text, so that its verdict is kept until
something it can read changes.

A program reaches its context only through the identifier `context`. Where every use of it is a chain of plain
selectors (`.status`) and string-literal indexes (`["app.oam.dev/disable-health-check"]`), the program's result
depends on nothing but the values at the ends of those chains (their absence included): a Deployment's
revision annotation, written by its controller right after each rollout step, does not make a health policy
that reads `.status`, `.spec.replicas` and `.metadata.generation` evaluate again. Any other use (`context`
alone, a chain cut by a computed index, the word in a comment) may read anything: None.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

Path = tuple[str, ...]

_IDENT = r"[A-Za-z_$#][\w$#]*"
_STEP = rf'\s*(?:\.\s*({_IDENT})|\[\s*("(?:[^"\\\n]|\\.)*")\s*\])'
_CHAIN = re.compile(rf"\bcontext\b((?:{_STEP})*)")
_STEPS = re.compile(_STEP)
_ABSENT = "<absent>"


@functools.lru_cache(maxsize=256)
def context_paths(text: str) -> frozenset[Path] | None:
    """The paths of `context` the program's text can read, or None when it may read any."""
    paths = set()
    for chain in _CHAIN.finditer(text):
        path = []
        for step in _STEPS.finditer(chain.group(1)):
            name, literal = step.groups()
            if literal is not None:
                try:
                    literal = json.loads(literal)
                except ValueError:  # an escape CUE knows and JSON does not: give up the chain here
                    break
            path.append(name if name is not None else literal)
        if not path:
            return None
        paths.add(tuple(path))
    return frozenset(paths)


def value_at(root: Any, path: Path) -> Any:
    for key in path:
        if not isinstance(root, dict) or key not in root:
            return _ABSENT
        root = root[key]
    return root


def readable(paths: frozenset[Path] | None, context: dict[str, Any], whole: Any) -> Any:
    """What the program can read of `context`, for a digest: for each path the value at its end, except that a
    path naming a live object whole stands for its identity and version (`whole(path)`), not its content."""
    if paths is None:
        return whole(None)
    return sorted((path, whole(path) if len(path) <= 1 or path[0] == "outputs" and len(path) == 2
                   else value_at(context, path)) for path in paths)
