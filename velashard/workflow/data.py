"""Paths like `value.data["a-b"]` or `traits[0].properties.image` (where an input goes, where a variable is) read
and written in dicts and lists."""

from __future__ import annotations

import copy
import re
from typing import Any

_SEGMENT = re.compile(r'\s*(?:\[\s*(?:(\d+)|"((?:[^"\\]|\\.)*)")\s*\]|"((?:[^"\\]|\\.)*)"|([^.\[\]"\s]+))\s*')


def split_path(text: str) -> list[str | int]:
    """`a.b[0]["c-d"]` as ["a", "b", 0, "c-d"]; ValueError when it is not such a path."""
    parts: list[str | int] = []
    pos, n = 0, len(text)
    while pos < n:
        m = _SEGMENT.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f'"{text}" is not a path like a.b[0].c')
        index, bracketed, quoted, name = m.groups()
        parts.append(int(index) if index is not None else bracketed if bracketed is not None else
                     quoted if quoted is not None else name)
        pos = m.end()
        if pos < n:
            if text[pos] == ".":
                pos += 1
                if pos == n:
                    raise ValueError(f'"{text}" ends with a dot')
            elif text[pos] != "[":
                raise ValueError(f'"{text}" is not a path like a.b[0].c')
    if not parts:
        raise ValueError("the path is empty")
    return parts


def get_path(obj: Any, path: list[str | int]) -> Any:
    """The value at a path; KeyError when there is none."""
    for part in path:
        if isinstance(part, int) and isinstance(obj, list) and part < len(obj):
            obj = obj[part]
        elif isinstance(part, str) and isinstance(obj, dict) and part in obj:
            obj = obj[part]
        else:
            raise KeyError(part)
    return obj


def set_path(obj: dict[str, Any], path: list[str | int], value: Any, where: str) -> None:
    """Put `value` into obj at path, in place of what is there (as KubeVela's inputs replace a property),
    making the structs on the way."""
    node: Any = obj
    for i, part in enumerate(path[:-1]):
        nxt = path[i + 1]
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                raise ValueError(f"{where}: no element {part} to set")
            if not isinstance(node[part], (dict, list)):
                node[part] = [] if isinstance(nxt, int) else {}
            node = node[part]
        else:
            if not isinstance(node, dict):
                raise ValueError(f"{where}: {part} is not in a struct")
            if not isinstance(node.get(part), (dict, list)):
                if part in node and node[part] is not None:
                    raise ValueError(f"{where}: {part} is not a struct")
                node[part] = [] if isinstance(nxt, int) else {}
            node = node[part]
    last = path[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or last >= len(node):
            raise ValueError(f"{where}: no element {last} to set")
        node[last] = copy.deepcopy(value)
    else:
        if not isinstance(node, dict):
            raise ValueError(f"{where}: not a struct")
        node[last] = copy.deepcopy(value)

