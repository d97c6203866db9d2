"""A vertex settled once its conjuncts are processed: list conjuncts merged into elements, its kind (scalar,
struct or list) and the conflicts between them, closedness checked."""

from __future__ import annotations

from velashard.cue.closedness import Closedness
from velashard.cue.values import K_LIST, K_STRUCT, TOP, Bottom, fmt, kind_name, value_kind
from velashard.cue.vertex import LIST, SCALAR, STRUCT


class Settling(Closedness):
    """evaluator.Vertex's methods that settle its value."""
    __slots__ = ()

    def _finish(self) -> None:
        if self.lists:
            self._merge_lists()
        if self.err is not None:
            self.kind = SCALAR
            return
        scalar = self.scalar
        if self.is_struct == 1:
            self.is_struct = 2 if (scalar is None or scalar is TOP) and self.kind != LIST else 0
        if self.kind == LIST:
            if self.is_struct:
                self.err = Bottom("conflicting values list and struct", "conflict")
            elif scalar is not None and scalar is not TOP and not (value_kind(scalar) & K_LIST):
                self.err = Bottom(f"conflicting values {fmt(scalar)} and list", "conflict")
            return
        if self.is_struct:
            if scalar is not None and scalar is not TOP and not (value_kind(scalar) & K_STRUCT):
                self.err = Bottom(f"conflicting values {fmt(scalar)} and {{...}} (mismatched types "
                                  f"{kind_name(value_kind(scalar))} and struct)", "conflict")
                return
            self.kind = STRUCT
            self._check_closed()
            return
        self.kind = SCALAR

    def _merge_lists(self) -> None:
        lists = self.lists
        self.lists = []
        n = None
        for elems, tail in lists:
            if tail is None:
                if n is None:
                    n = len(elems)
                elif n != len(elems):
                    self.err = Bottom(f"incompatible list lengths ({n} and {len(elems)})", "conflict")
                    return
        length = n if n is not None else max(len(e) for e, _ in lists)
        for elems, tail in lists:
            if tail is None and len(elems) < length:
                self.err = Bottom(f"incompatible list lengths ({len(elems)} and {length})", "conflict")
                return
        arcs = self.arcs
        for i in range(length):
            arc = arcs.get(i)
            if arc is None:
                arc = arcs[i] = type(self)(self, i)
            for elems, tail in lists:
                if i < len(elems):
                    arc.add(elems[i])
            for elems, tail in lists:  # a list's `...T` constrains after the elements, as a pattern does
                if i >= len(elems) and tail is not None:
                    arc.add(tail)
        self.list_open = n is None
        if self.list_open:
            self.tails = [t for _, t in lists if t is not None] or None
        self.kind = LIST
