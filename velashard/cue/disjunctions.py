"""Disjunctions: the terms of `a | *b` with their default marks, how defaults combine, and a vertex's
disjunctions resolved by evaluating one copy of it per combination of alternatives (erroneous ones drop out,
equal ones merge, defaults kept by flag)."""

from __future__ import annotations

import itertools
from collections import deque
from typing import Any

from velashard.cue import ast
from velashard.cue.limits import LimitExceeded
from velashard.cue.values import TOP, Bottom, same_value
from velashard.cue.vertex import LIST, SCALAR, Conjunct, VertexBase


def flatten_disjunction(x: Any) -> list[tuple[Any, str]]:
    """The terms of `a | *b | (c | *d)` with the rule that gives each its default flags (values.term_flags):
    in a marked disjunction a marked term is "T" and an unmarked one "F"; in an unmarked one "own". A
    parenthesised disjunction keeps its own marks where the spec says so (M2, D2)."""
    terms: list[Any] = []
    _collect(x, terms)
    marked = any(type(e) is ast.Unary and e.op == "*" for e in terms)
    out: list[tuple[Any, str]] = []
    for e in terms:
        is_marked = type(e) is ast.Unary and e.op == "*"
        inner = e.x if is_marked else e
        while type(inner) is ast.Paren:
            inner = inner.x
        if type(inner) is ast.Binary and inner.op == "|":
            sub = flatten_disjunction(inner)
            sub_marked = any(r == "T" for _, r in sub)
            if marked:
                if is_marked:
                    out.extend(sub if sub_marked else [(se, "T") for se, _ in sub])
                else:
                    out.extend((se, "F") for se, _ in sub)
            else:
                out.extend(sub)
        else:
            out.append((inner, ("T" if is_marked else "F") if marked else "own"))
    return out


def _collect(x: Any, out: list) -> None:
    if type(x) is ast.Binary and x.op == "|":
        _collect(x.x, out)
        _collect(x.y, out)
    else:
        out.append(x)


def combine_defaults(flags: list[bool]) -> bool:
    """An alternative is a default if it is one in every disjunction that has defaults, and some has."""
    return bool(flags) and all(flags)


def add_vertex_alt(results: list, v: VertexBase, default: bool) -> None:
    for i, (w, d) in enumerate(results):
        if vertices_equal(v, w):
            results[i] = (w, d or default)
            return
    results.append((v, default))


def vertices_equal(a: VertexBase, b: VertexBase) -> bool:
    a.expand()
    b.expand()
    if a.kind != b.kind or (a.err is None) != (b.err is None):
        return False
    if a.alts is not None or b.alts is not None:
        return False
    if a.kind == SCALAR:
        sa, sb = a.scalar if a.scalar is not None else TOP, b.scalar if b.scalar is not None else TOP
        return same_value(sa, sb)
    ka = [k for k, v in a.arcs.items() if v.regular]
    kb = [k for k, v in b.arcs.items() if v.regular]
    if set(ka) != set(kb):  # `"#a"` and `#a` are two labels
        return False
    if a.kind == LIST and a.list_open != b.list_open:
        return False
    return all(vertices_equal(a.arcs[k], b.arcs[k]) for k in ka)


def deep_error(v: VertexBase, depth: int = 0) -> Bottom | None:
    """The first error (not merely incomplete) in v or its regular fields."""
    v.expand()
    if v.not_allowed is not None:
        return v.not_allowed
    if v.err is not None:
        return None if v.err.incomplete else v.err
    if v.alts is not None:
        return None
    if depth > v.ctx.limits.depth:
        raise LimitExceeded("value nested too deeply (a structural cycle?)")
    for arc in list(v.arcs.values()):
        if arc.regular:
            e = deep_error(arc, depth + 1)
            if e is not None:
                return e
    return None



class Disjunctions(VertexBase):
    """evaluator.Vertex's methods that choose among and resolve its disjunctions."""
    __slots__ = ()

    def _choose(self, alts: list, c: Conjunct) -> None:
        k = self.choices[self.choice_i]
        self.choice_i += 1
        chosen = alts[k][0]
        if chosen.expr is None:
            chosen = Conjunct(None, None, c.groups, c.closed, c.rec, c.embed, chosen.value)
        if self.pending is None:
            self.pending = deque()
        self.pending.append(chosen)

    def _resolve_disjunctions(self) -> None:
        disjs = self.disjs
        self.disjs = []
        base = list(self.choices or ())
        total = 1
        for alts, _ in disjs:
            total *= len(alts)
        limit = self.ctx.limits.disjunction_combinations
        if total > limit:
            raise LimitExceeded(f"{self.path() or 'value'}: more than {limit} combinations of disjunctions")
        results: list = []
        first_err: Bottom | None = None
        has_marks = [any(d for _, d in alts) for alts, _ in disjs]
        for combo in itertools.product(*[range(len(alts)) for alts, _ in disjs]):
            clone = type(self)(self.parent, self.label, self.ctx)
            clone.conjuncts = self.conjuncts
            clone.regular, clone.optional, clone.required = self.regular, self.optional, self.required
            clone.docs = self.docs
            clone.choices = base + list(combo)
            clone.expand()
            err = deep_error(clone)
            if err is not None:
                if first_err is None:
                    first_err = err
                continue
            # defaults combine as in unification: disjunctions without marks do not restrict
            marked = [disjs[j][0][k][1] for j, k in enumerate(combo) if has_marks[j]]
            if clone.alts is not None:
                inner_marked = any(da for _, da in clone.alts)
                for a, da in clone.alts:
                    add_vertex_alt(results, a, combine_defaults(marked + ([da] if inner_marked else [])))
            else:
                add_vertex_alt(results, clone, combine_defaults(marked))
        if not results:
            self.err = first_err or Bottom("empty disjunction", "conflict")
            self.kind = SCALAR
            return
        if len(results) == 1:
            self._adopt(results[0][0])
            return
        self.alts = results

    def _adopt(self, other: VertexBase) -> None:
        self.arcs = other.arcs
        for arc in self.arcs.values():
            arc.parent = self
        self.kind, self.scalar, self.is_struct = other.kind, other.scalar, other.is_struct
        self.structs, self.groups, self.patterns = other.structs, other.groups, other.patterns
        self.err, self.alts, self.list_open = other.err, other.alts, other.list_open

