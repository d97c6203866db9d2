"""What a vertex is made of: conjuncts (an expression in its environment, or a value), plain data read lazily,
and the vertex's own fields (arcs, scalar part, closedness groups, patterns, disjunctions) with its path.

The class that evaluates is `evaluator.Vertex`: this base, with the methods of `closedness.py`, `settle.py`
and `disjunctions.py` and unification in `evaluator.py`. Those methods make new vertices with `type(self)`,
so that every vertex is an `evaluator.Vertex`, and reach unification through `expand` and `add`.
"""

from __future__ import annotations

from collections import deque
from decimal import Decimal
from typing import Any

from velashard.cue.values import NULL, Bottom

NEW, EXPANDING, DONE = 0, 1, 2
SCALAR, STRUCT, LIST = 0, 1, 2


class Conjunct:
    """An expression and the environment (an `evaluator.Env`) its references resolve in, or a value."""
    __slots__ = ("expr", "env", "groups", "closed", "rec", "embed", "value")

    def __init__(self, expr: Any, env: Any, groups: tuple = (), closed: bool = False, rec: bool = False,
                 embed: bool = False, value: Any = None) -> None:
        self.expr, self.env, self.groups, self.closed, self.rec, self.embed, self.value = \
            expr, env, groups, closed, rec, embed, value

    def with_expr(self, expr: Any) -> "Conjunct":
        return Conjunct(expr, self.env, self.groups, self.closed, self.rec, self.embed, None)


class Data:
    """Plain data (a dict or list from JSON) unified as a value, turned into arcs only where evaluation
    reaches: a template that reads three fields of a large live object builds vertices for those alone."""
    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj


class Fill:
    """Plain data unified at a path below the vertex it is added to, as KubeVela's FillPath puts an action's
    result back into the step's value; the path holds the keys as arcs store them (hidden `_x`, `#x`)."""
    __slots__ = ("path", "obj")

    def __init__(self, path: tuple, obj: Any) -> None:
        self.path, self.obj = path, obj


def data_value(x: Any) -> Any:
    """A plain value as a conjunct's value: containers stay lazy, null and floats become CUE atoms."""
    t = type(x)
    if t is dict or t is list:
        return Data(x)
    if x is None:
        return NULL
    if t is float:
        return Decimal(repr(x))
    return x


class VertexBase:
    """A vertex's fields (see the module's docstring for the class that evaluates)."""
    __slots__ = ("ctx", "parent", "label", "conjuncts", "arcs", "state", "kind", "scalar", "is_struct", "lists",
                 "list_open", "structs", "groups", "patterns", "comprs", "disjs", "choices", "choice_i", "pending",
                 "err", "alts", "regular", "optional", "required", "not_allowed", "pat_seen", "optionals", "docs", "tails")

    def __init__(self, parent: "VertexBase | None", label: Any, ctx: Any = None) -> None:
        # the evaluation this vertex belongs to (a limits.Context): its parent's, or given to a vertex without one
        self.ctx = ctx if ctx is not None else parent.ctx
        self.parent = parent
        self.label = label
        self.conjuncts: list[Conjunct] = []
        self.arcs: dict = {}
        self.state = NEW
        self.kind = SCALAR
        self.scalar: Any = None
        self.is_struct = 0  # 2: a struct for sure; 1: only embedding literals so far (see _finish)
        self.lists: list = []
        self.list_open = False
        self.structs: list = []
        self.groups: dict = {}
        self.patterns: list = []  # evaluator.Pattern
        self.comprs: deque | None = None  # comprehensions waiting for the fields before them (made when needed)
        self.disjs: list = []
        self.choices: list | None = None
        self.choice_i = 0
        self.pending: deque | None = None  # conjuncts a disjunction's chosen alternatives add (made when needed)
        self.err: Bottom | None = None
        self.alts: list | None = None
        self.regular = True
        self.optional = False
        self.required = False
        self.not_allowed: Bottom | None = None
        self.pat_seen = 0
        self.docs: list | None = None  # comment groups of the fields that declared this arc (for +patchKey tags)
        self.tails: list | None = None  # an open list's `...T` conjuncts (to describe its element type)
        self.optionals: list = []

    def __repr__(self) -> str:
        return f"Vertex({self.path()})"

    # ---- paths -------------------------------------------------------------------------------
    def path(self) -> str:
        parts = []
        v: VertexBase | None = self
        while v is not None and v.label is not None:
            label = v.label
            if type(label) is int:
                parts.append(str(label))
            else:
                parts.append(label if label.isidentifier() or label[:1] in "#_" else f'"{label}"')
            v = v.parent
        return ".".join(reversed(parts))

    def mark(self, constraint: str) -> None:
        if constraint == "":
            self.regular = True
        elif constraint == "!":
            self.required = True
        else:
            self.optional = True

    def expand(self) -> None:
        """Process the conjuncts (unification: `evaluator.Vertex`)."""
        raise NotImplementedError

    def add(self, c: Conjunct) -> None:
        """Unify one more conjunct (unification: `evaluator.Vertex`)."""
        raise NotImplementedError


_CLEARED = ("parent", "conjuncts", "lists", "structs", "groups", "patterns", "comprs", "disjs", "choices", "pending",
            "alts", "optionals", "tails", "docs", "scalar", "err", "not_allowed")


def release(roots: list) -> None:
    """Break the reference cycles of a finished evaluation's vertices (a child points to its parent, a conjunct's
    environment to the vertex it belongs to), so that reference counting frees them as soon as the last reference
    goes, instead of the cyclic collector: a load-test app's render leaves some 3,000 such objects, and collecting
    them was a third of the render's CPU (and made full collections of a large shard's heap frequent)."""
    stack = list(roots)
    while stack:
        v = stack.pop()
        if v.arcs is None:
            continue  # released already (shared by two parents, or reached twice)
        stack.extend(v.arcs.values())
        if v.alts:
            stack.extend(a for a, _ in v.alts if isinstance(a, VertexBase))
        for name in _CLEARED:
            setattr(v, name, None)
        v.arcs = None
