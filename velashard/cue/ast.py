"""The CUE syntax tree. Nodes are plain slotted classes; the compiler annotates them in place once
(identifier resolution, struct layouts) and they are immutable afterwards, so a compiled tree is
shared by every evaluation and every thread."""

from __future__ import annotations

from typing import Any

from velashard.cue.errors import Pos


class Node:
    __slots__ = ("pos",)


class Expr(Node):
    __slots__ = ()


class Lit(Expr):
    """null, bool, int, float (Decimal), string or bytes."""
    __slots__ = ("kind", "value")

    def __init__(self, kind: str, value: Any, pos: Pos) -> None:
        self.kind, self.value, self.pos = kind, value, pos


class Interp(Expr):
    __slots__ = ("parts", "is_bytes")

    def __init__(self, parts: list, is_bytes: bool, pos: Pos) -> None:
        self.parts, self.is_bytes, self.pos = parts, is_bytes, pos


class BottomLit(Expr):
    __slots__ = ()

    def __init__(self, pos: Pos) -> None:
        self.pos = pos


class Ident(Expr):
    """A reference. `depth` (scopes to walk up) and `target` are set by the compiler:
    ("field", label) | ("let", LetDecl) | ("var", name) | ("import", path) | ("builtin", name)."""
    __slots__ = ("name", "depth", "target")

    def __init__(self, name: str, pos: Pos) -> None:
        self.name, self.pos = name, pos
        self.depth = 0
        self.target: tuple = ()


class Paren(Expr):
    __slots__ = ("x",)

    def __init__(self, x: Expr, pos: Pos) -> None:
        self.x, self.pos = x, pos


class Unary(Expr):
    __slots__ = ("op", "x")

    def __init__(self, op: str, x: Expr, pos: Pos) -> None:
        self.op, self.x, self.pos = op, x, pos


class Binary(Expr):
    __slots__ = ("op", "x", "y")

    def __init__(self, op: str, x: Expr, y: Expr, pos: Pos) -> None:
        self.op, self.x, self.y, self.pos = op, x, y, pos


class Selector(Expr):
    __slots__ = ("x", "label")

    def __init__(self, x: Expr, label: str, pos: Pos) -> None:
        self.x, self.label, self.pos = x, label, pos


class Index(Expr):
    __slots__ = ("x", "index")

    def __init__(self, x: Expr, index: Expr, pos: Pos) -> None:
        self.x, self.index, self.pos = x, index, pos


class Slice(Expr):
    __slots__ = ("x", "lo", "hi")

    def __init__(self, x: Expr, lo: Expr | None, hi: Expr | None, pos: Pos) -> None:
        self.x, self.lo, self.hi, self.pos = x, lo, hi, pos


class Call(Expr):
    __slots__ = ("fn", "args")

    def __init__(self, fn: Expr, args: list[Expr], pos: Pos) -> None:
        self.fn, self.args, self.pos = fn, args, pos


class Label(Node):
    """kind: "ident" (name), "string" (name), "dynamic" (expr: a parenthesised or interpolated label),
    "pattern" (expr: `[expr]`). `alias` names the field (`X=label`) or, for patterns, the label (`[X=expr]`)."""
    __slots__ = ("kind", "name", "expr", "alias")

    def __init__(self, kind: str, name: str | None, expr: Expr | None, alias: str | None, pos: Pos) -> None:
        self.kind, self.name, self.expr, self.alias, self.pos = kind, name, expr, alias, pos


class Field(Node):
    """`label: value`; constraint is "" (regular), "?" (optional) or "!" (required)."""
    __slots__ = ("label", "value", "constraint", "attrs", "comments", "value_alias")

    def __init__(self, label: Label, value: Expr, constraint: str, attrs: list[str], comments: list[str],
                 pos: Pos, value_alias: str | None = None) -> None:
        self.label, self.value, self.constraint, self.pos = label, value, constraint, pos
        self.attrs, self.comments, self.value_alias = attrs, comments, value_alias


class Embed(Node):
    __slots__ = ("x",)

    def __init__(self, x: Expr, pos: Pos) -> None:
        self.x, self.pos = x, pos


class LetDecl(Node):
    __slots__ = ("name", "x")

    def __init__(self, name: str, x: Expr, pos: Pos) -> None:
        self.name, self.x, self.pos = name, x, pos


class Ellipsis(Node):
    __slots__ = ("x",)

    def __init__(self, x: Expr | None, pos: Pos) -> None:
        self.x, self.pos = x, pos


class ForClause(Node):
    __slots__ = ("key", "value", "source")

    def __init__(self, key: str | None, value: str, source: Expr, pos: Pos) -> None:
        self.key, self.value, self.source, self.pos = key, value, source, pos


class IfClause(Node):
    __slots__ = ("cond",)

    def __init__(self, cond: Expr, pos: Pos) -> None:
        self.cond, self.pos = cond, pos


class LetClause(Node):
    __slots__ = ("name", "x")

    def __init__(self, name: str, x: Expr, pos: Pos) -> None:
        self.name, self.x, self.pos = name, x, pos


class Comprehension(Expr):
    __slots__ = ("clauses", "body")

    def __init__(self, clauses: list, body: "StructLit", pos: Pos) -> None:
        self.clauses, self.body, self.pos = clauses, body, pos


class StructLit(Expr):
    """A struct literal. The compiler fills `labels` (the labels its fields declare, in order, as CUE
    orders output fields), `has_embeds`, `open` (an ellipsis) and `names` (what it declares in scope)."""
    __slots__ = ("decls", "labels", "has_embeds", "open", "names", "struct_hint")

    def __init__(self, decls: list, pos: Pos) -> None:
        self.decls, self.pos = decls, pos
        self.struct_hint = 2
        self.labels: tuple[str, ...] = ()
        self.has_embeds = False
        self.open = False
        self.names: dict[str, tuple] = {}


class ListLit(Expr):
    """elems: expressions and comprehensions; tail: None (closed), or the element type of `...T`."""
    __slots__ = ("elems", "tail")

    def __init__(self, elems: list, tail: Expr | None, pos: Pos) -> None:
        self.elems, self.tail, self.pos = elems, tail, pos


class Import(Node):
    __slots__ = ("name", "path")

    def __init__(self, name: str, path: str, pos: Pos) -> None:
        self.name, self.path, self.pos = name, path, pos


class File(Node):
    __slots__ = ("name", "package", "imports", "body")

    def __init__(self, name: str, package: str | None, imports: list[Import], body: StructLit, pos: Pos) -> None:
        self.name, self.package, self.imports, self.body, self.pos = name, package, imports, body, pos
