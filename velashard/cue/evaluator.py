"""Evaluation by unification.

A value under evaluation is a Vertex: the conjuncts (expression + environment) that were unified
into it, and what they produce once processed: arcs (fields or list elements, each a Vertex of its
own, evaluated lazily), a scalar part, closedness groups, pattern constraints. A reference in a
conjunct adds the referenced vertex's conjuncts (not its value), so `x: #D & {a: 1}` re-evaluates #D
with x's fields in scope, as CUE does. Disjunctions over structs or lists are resolved by evaluating
one copy of the vertex per alternative; erroneous alternatives drop out; defaults are kept by flag.

Unifying a vertex evaluates expressions, and evaluating an expression (a struct, a list, a builtin's result)
builds vertices: both are here. A vertex's fields are `vertex.py`'s; what settles it (`settle.py`,
`closedness.py`) and resolves its disjunctions (`disjunctions.py`) are methods it inherits from modules below
this one; export to plain data is `export_rules.py`.

What one evaluation carries through it (its counters against the limits, its clock, its copies of imported
packages) is its `limits.Context`, as CUE's OpContext: every vertex holds its evaluation's, and the functions
that evaluate expressions take it as their first argument. Nothing is kept per thread.
"""

from __future__ import annotations

from collections import deque
from decimal import Decimal, DivisionByZero, InvalidOperation
from functools import cmp_to_key
from typing import Any, Iterator

from velashard.cue import ast
from velashard.cue.closedness import Group
from velashard.cue.disjunctions import Disjunctions, flatten_disjunction
from velashard.cue.errors import CueError
from velashard.cue.export_rules import to_data
from velashard.cue.labels import Quoted, is_regular, key_of
from velashard.cue.limits import Context, LimitExceeded
from velashard.cue.regex import compile_regex
from velashard.cue.settle import Settling
from velashard.cue.values import (K_BYTES, K_INT, K_LIST, K_NUMBER, K_STRING, K_STRUCT, NULL,
                                  TOP, BasicType, Bottom, Bound, Conj, CueSource, Disj, Func, Package, SourcePackage,
                                  Validator, add_alt,
                                  DECIMAL, default_of, equal_atoms, fmt, is_atom, kind_name, kind_of, make_disj,
                                  term_flags, unify_scalar, value_kind)
from velashard.cue.vertex import DONE, EXPANDING, LIST, NEW, SCALAR, STRUCT, Conjunct, Data, Fill, data_value

_BIG = 10 ** 24
_DEF = "def"  # the closedness group fields of a definition derive theirs from


class Fail(Exception):
    """Carries a Bottom out of a comprehension's clauses."""

    def __init__(self, bottom: Bottom) -> None:
        self.bottom = bottom


class Env:
    __slots__ = ("parent", "vertex", "bindings", "lets")

    def __init__(self, parent: "Env | None", vertex: "Vertex | None", bindings: dict | None = None) -> None:
        self.parent, self.vertex, self.bindings = parent, vertex, bindings
        self.lets: dict | None = None

    def let_value(self, ctx: Context, decl: ast.LetDecl) -> "Vertex":
        if self.lets is None:
            self.lets = {}
        v = self.lets.get(decl)
        if v is None:
            v = Vertex(self.vertex, None, ctx)
            v.conjuncts.append(Conjunct(decl.x, self))
            self.lets[decl] = v
        return v


class Pattern:
    """`[match]: value`; under a definition (`groups` set) what it adds to a field is closed too."""
    __slots__ = ("match", "value", "env", "alias", "groups")

    def __init__(self, match: Any, value: ast.Expr, env: Env, alias: str | None, groups: tuple | None) -> None:
        self.match, self.value, self.env, self.alias, self.groups = match, value, env, alias, groups

    def conjunct(self, key: str) -> Conjunct:
        env = Env(self.env, None, {self.alias: str(key)}) if self.alias else self.env
        if self.groups is not None:
            return Conjunct(self.value, env, tuple((g, key) for g in self.groups), True, True)
        return Conjunct(self.value, env)


class Vertex(Settling, Disjunctions):
    """A value under evaluation (see the module's docstring); every vertex is one of these."""
    __slots__ = ()

    def new_arc(self, key: Any) -> "Vertex":
        arc = Vertex(self, key)
        arc.regular = False
        self.arcs[key] = arc
        if self.state == DONE and (self.patterns or self.optionals):
            self._apply_patterns()
        return arc

    def add(self, c: Conjunct) -> None:
        self.conjuncts.append(c)
        if self.state == DONE:
            self._incremental(c)

    def _incremental(self, c: Conjunct) -> None:
        if self.alts is not None or self.disjs:
            return
        self.state = EXPANDING
        try:
            self._process(c)
            self._drain()
            if self.patterns or self.optionals:
                self._apply_patterns()
            self._finish()
        finally:
            self.state = DONE

    # ---- expansion ---------------------------------------------------------------------------
    def expand(self) -> None:
        if self.state != NEW:
            return
        self.state = EXPANDING
        ctx = self.ctx
        ctx.depth += 1
        try:
            if ctx.depth > ctx.limits.depth:
                raise LimitExceeded(f"{self.path() or 'value'}: evaluation nested more than {ctx.limits.depth} "
                                    "levels deep (a structural cycle?)")
            conj = self.conjuncts
            i = 0
            while i < len(conj):
                self._process(conj[i])
                i += 1
            self._drain()
            if self.disjs:
                self._resolve_disjunctions()
            else:
                if self.patterns or self.optionals:
                    self._apply_patterns()
                self._finish()
        finally:
            ctx.depth -= 1
            self.state = DONE

    def _drain(self) -> None:
        while self.pending or self.comprs:
            while self.pending:
                self._process(self.pending.popleft())
            while self.comprs and not self.pending:
                self._run_comprehension(self.comprs.popleft())
        self.pending = self.comprs = None

    def _process(self, c: Conjunct) -> None:
        self.ctx.step()
        x = c.expr
        if x is None:
            self._add_value(c.value, c)
            return
        t = type(x)
        if t is ast.StructLit:
            self._add_struct(x, c)
        elif t is ast.Ident or t is ast.Selector or t is ast.Index:
            r = resolve(self.ctx, x, c.env)
            if type(r) is Vertex:
                self._add_vertex(r, c)
            else:
                self._add_value(r, c, x)
        elif t is ast.Binary and x.op == "&":
            self._process(c.with_expr(x.x))
            self._process(c.with_expr(x.y))
        elif t is ast.Binary and x.op == "|":
            self._add_disjunction(x, c)
        elif t is ast.ListLit:
            self._add_list(x, c)
        elif t is ast.Paren:
            self._process(c.with_expr(x.x))
        elif t is ast.Call and type(x.fn) is ast.Ident and x.fn.target == ("builtin", "close"):
            if len(x.args) != 1:
                self._set_err(Bottom("close: takes exactly one argument", "eval", (x.pos,)))
                return
            self._process(Conjunct(x.args[0], c.env, c.groups + (object(),), True, c.rec, c.embed))
        elif t is ast.Unary and x.op == "*":
            self._process(c.with_expr(x.x))
        else:
            self._add_value(evaluate(self.ctx, x, c.env), c, x)

    def _set_err(self, b: Bottom) -> None:
        if self.err is None or (self.err.incomplete and not b.incomplete):
            self.err = b

    def _add_vertex(self, r: "Vertex", c: Conjunct) -> None:
        if r is self:
            return
        key = (id(self), id(r))
        copying = self.ctx.copying
        if key in copying:
            return  # a reference cycle adds nothing new
        label = r.label
        if type(label) is str and label[:1] == "#" or (type(label) is str and label[:2] == "_#"):
            groups = c.groups if c.embed else c.groups + (object(),)
            closed = rec = True
        else:
            groups, closed, rec = c.groups, c.closed, c.rec
        if not r.conjuncts:
            r.expand()
            self._add_value(r, c)
            return
        copying.add(key)
        try:
            for rc in list(r.conjuncts):
                self._process(Conjunct(rc.expr, rc.env, rc.groups + groups, rc.closed or closed, rc.rec or rec,
                                       c.embed, rc.value))
        finally:
            copying.discard(key)

    def _add_value(self, v: Any, c: Conjunct, x: Any = None) -> None:
        t = type(v)
        if t is Vertex:
            v.expand()
            if v.conjuncts and v.state == DONE and v.conjuncts[0].expr is not None:
                self._add_vertex(v, c)
                return
            if v.err is not None:
                self._set_err(v.err)
            elif v.alts is not None:
                self.disjs.append(([(Conjunct(None, None, value=a), d) for a, d in v.alts], c)) \
                    if self.choices is None or self.choice_i >= len(self.choices) else \
                    self._choose([(Conjunct(None, None, value=a), d) for a, d in v.alts], c)
            elif v.kind == STRUCT:
                self.is_struct = 2
                self.structs.extend(v.structs)
                if c.embed and c.groups:  # embedded data (`{c}` under a definition): its fields are allowed
                    for g in c.groups:
                        grp = self.groups.get(g)
                        if grp is None:
                            grp = self.groups[g] = Group()
                        grp.labels.update(v.arcs)
                for k, arc in v.arcs.items():
                    mine = self.arcs.get(k) or self.new_arc(k)
                    if arc.regular:
                        mine.regular = True
                    mine.optional |= arc.optional
                    mine.required |= arc.required
                    mine.add(Conjunct(None, None, value=arc))
            elif v.kind == LIST:
                self.lists.append(([Conjunct(None, None, value=a) for a in v.arcs.values()], None))
            else:
                self._unify_scalar(v.scalar if v.scalar is not None else TOP, c)
        elif t is Data:
            self._add_data(v.obj, c)
        elif t is Fill:
            self._add_fill(v, c)
        elif t is Bottom:
            if x is not None and not v.positions:
                v = Bottom(v.message, v.kind, (x.pos,))
            self._set_err(v)
        elif t is Disj and any(type(a) is Vertex for a, _ in v.alts):
            alts = [(Conjunct(None, None, value=a), d) for a, d in v.alts]
            if self.choices is not None and self.choice_i < len(self.choices):
                self._choose(alts, c)
            else:
                self.disjs.append((alts, c))
        elif t is Func and v.validator and v.arity == 1:
            self._unify_scalar(v, c)
        elif t is Func or t is Package or t is SourcePackage:
            self._set_err(Bottom(f"cannot use {v!r} as a value (call it)", "eval"))
        else:
            self._unify_scalar(v, c)

    def _add_data(self, obj: Any, c: Conjunct) -> None:
        if type(obj) is list:
            self.lists.append(([Conjunct(None, None, value=data_value(x)) for x in obj], None))
            return
        keys = tuple(Quoted(k) if k[:1] in "#_" else k for k in obj)
        self.is_struct = 2
        self.structs.append(keys)
        if c.embed and c.groups:  # embedded data (`{c}` under a definition): its fields are allowed
            for g in c.groups:
                grp = self.groups.get(g)
                if grp is None:
                    grp = self.groups[g] = Group()
                grp.labels.update(keys)
        arcs = self.arcs
        for key, x in zip(keys, obj.values()):
            mine = arcs.get(key) or self.new_arc(key)
            mine.regular = True
            mine.add(Conjunct(None, None, value=data_value(x)))

    def _add_fill(self, f: Fill, c: Conjunct) -> None:
        if not f.path:
            self._add_value(data_value(f.obj), c)
            return
        key = f.path[0]
        arc = self.arcs.get(key) or self.new_arc(key)
        arc.regular = True  # a filled optional field is a regular one, as with FillPath
        arc.add(Conjunct(None, None, value=Fill(f.path[1:], f.obj)))

    def _unify_scalar(self, v: Any, c: Conjunct) -> None:
        r = unify_scalar(self.scalar, v)
        if type(r) is Bottom:
            self._set_err(r)
        else:
            self.scalar = r

    def _add_struct(self, lit: ast.StructLit, c: Conjunct) -> None:
        env = Env(c.env, self)
        groups = c.groups
        if not groups:
            # A literal that embeds gets a group of its own, so that an embedded definition closes it
            # with the literal's own fields allowed; under a definition, children derive from _DEF.
            if lit.has_embeds:
                groups = (("lit", id(lit)),)
            elif c.rec:
                groups = (_DEF,)
        if groups:
            for g in groups:
                grp = self.groups.get(g)
                if grp is None:
                    grp = self.groups[g] = Group()
                grp.labels.update(lit.labels)
                if lit.open:
                    grp.open = True
                if c.closed:
                    grp.closed = True
        if lit.labels:
            self.structs.append(lit.labels)
        if lit.struct_hint > self.is_struct:
            self.is_struct = lit.struct_hint
        rec = c.rec
        for d in lit.decls:
            t = type(d)
            if t is ast.Field:
                lab = d.label
                kind = lab.kind
                if kind == "ident":
                    key = lab.name
                elif kind == "string":
                    key = key_of(lab.name)
                elif kind == "dynamic":
                    kv = default_of(evaluate(self.ctx, lab.expr, env))
                    if type(kv) is Vertex:
                        kv = kv.value()
                    if type(kv) is Bottom:
                        self._set_err(kv)
                        continue
                    if type(kv) is not str:
                        self._set_err(Bottom(f"invalid label {fmt(kv)}: a dynamic label must be a string", "eval",
                                             (lab.pos,)))
                        continue
                    key = key_of(kv)
                    for g in groups:
                        self.groups[g].labels.add(key)
                    self.is_struct = 2
                else:
                    self._add_pattern(d, env, groups, rec)
                    continue
                arc = self.arcs.get(key)
                if arc is None:
                    arc = self.new_arc(key)
                arc.mark(d.constraint)
                if d.comments:
                    if arc.docs is None:
                        arc.docs = []
                    arc.docs.append(d.comments)
                if rec:
                    fc = Conjunct(d.value, env, tuple((g, key) for g in groups), True, True)
                elif type(key) is str and (key[:1] == "#" or key[:2] == "_#"):
                    fc = Conjunct(d.value, env, (), False, True)
                else:
                    fc = Conjunct(d.value, env)
                if d.constraint == "?":
                    self.optionals.append((arc, fc))
                else:
                    arc.add(fc)
            elif t is ast.Embed:
                self._process(Conjunct(d.x, env, groups, c.closed, rec, True))
            elif t is ast.Comprehension:
                if self.comprs is None:
                    self.comprs = deque()
                self.comprs.append((d, env, groups, c.closed, rec))

    def _add_pattern(self, d: ast.Field, env: Env, groups: tuple, rec: bool) -> None:
        match = default_of(evaluate(self.ctx, d.label.expr, env))
        if type(match) is Bottom:
            self._set_err(match)
            return
        p = Pattern(match, d.value, env, d.label.alias, groups if rec else None)
        self.patterns.append(p)
        for g in groups:
            self.groups[g].patterns.append(match)

    def _run_comprehension(self, item: tuple) -> None:
        d, env, groups, closed, rec = item
        try:
            for env_i in clauses(self.ctx, d.clauses, 0, env):
                self._add_struct(d.body, Conjunct(d.body, env_i, groups, closed, rec, True))
        except Fail as f:
            self._set_err(f.bottom)

    def _add_list(self, lit: ast.ListLit, c: Conjunct) -> None:
        groups: tuple = tuple((g, "[]") for g in (c.groups or (_DEF,))) if c.rec else ()
        elems: list[Conjunct] = []
        env = c.env
        try:
            for e in lit.elems:
                if type(e) is ast.Comprehension:
                    for env_i in clauses(self.ctx, e.clauses, 0, env):
                        elems.append(Conjunct(e.body, env_i, groups, c.rec, c.rec))
                        if len(elems) > self.ctx.limits.list_length:
                            raise LimitExceeded(f"list longer than {self.ctx.limits.list_length} elements")
                else:
                    elems.append(Conjunct(e, env, groups, c.rec, c.rec))
        except Fail as f:
            self._set_err(f.bottom)
            return
        tail = Conjunct(lit.tail, env, groups, c.rec, c.rec) if lit.tail is not None else None
        self.lists.append((elems, tail))

    # ---- disjunctions ------------------------------------------------------------------------
    def _add_disjunction(self, x: ast.Binary, c: Conjunct) -> None:
        alts = flatten_disjunction(x)
        values = []
        structural = False
        for e, d in alts:
            te = type(e)
            if te is ast.StructLit or te is ast.ListLit:
                structural = True
                break
            v = evaluate(self.ctx, e, c.env)
            if type(v) is Vertex:
                structural = True
                break
            if type(v) is Disj and any(type(a) is Vertex for a, _ in v.alts):
                structural = True
                break
            values.append((v, d))
        if not structural:
            out: list = []
            first_err = None
            for v, rule in values:
                if type(v) is Bottom:
                    first_err = first_err or v
                else:
                    for w, dw in term_flags(v, rule):
                        add_alt(out, w, dw)
            self._unify_scalar(make_disj(out, first_err), c)
            return
        conjs = [(c.with_expr(e), rule == "T") for e, rule in alts]
        if self.choices is not None and self.choice_i < len(self.choices):
            self._choose(conjs, c)
        else:
            self.disjs.append((conjs, c))

    def value(self) -> Any:
        """What this vertex stands for in an expression: a scalar, a Disj, a Bottom, or itself."""
        if self.state == NEW:
            self.expand()
        elif self.state == EXPANDING:
            return Bottom(f"cycle: {self.path() or 'value'} refers to itself", "cycle")
        if self.not_allowed is not None:
            return self.not_allowed
        if self.err is not None:
            return self.err
        if self.alts is not None:
            # scalar alternatives (`*null | [...string]`) stand for their scalar, as operands
            return Disj([(a.value() if a.kind == SCALAR else a, d) for a, d in self.alts])
        if self.kind != SCALAR:
            return self
        return TOP if self.scalar is None else self.scalar


# ---- comprehension clauses -------------------------------------------------------------------
def clauses(ctx: Context, cls: list, i: int, env: Env) -> Iterator[Env]:
    if i == len(cls):
        yield env
        return
    cl = cls[i]
    t = type(cl)
    if t is ast.ForClause:
        src = default_of(evaluate(ctx, cl.source, env))
        if type(src) is Bottom:
            raise Fail(src if src.positions else Bottom(src.message, src.kind, (cl.source.pos,)))
        if type(src) is not Vertex:
            if src is TOP or type(src) in (BasicType, Conj, Bound):
                raise Fail(Bottom(f"cannot range over {fmt(src)} (incomplete)", "incomplete", (cl.source.pos,)))
            raise Fail(Bottom(f"cannot range over {fmt(src)} (found {kind_name(value_kind(src))}, want list or "
                              "struct)", "eval", (cl.source.pos,)))
        if src.kind == LIST:
            items = [(k, a) for k, a in src.arcs.items()]
        else:
            items = [(str(k), a) for k, a in list(src.arcs.items()) if is_regular(k) and a.regular]
        for k, a in items:
            ctx.step()
            bindings = {cl.value: a}
            if cl.key:
                bindings[cl.key] = k
            yield from clauses(ctx, cls, i + 1, Env(env, None, bindings))
    elif t is ast.IfClause:
        c = default_of(evaluate(ctx, cl.cond, env))
        if type(c) is Bottom:
            raise Fail(c if c.positions else Bottom(c.message, c.kind, (cl.cond.pos,)))
        if type(c) is not bool:
            if type(c) is BasicType or c is TOP:
                raise Fail(Bottom(f"incomplete condition {fmt(c)}", "incomplete", (cl.cond.pos,)))
            raise Fail(Bottom(f"cannot use {fmt(c)} as type bool in if clause", "eval", (cl.cond.pos,)))
        if c:
            yield from clauses(ctx, cls, i + 1, env)
    else:
        v = Vertex(env.vertex if env is not None else None, None, ctx)
        v.conjuncts.append(Conjunct(cl.x, env))
        yield from clauses(ctx, cls, i + 1, Env(env, None, {cl.name: v}))


# ---- expressions -----------------------------------------------------------------------------
def resolve(ctx: Context, x: Any, env: Env | None) -> Any:
    """A reference's target: a Vertex (not yet evaluated), or a value (builtins, bindings, errors)."""
    t = type(x)
    if t is ast.Ident:
        e = env
        for _ in range(x.depth):
            e = e.parent
        kind, key = x.target
        if kind == "field":
            vx = e.vertex
            arc = vx.arcs.get(key)
            if arc is None:
                arc = vx.new_arc(key)
            return arc
        if kind == "var":
            return e.bindings[key]
        if kind == "let":
            return e.let_value(ctx, key)
        if kind == "builtin":
            from velashard.cue.builtins import UNIVERSE
            return UNIVERSE[key]
        if type(key) is SourcePackage:
            return key
        from velashard.cue.builtins import package
        return package(key)
    if t is ast.Selector:
        base = x.x
        tb = type(base)
        if tb is ast.Ident or tb is ast.Selector or tb is ast.Index:
            b = resolve(ctx, base, env)
        else:
            b = evaluate(ctx, base, env)
        return select(ctx, b, x.label, x)
    if t is ast.Index:
        base = x.x
        tb = type(base)
        if tb is ast.Ident or tb is ast.Selector or tb is ast.Index:
            b = resolve(ctx, base, env)
        else:
            b = evaluate(ctx, base, env)
        idx = default_of(evaluate(ctx, x.index, env))
        if type(idx) is Vertex:
            idx = idx.value()
        if type(idx) is Bottom:
            return idx
        if type(idx) is str:
            return select(ctx, b, key_of(idx), x)
        if type(idx) is not int:
            if not is_atom(idx):
                return Bottom(f"incomplete index {fmt(idx)}", "incomplete", (x.pos,))
            return Bottom(f"invalid index {fmt(idx)} (want int or string)", "eval", (x.pos,))
        return index_list(b, idx, x)
    return evaluate(ctx, x, env)


def source_vertex(ctx: Context, m: CueSource) -> "Vertex":
    """A package member written in CUE: compiled once, a fresh value per use."""
    if m.expr is None:
        from velashard.cue.compiler import Compiler, Scope
        from velashard.cue.parser import parse_expr
        x = parse_expr(m.text, "<builtin>")
        Compiler([]).expr(x, Scope(None, {}))
        m.expr = x
    return temp_vertex(ctx, m.expr, None)


def _struct_of(b: Any, x: Any) -> Any:
    if type(b) is Vertex:
        if b.state == NEW:
            b.expand()
        if b.state == EXPANDING:
            return b
        if b.not_allowed is not None:
            return b.not_allowed
        if b.err is not None:
            return b.err
        if b.alts is not None:
            defaults = [a for a, d in b.alts if d]
            if len(defaults) != 1:
                return Bottom(f"unresolved disjunction {b.path()}", "incomplete", (x.pos,))
            return _struct_of(defaults[0], x)
        return b
    if type(b) is Disj:
        return _struct_of(default_of(b), x)
    return b


def package_field(ctx: Context, p: SourcePackage, label: str, x: Any) -> Any:
    """A field of a package written in CUE, from this evaluation's own copy of the package."""
    root = ctx.packages.get(p)
    if root is None:
        root = Vertex(None, None, ctx)
        root.conjuncts.append(Conjunct(p.body, None))
        ctx.packages[p] = root
    root.expand()
    arc = root.arcs.get(label)
    # a hidden field (_x, _#x) is its package's own: an importer does not see it (CUE's scoping); a quoted
    # label ("_x") is a regular field
    if arc is None or not arc.regular or (type(label) is str and label[:1] == "_"):
        return Bottom(f"{p.path.split('/')[-1]}.{label} is not defined in package {p.path}", "eval",
                      (x.pos,))
    return arc


def select(ctx: Context, b: Any, label: str, x: Any) -> Any:
    if type(b) is SourcePackage:
        return package_field(ctx, b, label, x)
    if type(b) is Package:
        m = b.members.get(label)
        if m is None:
            return Bottom(f"{b.path.split('/')[-1]}.{label} is not a function of package {b.path} (or not "
                          "supported by this evaluator)", "eval", (x.pos,))
        if type(m) is CueSource:
            return source_vertex(ctx, m)
        return m
    b = _struct_of(b, x)
    if type(b) is Bottom:
        return b
    if type(b) is not Vertex:
        if b is TOP or type(b) in (BasicType, Conj):
            return Bottom(f"undefined field: {label} (value is incomplete)", "incomplete", (x.pos,))
        return Bottom(f"invalid selector {label} on {fmt(b)} (not a struct)", "eval", (x.pos,))
    if b.kind == LIST:
        return Bottom(f"invalid selector {label} on a list", "eval", (x.pos,))
    if b.kind == SCALAR and b.state == DONE:
        return _not_a_container(b, x)
    arc = b.arcs.get(label)
    if arc is None or not (arc.regular or (b.state == EXPANDING and not arc.optional)):
        if b.state == EXPANDING:
            return Bottom(f"undefined field: {label} (cycle)", "incomplete", (x.pos,))
        return Bottom(f"undefined field: {label}", "undefined", (x.pos,))
    return arc


def _not_a_container(b: Any, x: Any) -> Bottom:
    v = (TOP if b.scalar is None else b.scalar) if type(b) is Vertex else b
    if is_atom(v):
        return Bottom(f"invalid operand {fmt(v)} (found {kind_name(kind_of(v))}, want list or struct)", "eval",
                      (x.pos,))
    return Bottom(f"incomplete value {fmt(v)} (want list or struct)", "incomplete", (x.pos,))


def index_list(b: Any, i: int, x: Any) -> Any:
    b = _struct_of(b, x)
    if type(b) is Bottom:
        return b
    if type(b) is not Vertex or b.kind != LIST:
        if type(b) is Vertex and b.kind == STRUCT:
            return Bottom(f"invalid index {i} on a struct (want a string)", "eval", (x.pos,))
        return _not_a_container(b, x)
    if i < 0:
        return Bottom(f"invalid index {i} (index must be non-negative)", "eval", (x.pos,))
    arc = b.arcs.get(i)
    if arc is None:
        return Bottom(f"invalid list index {i} (out of bounds)", "undefined", (x.pos,))
    return arc


def evaluate(ctx: Context, x: Any, env: Env | None) -> Any:
    ctx.step()
    t = type(x)
    if t is ast.Lit:
        return NULL if x.kind == "null" else x.value
    if t is ast.Ident or t is ast.Selector or t is ast.Index:
        r = resolve(ctx, x, env)
        if type(r) is Vertex:
            return r.value()
        return r
    if t is ast.Binary:
        return binary(ctx, x, env)
    if t is ast.Unary:
        return unary(ctx, x, env)
    if t is ast.Call:
        return call(ctx, x, env)
    if t is ast.Interp:
        return interpolate(ctx, x, env)
    if t is ast.Paren:
        return evaluate(ctx, x.x, env)
    if t is ast.BottomLit:
        return Bottom("explicit error (_|_ literal) in source", "eval", (x.pos,))
    if t is ast.StructLit or t is ast.ListLit:
        return temp_vertex(ctx, x, env).value()
    if t is ast.Slice:
        return slice_list(ctx, x, env)
    return Bottom(f"cannot evaluate {type(x).__name__}", "eval", (x.pos,))


def temp_vertex(ctx: Context, x: Any, env: Env | None) -> Vertex:
    v = Vertex(env.vertex if env is not None and env.vertex is not None else None, None, ctx)
    v.conjuncts.append(Conjunct(x, env))
    v.expand()
    return v


def operand(ctx: Context, x: Any, env: Env | None) -> Any:
    v = default_of(evaluate(ctx, x, env))
    return v


def binary(ctx: Context, x: ast.Binary, env: Env | None) -> Any:
    op = x.op
    if op == "&":
        a = evaluate(ctx, x.x, env)
        b = evaluate(ctx, x.y, env)
        if type(a) is Vertex or type(b) is Vertex or (type(a) is Disj and _has_vertex(a)) or (
                type(b) is Disj and _has_vertex(b)):
            return temp_vertex(ctx, x, env).value()
        return unify_scalar(a, b)
    if op == "|":
        alts = flatten_disjunction(x)
        out: list = []
        first_err = None
        for e, rule in alts:
            v = evaluate(ctx, e, env)
            if type(v) is Vertex or (type(v) is Disj and _has_vertex(v)):
                return temp_vertex(ctx, x, env).value()
            if type(v) is Bottom:
                first_err = first_err or v
            else:
                for w, dw in term_flags(v, rule):
                    add_alt(out, w, dw)
        return make_disj(out, first_err)
    if (op == "==" or op == "!=") and (type(x.y) is ast.BottomLit or type(x.x) is ast.BottomLit):
        other = x.x if type(x.y) is ast.BottomLit else x.y
        v = evaluate(ctx, other, env)
        if type(v) is Disj:
            v = default_of(v)
            if type(v) is Bottom:
                return False  # an unresolved disjunction is undecided: CUE v0.4 holds neither == nor != _|_
        # a scalar that is not concrete (`int`, `>3`) is incomplete: it counts as bottom here, as in CUE
        # (`if parameter.x != _|_` skips a declared but unset field)
        is_bottom = type(v) is Bottom or (type(v) is not Vertex and not is_atom(v))
        return is_bottom if op == "==" else not is_bottom
    if op == "&&" or op == "||":
        a = operand(ctx, x.x, env)
        if type(a) is Bottom:
            return a
        if type(a) is not bool:
            return _bad_operand(op, a, x)
        if (op == "&&" and not a) or (op == "||" and a):
            return a
        b = operand(ctx, x.y, env)
        if type(b) is Bottom:
            return b
        if type(b) is not bool:
            return _bad_operand(op, b, x)
        return b
    a = operand(ctx, x.x, env)
    if type(a) is Bottom:
        return a
    b = operand(ctx, x.y, env)
    if type(b) is Bottom:
        return b
    return arith(ctx, op, a, b, x)


def _has_vertex(d: Disj) -> bool:
    return any(type(a) is Vertex for a, _ in d.alts)


def _bad_operand(op: str, v: Any, x: Any) -> Bottom:
    if not is_atom(v) and type(v) is not Vertex:
        return Bottom(f"incomplete operand {fmt(v)} to {op}", "incomplete", (x.pos,))
    return Bottom(f"invalid operand {fmt(v) if type(v) is not Vertex else v.path() or 'struct'} to '{op}' "
                  f"(type {_type_name(v)})", "eval", (x.pos,))


def _type_name(v: Any) -> str:
    if type(v) is Vertex:
        return "list" if v.kind == LIST else "struct"
    return kind_name(value_kind(v))


def arith(ctx: Context, op: str, a: Any, b: Any, x: Any) -> Any:
    ta, tb = type(a), type(b)
    if not (is_atom(a) or ta is Vertex) or not (is_atom(b) or tb is Vertex):
        bad = a if not (is_atom(a) or ta is Vertex) else b
        return Bottom(f"incomplete value {fmt(bad)} in operand of {op}", "incomplete", (x.pos,))
    ka = K_LIST if ta is Vertex and a.kind == LIST else (K_STRUCT if ta is Vertex else kind_of(a))
    kb = K_LIST if tb is Vertex and b.kind == LIST else (K_STRUCT if tb is Vertex else kind_of(b))
    if op in ("==", "!="):
        if ka & K_NUMBER and kb & K_NUMBER or ka == kb:
            if ka == K_STRUCT:
                return Bottom(f"invalid operation: {op} on struct", "eval", (x.pos,))
            if ka == K_LIST:
                try:
                    r = to_data(a) == to_data(b)
                except CueError as err:
                    return Bottom(err.message, err.kind, (x.pos,))
            else:
                r = equal_atoms(a, b)
            return r if op == "==" else not r
        if a is NULL or b is NULL:
            return op == "!="
        return Bottom(f"invalid operands {_show(a)} and {_show(b)} to '{op}' (type {kind_name(ka)} and "
                      f"{kind_name(kb)})", "eval", (x.pos,))
    if ka & K_NUMBER and kb & K_NUMBER:
        if op in ("<", "<=", ">", ">="):
            return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
        if ka == K_INT and kb == K_INT and op != "/":
            r = a + b if op == "+" else a - b if op == "-" else a * b
            if -_BIG < r < _BIG:
                return r
            # CUE computes ints with apd too: beyond 24 digits they round (and print with an exponent)
        try:
            da, db = Decimal(a), Decimal(b)
            if op == "+":
                return DECIMAL.add(da, db)
            if op == "-":
                return DECIMAL.subtract(da, db)
            if op == "*":
                return DECIMAL.multiply(da, db)
            if op == "/":
                if db == 0:
                    return Bottom("division by zero", "eval", (x.pos,))
                return DECIMAL.divide(da, db)
        except (DivisionByZero, InvalidOperation) as err:
            return Bottom(f"invalid arithmetic: {err}", "eval", (x.pos,))
    if ka == kb and ka & (K_STRING | K_BYTES):
        if op == "+":
            if len(a) + len(b) > ctx.limits.string_bytes:
                raise LimitExceeded(f"string longer than {ctx.limits.string_bytes} bytes")
            return a + b
        if op in ("<", "<=", ">", ">="):
            return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
    if op in ("=~", "!~") and ka & (K_STRING | K_BYTES) and kb & (K_STRING | K_BYTES):
        s = a.decode("utf-8", "replace") if type(a) is bytes else a
        found = compile_regex(b).search(s) is not None
        return found if op == "=~" else not found
    if op == "*" and ((ka & (K_STRING | K_BYTES | K_LIST)) and kb == K_INT or
                      (kb & (K_STRING | K_BYTES | K_LIST)) and ka == K_INT):
        seq, n = (a, b) if kb == K_INT else (b, a)
        if n < 0:
            return Bottom(f"negative repeat count {n}", "eval", (x.pos,))
        if type(seq) is Vertex:
            items = list(seq.arcs.values())
            if len(items) * n > ctx.limits.list_length:
                raise LimitExceeded(f"list longer than {ctx.limits.list_length} elements")
            return list_vertex(ctx, items * n)
        if len(seq) * n > ctx.limits.string_bytes:
            raise LimitExceeded(f"string longer than {ctx.limits.string_bytes} bytes")
        return seq * n
    if op == "+" and ka == K_LIST and kb == K_LIST:
        items = list(a.arcs.values()) + list(b.arcs.values())
        if len(items) > ctx.limits.list_length:
            raise LimitExceeded(f"list longer than {ctx.limits.list_length} elements")
        return list_vertex(ctx, items)
    return Bottom(f"invalid operation {_show(a)} {op} {_show(b)} (mismatched types {kind_name(ka)} and "
                  f"{kind_name(kb)})", "eval", (x.pos,))


def _show(v: Any) -> str:
    if type(v) is Vertex:
        return v.path() or ("list" if v.kind == LIST else "struct")
    return fmt(v)


def list_vertex(ctx: Context, items: list) -> Vertex:
    v = Vertex(None, None, ctx)
    v.state = DONE
    v.kind = LIST
    for i, a in enumerate(items):
        arc = Vertex(v, i)
        arc.conjuncts.append(Conjunct(None, None, value=a))
        v.arcs[i] = arc
    return v


def unary(ctx: Context, x: ast.Unary, env: Env | None) -> Any:
    op = x.op
    if op == "*":
        return evaluate(ctx, x.x, env)
    v = operand(ctx, x.x, env)
    if type(v) is Bottom:
        return v
    if op == "-" or op == "+":
        if type(v) in (int, Decimal):
            return -v if op == "-" else v
        if type(v) is BasicType and v.mask & K_NUMBER:
            return v
        return _bad_operand(op, v, x)
    if op == "!":
        if type(v) is bool:
            return not v
        return _bad_operand(op, v, x)
    if type(v) is Vertex or not is_atom(v):
        return Bottom(f"invalid operand {fmt(v) if type(v) is not Vertex else 'struct'} for bound {op}",
                      "incomplete" if type(v) is not Vertex else "eval", (x.pos,))
    if op in ("=~", "!~") and type(v) is not str:
        return Bottom(f"invalid regular expression {fmt(v)}", "eval", (x.pos,))
    try:
        return Bound(op, v)
    except CueError as err:
        return Bottom(err.message, err.kind, (x.pos,))


def interpolate(ctx: Context, x: ast.Interp, env: Env | None) -> Any:
    out: list[str] = []
    size = 0
    for p in x.parts:
        if type(p) is str:
            out.append(p)
            size += len(p)
            continue
        v = operand(ctx, p, env)
        t = type(v)
        if t is Bottom:
            return v
        if t is str:
            s = v
        elif t is bool:
            s = "true" if v else "false"
        elif t is int:
            s = str(v)
        elif t is Decimal:
            s = str(v)
        elif t is bytes:
            s = v.decode("utf-8", "replace")
        elif t is Vertex:
            return Bottom(f"invalid interpolation: cannot use {_type_name(v)} in a string", "eval", (p.pos,))
        elif v is NULL:
            return Bottom("invalid interpolation: cannot use null in a string", "eval", (p.pos,))
        else:
            return Bottom(f"invalid interpolation: non-concrete value {fmt(v)}", "incomplete", (p.pos,))
        out.append(s)
        size += len(s)
        if size > ctx.limits.string_bytes:
            raise LimitExceeded(f"string longer than {ctx.limits.string_bytes} bytes")
    text = "".join(out)
    return text.encode("utf-8", "surrogateescape") if x.is_bytes else text


def slice_list(ctx: Context, x: ast.Slice, env: Env | None) -> Any:
    base = _struct_of(evaluate(ctx, x.x, env), x)
    if type(base) is Bottom:
        return base
    lo = operand(ctx, x.lo, env) if x.lo is not None else 0
    if type(base) is str or type(base) is bytes:
        hi = operand(ctx, x.hi, env) if x.hi is not None else len(base)
        return base[lo:hi]
    if type(base) is not Vertex or base.kind != LIST:
        return Bottom("cannot slice a non-list", "eval", (x.pos,))
    items = list(base.arcs.values())
    hi = operand(ctx, x.hi, env) if x.hi is not None else len(items)
    if type(lo) is not int or type(hi) is not int or not 0 <= lo <= hi <= len(items):
        return Bottom(f"invalid slice [{fmt(lo)}:{fmt(hi)}] of a list of length {len(items)}", "eval", (x.pos,))
    return list_vertex(ctx, items[lo:hi])


# --- calls: builtins' arguments evaluated to plain data, results turned back into values; the few builtins that
# need the evaluator itself (len, and, or, close, list.Sort) are here --------------------------------------------


def call(ctx: Context, x: ast.Call, env: Env | None) -> Any:
    fn = evaluate(ctx, x.fn, env)
    if type(fn) is Bottom:
        return fn
    if type(fn) is not Func:
        return Bottom(f"cannot call non-function {fmt(fn) if is_atom(fn) else 'value'}", "eval", (x.pos,))
    if fn.raw:
        return _RAW[fn.name](ctx, fn, x, env)
    args = []
    for a in x.args:
        v = argument(ctx, a, env)
        if type(v) is Bottom:
            return v if v.positions else Bottom(v.message, v.kind, (a.pos,))
        args.append(v)
    if fn.validator and fn.arity >= 1 and len(args) == fn.arity - 1:
        return Validator(fn.name, fn.fn, tuple(args))
    if fn.arity >= 0 and len(args) != fn.arity:
        return Bottom(f"{fn.name}: expected {fn.arity} arguments, got {len(args)}", "eval", (x.pos,))
    ctx.check_time()
    try:
        result = fn.fn(*args)
    except CueError as err:
        return Bottom(f"error in call to {fn.name}: {err.message}", err.kind, (x.pos,))
    except (TypeError, ValueError, IndexError, KeyError, AttributeError, OverflowError) as err:
        return Bottom(f"error in call to {fn.name}: {err}", "eval", (x.pos,))
    ctx.check_time()  # a builtin cannot be interrupted; its caller stops right after it when the time is up
    return from_data(ctx, result)


def argument(ctx: Context, a: ast.Expr, env: Env | None) -> Any:
    """An argument as plain data; not concrete is an incomplete error."""
    v = default_of(evaluate(ctx, a, env))
    if type(v) is Bottom:
        return v
    if type(v) is Vertex:
        try:
            return to_data(v)
        except CueError as err:
            return Bottom(err.message, err.kind, err.positions)
    if v is NULL:
        return None
    if is_atom(v):
        return v
    return Bottom(f"non-concrete argument {fmt(v)}", "incomplete")


def _len(ctx: Context, fn: Func, x: ast.Call, env: Env | None) -> Any:
    if len(x.args) != 1:
        return Bottom("len: expected 1 argument", "eval", (x.pos,))
    v = default_of(evaluate(ctx, x.args[0], env))
    t = type(v)
    if t is Bottom:
        return v
    if t is str:
        return len(v.encode())
    if t is bytes:
        return len(v)
    if t is Vertex:
        if v.kind == LIST:
            return len(v.arcs)
        if v.kind == STRUCT:
            return sum(1 for k, a in v.arcs.items() if a.regular and is_regular(k))
    if is_atom(v):
        return Bottom(f"invalid argument {fmt(v)} for len", "eval", (x.pos,))
    return Bottom(f"len: incomplete argument {fmt(v)}", "incomplete", (x.pos,))


def _list_items(ctx: Context, fn: Func, x: ast.Call, env: Env | None) -> Any:
    if len(x.args) != 1:
        return Bottom(f"{fn.name}: expected 1 argument", "eval", (x.pos,))
    v = default_of(evaluate(ctx, x.args[0], env))
    if type(v) is Bottom:
        return v
    if type(v) is not Vertex or v.kind != LIST:
        return Bottom(f"{fn.name}: argument must be a list", "eval", (x.pos,))
    return list(v.arcs.values())


def _and(ctx: Context, fn: Func, x: ast.Call, env: Env | None) -> Any:
    items = _list_items(ctx, fn, x, env)
    if type(items) is Bottom:
        return items
    v = Vertex(None, None, ctx)
    for a in items:
        v.conjuncts.append(Conjunct(None, None, value=a))
    return v.value()


def _or(ctx: Context, fn: Func, x: ast.Call, env: Env | None) -> Any:
    items = _list_items(ctx, fn, x, env)
    if type(items) is Bottom:
        return items
    if not items:
        return Bottom("empty list in call to or", "eval", (x.pos,))
    alts = []
    for a in items:
        val = a.value()
        if type(val) is not Bottom:
            alts.append((val, True))
    if any(type(a) is Vertex for a, _ in alts):
        return Disj(alts) if len(alts) > 1 else alts[0][0]
    return make_disj(alts)


def _close(ctx: Context, fn: Func, x: ast.Call, env: Env | None) -> Any:
    return temp_vertex(ctx, x, env).value()


def _sort(ctx: Context, fn: Func, x: ast.Call, env: Env | None) -> Any:
    if len(x.args) != 2:
        return Bottom(f"{fn.name}: expected 2 arguments", "eval", (x.pos,))
    items = argument(ctx, x.args[0], env)
    if type(items) is Bottom:
        return items
    if type(items) is not list:
        return Bottom(f"{fn.name}: first argument must be a list", "eval", (x.pos,))
    cmp = evaluate(ctx, x.args[1], env)
    if type(cmp) is Bottom:
        return cmp
    if type(cmp) is not Vertex:
        return Bottom(f"{fn.name}: second argument must be a comparator struct {{x, y, less}}", "eval", (x.pos,))

    def less(a: Any, b: Any) -> bool:
        v = Vertex(None, None, ctx)
        v.conjuncts.append(Conjunct(None, None, value=cmp))
        v.conjuncts.append(Conjunct(None, None, value=from_data(ctx, {"x": a, "y": b})))
        v.expand()
        arc = v.arcs.get("less")
        r = default_of(arc.value()) if arc is not None else Bottom("comparator has no field less", "eval")
        if type(r) is not bool:
            raise CueError(f"{fn.name}: comparator's less is not a bool: {fmt(r) if is_atom(r) else r!r}")
        return r

    try:
        if fn.name == "list.IsSorted":
            return all(not less(items[i + 1], items[i]) for i in range(len(items) - 1))
        ordered = sorted(items, key=cmp_to_key(lambda a, b: -1 if less(a, b) else (1 if less(b, a) else 0)))
    except CueError as err:
        return Bottom(err.message, err.kind, (x.pos,))
    return from_data(ctx, ordered)


_RAW = {"len": _len, "and": _and, "or": _or, "close": _close,
        "list.Sort": _sort, "list.SortStable": _sort, "list.IsSorted": _sort}


def from_data(ctx: Context, obj: Any, parent: Vertex | None = None, label: Any = None) -> Any:
    """Plain data as a value: containers become evaluated vertices, atoms stay atoms."""
    t = type(obj)
    if t is dict:
        v = Vertex(parent, label, ctx)
        v.state = DONE
        v.kind = STRUCT
        v.is_struct = 2
        v.structs = [tuple(Quoted(k) if k[:1] in "#_" else k for k in obj)]
        for k, x in obj.items():
            key = Quoted(k) if k[:1] in "#_" else k
            v.arcs[key] = _arc(ctx, x, v, key)
        return v
    if t is list:
        v = Vertex(parent, label, ctx)
        v.state = DONE
        v.kind = LIST
        for i, x in enumerate(obj):
            v.arcs[i] = _arc(ctx, x, v, i)
        return v
    if obj is None:
        return NULL
    if t is float:
        return Decimal(repr(obj))
    return obj


def _arc(ctx: Context, x: Any, parent: Vertex, key: Any) -> Vertex:
    value = from_data(ctx, x, parent, key)
    if type(value) is Vertex:
        return value
    arc = Vertex(parent, key, ctx)
    arc.state = DONE
    arc.kind = SCALAR
    arc.scalar = value
    return arc
