"""Errors of the CUE evaluator: one exception type with a kind, a path and source positions."""

from __future__ import annotations

from dataclasses import dataclass

# Kinds: syntax, conflict (two values that do not unify), incomplete (not concrete or not yet known),
# undefined (a reference or field that does not exist), closed (a field a closed struct does not allow),
# cycle, limit (a resource limit of the evaluator), eval (any other evaluation error).
KINDS = ("syntax", "conflict", "incomplete", "undefined", "closed", "cycle", "limit", "eval")


@dataclass(frozen=True, slots=True)  # compiled programs keep one per AST node
class Pos:
    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class CueError(Exception):
    """A CUE error: `kind` says which class it is, `path` where in the value, `positions` where in the source."""

    def __init__(self, message: str, kind: str = "eval", path: str = "", positions: tuple[Pos, ...] = ()) -> None:
        self.message = message
        self.kind = kind
        self.path = path
        self.positions = positions
        super().__init__(self.render())

    def render(self) -> str:
        head = f"{self.path}: {self.message}" if self.path else self.message
        if not self.positions:
            return head
        return head + ":\n" + "".join(f"    {p}\n" for p in self.positions).rstrip("\n")


class CueSyntaxError(CueError):
    def __init__(self, message: str, pos: Pos) -> None:
        super().__init__(message, "syntax", "", (pos,))
        self.pos = pos
