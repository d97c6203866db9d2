"""A workflow run's context, KubeVela's: the variables steps pass on (outputs, DoVar) and the mutable values
providers keep between reconciles (a suspend's resume time, log sources, the instances deployed), as plain data.
store.py keeps it in the run's ConfigMap; what KubeVela keeps in memory only (a run's backoff tries and next
execution time) is backoff.py's `Memories`."""

from __future__ import annotations

import copy
import json
from typing import Any

from velashard.cue import CueError, compile_sources, plain

VARS_KEY = "vars"  # the ConfigMap key KubeVela keeps the variables under
# What a run may keep in its ConfigMap (the API server takes at most 1 MiB of a ConfigMap's data, and a request
# of about 1.5 MiB): a step that would store more fails instead, and nothing it stored is kept.
MAX_CONTEXT_BYTES = 768 << 10
MAX_MESSAGE = 2048  # characters of a step's message in the app's status


def bounded(message: str, limit: int = MAX_MESSAGE) -> str:
    """A message cut to `limit` characters, saying so."""
    if len(message) <= limit:
        return message
    return message[:limit - 40] + f"... ({len(message) - limit + 40} more characters)"


class WorkflowContext:
    def __init__(self, variables: dict[str, Any] | None = None, mutable: dict[str, str] | None = None):
        self.vars: dict[str, Any] = variables or {}
        self.mutable: dict[str, str] = mutable or {}
        self.modified = False

    # --- variables ---------------------------------------------------------------------------------------

    def get_var(self, path: list[str]) -> Any:
        """The variable at a dotted path's parts; KeyError when it is not set."""
        node: Any = self.vars
        for part in path:
            if not isinstance(node, dict) or part not in node:
                raise KeyError(".".join(path))
            node = node[part]
        return copy.deepcopy(node)

    def has_var(self, path: list[str]) -> bool:
        try:
            self.get_var(path)
        except KeyError:
            return False
        return True

    def set_var(self, value: Any, path: list[str]) -> None:
        node = self.vars
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        if node.get(path[-1], object()) != value:
            node[path[-1]] = copy.deepcopy(value)
            self.modified = True

    # --- mutable values (KubeVela's keys are dotted: "<step id>.resumeTimeStamp") ---------------------------

    def get_mutable(self, *parts: str) -> str:
        return self.mutable.get(".".join(parts), "")

    def set_mutable(self, value: str, *parts: str) -> None:
        key = ".".join(parts)
        if self.mutable.get(key) != value:
            self.mutable[key] = value
            self.modified = True

    def delete_mutable(self, *parts: str) -> None:
        if self.mutable.pop(".".join(parts), None) is not None:
            self.modified = True

    # --- its size, and going back ------------------------------------------------------------------------

    def size(self) -> int:
        """Bytes of its ConfigMap data, about."""
        return len(json.dumps(self.vars, sort_keys=True)) + sum(len(k) + len(v) for k, v in self.mutable.items())

    def state(self) -> tuple[str, dict[str, str], bool]:
        return json.dumps(self.vars), dict(self.mutable), self.modified

    def restore(self, state: tuple[str, dict[str, str], bool]) -> None:
        self.vars, self.mutable, self.modified = json.loads(state[0]), dict(state[1]), state[2]

    # --- as ConfigMap data ---------------------------------------------------------------------------------

    def to_data(self) -> dict[str, str]:
        return {**self.mutable, VARS_KEY: json.dumps(self.vars, sort_keys=True)}

    @classmethod
    def from_data(cls, data: dict[str, str] | None) -> "WorkflowContext":
        data = dict(data or {})
        text = data.pop(VARS_KEY, "") or ""
        return cls(_variables(text), {k: v for k, v in data.items() if isinstance(v, str)})


def _variables(text: str) -> dict[str, Any]:
    """The variables as stored: JSON (ours), or CUE (KubeVela writes them as CUE), else none."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        try:
            value = plain(compile_sources({"vars.cue": text}).evaluate().export())
        except CueError:
            return {}
    return value if isinstance(value, dict) else {}
