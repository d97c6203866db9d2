"""Bounds on one evaluation (steps, string and list sizes, disjunction combinations, nesting, wall-clock time)
and the per-thread counters that enforce them, so that no input can hang or exhaust the process."""

from __future__ import annotations

import threading
import time

from velashard.cue.errors import CueError


class Limits:
    """Bounds on one evaluation, so that no input can hang or exhaust the process."""
    steps = 2_000_000           # conjuncts processed and expressions evaluated
    string_bytes = 4 << 20      # the longest string an operation may build
    list_length = 100_000       # the longest list an operation may build
    disjunction_combinations = 4096
    depth = 400                 # nested vertex evaluations (reference chains, structural recursion)
    # Wall-clock seconds one evaluation may take, whatever it spends them on: checked as steps are counted and
    # after every builtin call, so a slow builtin ends the evaluation right after it returns (each is linear
    # or bounded by the sizes above: regular expressions are RE2's).
    seconds = 5.0


class LimitExceeded(CueError):
    def __init__(self, message: str) -> None:
        super().__init__(message, "limit")


class _Ctx(threading.local):
    def __init__(self) -> None:
        self.steps = 0
        self.depth = 0
        self.copying: set = set()
        self.limits = Limits
        self.packages: dict = {}  # the evaluation's own copy of each SourcePackage it imports
        self.deadline = float("inf")  # time.monotonic() when the evaluation must stop


_CHECK_EVERY = 64  # steps between two looks at the clock (a look costs about as much as 20 steps)


CTX = _Ctx()


def start() -> None:
    """A new evaluation begins on this thread: its counters from zero, its clock from now."""
    CTX.steps = 0
    CTX.depth = 0
    CTX.copying = set()
    CTX.deadline = time.monotonic() + CTX.limits.seconds


def step() -> None:
    CTX.steps += 1
    if CTX.steps > CTX.limits.steps:
        raise LimitExceeded(f"evaluation exceeded {CTX.limits.steps} steps (a runaway comprehension or recursion?)")
    if not CTX.steps % _CHECK_EVERY:
        check_time()


def check_time() -> None:
    if time.monotonic() > CTX.deadline:
        raise LimitExceeded(f"evaluation took longer than {CTX.limits.seconds:g} s (stopped)")
