"""Closedness: the labels and patterns a closed struct allows (one group per closed value that contributed),
pattern and optional-field constraints reaching a struct's fields, and fields a closed struct does not allow."""

from __future__ import annotations

from typing import Any

from velashard.cue.labels import is_regular, label_text
from velashard.cue.values import Bottom, unify_scalar
from velashard.cue.vertex import VertexBase


class Group:
    """A closedness group: the labels (and patterns) that the struct literals of one closed value allow."""
    __slots__ = ("labels", "patterns", "open", "closed")

    def __init__(self) -> None:
        self.labels: set = set()
        self.patterns: list = []
        self.open = False
        self.closed = False

    def allows(self, key: str) -> bool:
        if self.open or key in self.labels:
            return True
        return any(pattern_matches(p, key) for p in self.patterns)


def pattern_matches(match: Any, key: Any) -> bool:
    if type(key) is int or not is_regular(key):
        return False
    return type(unify_scalar(match, label_text(key))) is not Bottom



class Closedness(VertexBase):
    """evaluator.Vertex's methods for patterns and closed structs."""
    __slots__ = ()

    def _apply_patterns(self) -> None:
        """Optional fields' constraints, then pattern constraints, reach fields after the fields' own
        conjuncts (CUE v0.4 applies them last, which shows in the order of exported fields)."""
        if self.optionals:
            optionals = self.optionals
            self.optionals = []
            for arc, c in optionals:
                arc.add(c)
        patterns = self.patterns
        n = len(patterns)
        for key, arc in list(self.arcs.items()):
            seen = arc.pat_seen
            if seen < n and type(key) is not int:
                arc.pat_seen = n
                for p in patterns[seen:]:
                    if pattern_matches(p.match, key):
                        arc.add(p.conjunct(key))

    def _check_closed(self) -> None:
        closed = [g for g in self.groups.values() if g.closed and not g.open]
        if not closed:
            return
        for key, arc in self.arcs.items():
            if type(key) is int or not is_regular(key):
                continue
            for g in closed:
                if not g.allows(key):
                    arc.not_allowed = Bottom("field not allowed", "closed")
                    break
