"""Compilation: resolves every identifier to the scope that declares it, once, and lays out struct
literals (their labels in order, embeddings, openness). Evaluation then walks `depth` environments up
instead of searching names, and a compiled program is shared read-only by every evaluation."""

from __future__ import annotations

from velashard.cue import ast
from velashard.cue.builtins import PACKAGES, UNIVERSE
from velashard.cue.errors import CueError
from velashard.cue.labels import is_regular, key_of

MAX_SCOPE_DEPTH = 400


def label_key(label: ast.Label) -> str:
    if label.kind == "ident":
        return label.name
    return key_of(label.name)


class Scope:
    __slots__ = ("parent", "names", "file")

    def __init__(self, parent: "Scope | None", names: dict[str, tuple], file: ast.File | None = None) -> None:
        self.parent, self.names, self.file = parent, names, file


class Compiler:
    def __init__(self, files: list[ast.File], dynamic_top: bool = False,
                 packages: dict[str, object] | None = None) -> None:
        self.files = files
        # packages written in CUE that these files may import beside the built-in ones, by import path
        self.packages = packages or {}
        self.depth = 0
        # for expressions over an evaluated value (`cue export -e x`): a name no scope declares may
        # still be a top-level field a comprehension made
        self.dynamic_top = dynamic_top
        # lets and aliases declared, by identity of their scope entry; a used one is removed
        self.unused: dict[int, tuple[str, object]] = {}

    def declare(self, name: str, target: tuple, pos: object) -> tuple:
        self.unused[id(target)] = (name, pos)
        return target

    def check_unused(self) -> None:
        if self.unused:
            name, pos = min(self.unused.values(), key=lambda item: (item[1].line, item[1].col))
            raise CueError(f"unreferenced alias or let clause {name}", "syntax", "", (pos,))

    def compile(self) -> None:
        top: dict[str, tuple] = {}
        for f in self.files:
            self.layout(f.body)
            top.update(f.body.names)
        for f in self.files:
            for imp in f.imports:
                if imp.path not in PACKAGES and imp.path not in self.packages:
                    known = ", ".join(sorted([*PACKAGES, *self.packages]))
                    raise CueError(f'package "{imp.path}" is not supported (the supported packages are: '
                                   f'{known})', "eval", "", (imp.pos,))
            scope = Scope(None, top, f)
            self.struct_body(f.body, scope)
        self.check_unused()

    # A struct literal's layout: which names it declares, which labels (in order) its fields have.
    def layout(self, lit: ast.StructLit) -> None:
        names: dict[str, tuple] = {}
        labels: list[str] = []
        for d in lit.decls:
            t = type(d)
            if t is ast.Field:
                lab = d.label
                if lab.kind in ("ident", "string"):
                    key = label_key(lab)
                    if key not in labels:
                        labels.append(key)
                    if lab.kind == "ident":
                        names[lab.name] = ("field", key)
                    if lab.alias:
                        names[lab.alias] = self.declare(lab.alias, ("field", key), lab.pos)
                    if d.value_alias:
                        names[d.value_alias] = self.declare(d.value_alias, ("field", key), d.pos)
                elif lab.alias and lab.kind == "dynamic":
                    names[lab.alias] = ("dynfield", lab)
            elif t is ast.LetDecl:
                names[d.name] = self.declare(d.name, ("let", d), d.pos)
            elif t is ast.Embed:
                lit.has_embeds = True
            elif t is ast.Ellipsis:
                lit.open = True
        lit.names = names
        lit.labels = tuple(labels)
        # 2: this literal makes a struct; 1: it only embeds or yields (`{ if c {"a"} }` is "a" or {})
        makes_struct = not lit.decls or lit.open or any(
            type(d) is ast.Field and (d.label.kind in ("pattern", "dynamic") or is_regular(label_key(d.label)))
            for d in lit.decls)
        lit.struct_hint = 2 if makes_struct else 1

    def struct_body(self, lit: ast.StructLit, scope: Scope) -> None:
        for d in lit.decls:
            t = type(d)
            if t is ast.Field:
                lab = d.label
                if lab.kind == "dynamic":
                    self.expr(lab.expr, scope)
                elif lab.kind == "pattern":
                    self.expr(lab.expr, scope)
                    if lab.alias:
                        target = self.declare(lab.alias, ("var", lab.alias), lab.pos)
                        self.expr(d.value, Scope(scope, {lab.alias: target}))
                        continue
                self.expr(d.value, scope)
            elif t is ast.Embed:
                self.expr(d.x, scope)
            elif t is ast.LetDecl:
                self.expr(d.x, scope)
            elif t is ast.Ellipsis:
                if d.x is not None:
                    self.expr(d.x, scope)
            elif t is ast.Comprehension:
                self.comprehension(d, scope)

    def comprehension(self, c: ast.Comprehension, scope: Scope) -> None:
        for clause in c.clauses:
            t = type(clause)
            if t is ast.ForClause:
                self.expr(clause.source, scope)
                names = {clause.value: ("var", clause.value)}
                if clause.key:
                    names[clause.key] = ("var", clause.key)
                scope = Scope(scope, names)
            elif t is ast.IfClause:
                self.expr(clause.cond, scope)
            else:
                self.expr(clause.x, scope)
                scope = Scope(scope, {clause.name: self.declare(clause.name, ("var", clause.name), clause.pos)})
        self.struct(c.body, scope)

    def struct(self, lit: ast.StructLit, scope: Scope) -> None:
        self.layout(lit)
        self.struct_body(lit, Scope(scope, lit.names))

    def expr(self, x: ast.Expr, scope: Scope) -> None:
        self.depth += 1
        if self.depth > MAX_SCOPE_DEPTH:
            raise CueError("expression nested too deeply", "limit", "", (x.pos,))
        try:
            self._expr(x, scope)
        finally:
            self.depth -= 1

    def _expr(self, x: ast.Expr, scope: Scope) -> None:
        t = type(x)
        if t is ast.Ident:
            self.resolve(x, scope)
        elif t is ast.StructLit:
            self.struct(x, scope)
        elif t is ast.ListLit:
            for e in x.elems:
                if type(e) is ast.Comprehension:
                    self.comprehension(e, scope)
                else:
                    self.expr(e, scope)
            if x.tail is not None:
                self.expr(x.tail, scope)
        elif t is ast.Binary:
            for side in (x.x, x.y):
                # a default mark belongs to a term of a disjunction, nowhere else
                if x.op == "|" and type(side) is ast.Unary and side.op == "*":
                    self.expr(side.x, scope)
                else:
                    self.expr(side, scope)
        elif t is ast.Unary:
            if x.op == "*":
                raise CueError("preference mark not allowed at this position", "syntax", "", (x.pos,))
            self.expr(x.x, scope)
        elif t is ast.Paren:
            self.expr(x.x, scope)
        elif t is ast.Selector:
            self.expr(x.x, scope)
        elif t is ast.Index:
            self.expr(x.x, scope)
            self.expr(x.index, scope)
        elif t is ast.Slice:
            self.expr(x.x, scope)
            if x.lo is not None:
                self.expr(x.lo, scope)
            if x.hi is not None:
                self.expr(x.hi, scope)
        elif t is ast.Call:
            self.expr(x.fn, scope)
            for a in x.args:
                self.expr(a, scope)
        elif t is ast.Interp:
            for p in x.parts:
                if not isinstance(p, str):
                    self.expr(p, scope)
        elif t is ast.Comprehension:
            self.comprehension(x, scope)

    def resolve(self, x: ast.Ident, scope: Scope) -> None:
        name = x.name
        depth = 0
        s: Scope | None = scope
        last = scope
        while s is not None:
            target = s.names.get(name)
            if target is not None:
                self.unused.pop(id(target), None)
                if target[0] == "dynfield":
                    raise CueError(f'reference "{name}" to a dynamic field is not supported', "eval", "", (x.pos,))
                x.depth, x.target = depth, target
                return
            last = s
            s = s.parent
            depth += 1
        file = last.file
        if file is not None:
            for imp in file.imports:
                if imp.name == name:
                    x.depth, x.target = 0, ("import", self.packages.get(imp.path) or imp.path)
                    return
        if name in UNIVERSE:
            x.depth, x.target = 0, ("builtin", name)
            return
        if self.dynamic_top:
            x.depth, x.target = depth - 1, ("field", name)
            return
        raise CueError(f'reference "{name}" not found', "undefined", "", (x.pos,))
