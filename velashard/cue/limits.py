"""Bounds on one evaluation (steps, string and list sizes, disjunction combinations, nesting) and the
per-thread counters that enforce them, so that no input can hang or exhaust the process."""

from __future__ import annotations

import threading

from velashard.cue.errors import CueError


class Limits:
    """Bounds on one evaluation, so that no input can hang or exhaust the process."""
    steps = 2_000_000           # conjuncts processed and expressions evaluated
    string_bytes = 4 << 20      # the longest string an operation may build
    list_length = 100_000       # the longest list an operation may build
    disjunction_combinations = 4096
    depth = 400                 # nested vertex evaluations (reference chains, structural recursion)


class LimitExceeded(CueError):
    def __init__(self, message: str) -> None:
        super().__init__(message, "limit")


class _Ctx(threading.local):
    def __init__(self) -> None:
        self.steps = 0
        self.depth = 0
        self.copying: set = set()
        self.limits = Limits


CTX = _Ctx()


def step() -> None:
    CTX.steps += 1
    if CTX.steps > CTX.limits.steps:
        raise LimitExceeded(f"evaluation exceeded {CTX.limits.steps} steps (a runaway comprehension or recursion?)")
