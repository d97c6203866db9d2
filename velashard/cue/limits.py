"""Bounds on one evaluation (steps, string and list sizes, disjunction combinations, nesting, wall-clock time)
and the evaluation context that counts against them, so that no input can hang or exhaust the process."""

from __future__ import annotations

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


_CHECK_EVERY = 64  # steps between two looks at the clock (a look costs about as much as 20 steps)


class Context:
    """What one evaluation of a program carries through it, as CUE's OpContext does: its counters against the
    limits and its clock, the reference pairs being copied (a cycle adds nothing), and its own copy of each
    package written in CUE that it imports. An Instance makes one; every vertex of the evaluation holds it, and
    the functions that evaluate expressions take it, so nothing is kept per thread."""
    __slots__ = ("steps", "max_steps", "depth", "copying", "limits", "packages", "deadline")

    def __init__(self) -> None:
        self.limits = Limits
        self.packages: dict = {}  # SourcePackage -> the root vertex of this evaluation's copy
        self.start()

    def start(self) -> None:
        """A new evaluation call begins: its counters from zero, its clock from now."""
        self.steps = 0
        self.max_steps = self.limits.steps
        self.depth = 0
        self.copying: set = set()
        self.deadline = time.monotonic() + self.limits.seconds

    def step(self) -> None:
        n = self.steps = self.steps + 1
        if n > self.max_steps:
            raise LimitExceeded(f"evaluation exceeded {self.max_steps} steps (a runaway comprehension or recursion?)")
        if not n % _CHECK_EVERY:
            self.check_time()

    def check_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise LimitExceeded(f"evaluation took longer than {self.limits.seconds:g} s (stopped)")
