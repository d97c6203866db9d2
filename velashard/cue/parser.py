"""The CUE parser: tokens to the syntax tree of velashard.cue.ast (the grammar of CUE's specification)."""

from __future__ import annotations

from velashard.cue import ast
from velashard.cue.errors import CueSyntaxError
from velashard.cue.lexer import (ATTR, BOTTOM, COMMA, EOF, FLOAT, IDENT, INT, STRING, BytesToken, Token,
                                 tokenize)

_BINARY_PRECEDENCE = {"|": 1, "&": 2, "||": 3, "&&": 4,
                      "==": 5, "!=": 5, "<": 5, "<=": 5, ">": 5, ">=": 5, "=~": 5, "!~": 5,
                      "+": 6, "-": 6, "*": 7, "/": 7}
_WORD_OPERATORS = {"div", "mod", "quo", "rem"}  # not operators in CUE: predeclared functions
_UNARY = {"+", "-", "!", "*", "<", "<=", ">", ">=", "!=", "=~", "!~"}
MAX_DEPTH = 200  # nesting of the syntax tree: deeper input is refused, not a RecursionError


class Parser:
    def __init__(self, tokens: list[Token], filename: str) -> None:
        self.toks = tokens
        self.k = 0
        self.file = filename
        self.depth = 0

    @property
    def tok(self) -> Token:
        return self.toks[self.k]

    def peek(self, n: int = 1) -> Token:
        j = min(self.k + n, len(self.toks) - 1)
        return self.toks[j]

    def next(self) -> Token:
        t = self.toks[self.k]
        if self.k < len(self.toks) - 1:
            self.k += 1
        return t

    def error(self, message: str, tok: Token | None = None) -> CueSyntaxError:
        return CueSyntaxError(message, (tok or self.tok).pos)

    def describe(self, tok: Token) -> str:
        if tok.kind == EOF:
            return "EOF"
        if tok.kind == COMMA and tok.value != ",":
            return "newline"
        if tok.kind in (IDENT, INT, FLOAT):
            return str(tok.value)
        if tok.kind == STRING:
            return "string literal"
        return repr(tok.kind)

    def expect(self, kind: str, what: str | None = None) -> Token:
        if self.tok.kind != kind:
            raise self.error(f"expected {what or repr(kind)}, found {self.describe(self.tok)}")
        return self.next()

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"expression nested more than {MAX_DEPTH} levels deep")

    # ---- files -------------------------------------------------------------------------------
    def parse_file(self) -> ast.File:
        start = self.tok.pos
        while self.tok.kind == ATTR:
            self.next()
            self.skip_comma()
        package = None
        if self.tok.kind == IDENT and self.tok.value == "package" and self.peek().kind == IDENT:
            self.next()
            package = self.next().value
            self.end_decl()
        imports: list[ast.Import] = []
        while self.tok.kind == IDENT and self.tok.value == "import" and self.peek().kind in ("(", STRING, IDENT):
            self.next()
            if self.tok.kind == "(":
                self.next()
                while self.tok.kind != ")":
                    imports.append(self.import_spec())
                    if self.tok.kind != ")":
                        self.end_decl()
                self.next()
            else:
                imports.append(self.import_spec())
            self.end_decl()
        decls = self.decls(EOF)
        return ast.File(self.file, package, imports, ast.StructLit(decls, start), start)

    def import_spec(self) -> ast.Import:
        pos = self.tok.pos
        alias = None
        if self.tok.kind == IDENT:
            alias = self.next().value
        tok = self.expect(STRING, "import path")
        if not isinstance(tok.value, str):
            raise self.error("import path must be a plain string", tok)
        path = tok.value
        name = alias or path.split(":")[-1].split("/")[-1]
        return ast.Import(name, path.split(":")[0], pos)

    def skip_comma(self) -> None:
        if self.tok.kind == COMMA:
            self.next()

    def end_decl(self) -> None:
        if self.tok.kind == COMMA:
            self.next()
        elif self.tok.kind not in (EOF, "}", ")", "]"):
            raise self.error(f"missing ',' before {self.describe(self.tok)}")

    # ---- declarations ------------------------------------------------------------------------
    def decls(self, end: str) -> list:
        out: list = []
        while self.tok.kind != end:
            if self.tok.kind == EOF:
                raise self.error(f"expected '}}', found EOF")
            if self.tok.kind == COMMA:
                self.next()
                continue
            if self.tok.kind == ATTR:
                self.next()
                self.end_decl()
                continue
            d = self.decl()
            if out and type(out[-1]) is ast.Ellipsis:
                raise CueSyntaxError("an ellipsis must be the last element of a struct", out[-1].pos)
            out.append(d)
            if self.tok.kind != end:
                self.end_decl()
        return out

    def decl(self) -> ast.Node:
        tok = self.tok
        if tok.kind == "...":
            self.next()
            x = None
            if self.tok.kind not in (COMMA, "}", EOF):
                x = self.expr()
            return ast.Ellipsis(x, tok.pos)
        if tok.kind == IDENT and tok.value == "let" and self.peek().kind == IDENT and self.peek(2).kind == "=":
            self.next()
            name = self.next().value
            self.next()
            return ast.LetDecl(name, self.expr(), tok.pos)
        if tok.kind == IDENT and tok.value in ("for", "if") and self._starts_clause():
            return self.comprehension()
        return self.field_or_embed()

    def _starts_clause(self) -> bool:
        """`for`/`if` start a comprehension unless they are a label (`if: 1`, `for?: x`, `if!: y`)."""
        nxt = self.peek()
        if nxt.kind in (":", "=", COMMA, "}", "]", EOF):
            return False
        if nxt.kind in ("?", "!") and self.peek(2).kind == ":":
            return False
        return True

    def field_or_embed(self) -> ast.Node:
        tok = self.tok
        comments = tok.comments
        alias = None
        if tok.kind == IDENT and self.peek().kind == "=":
            alias = tok.value
            self.next()
            self.next()
        label_tok = self.tok
        label_start = self.k
        label = self.label_candidate()
        if label is not None:
            constraint = ""
            if self.tok.kind in ("?", "!") and self.peek().kind == ":":
                constraint = self.next().kind
            if self.tok.kind == ":":
                self.next()
                value_alias = None
                if self.tok.kind == IDENT and self.peek().kind == "=" and self.peek(2).kind in ("{", "["):
                    value_alias = self.next().value  # `label: X={...}`: X names this field's value
                    self.next()
                value = self.field_value()
                attrs = []
                while self.tok.kind == ATTR:
                    attrs.append(self.next().value)
                label.alias = alias if label.kind != "pattern" else label.alias
                if alias and label.kind == "pattern":
                    raise self.error("an alias of a pattern constraint goes inside the brackets", label_tok)
                return ast.Field(label, value, constraint, attrs, comments, label_tok.pos, value_alias)
            if constraint:
                raise self.error("expected ':' after optional or required marker")
            self.k = label_start
        if alias is not None:
            # `X = expr` at declaration level: an old form of let.
            return ast.LetDecl(alias, self.expr(), tok.pos)
        x = self.expr()
        if self.tok.kind == ":":
            raise self.error("invalid label: expected identifier, string, (expr) or [expr]", label_tok)
        return ast.Embed(x, tok.pos)

    def label_candidate(self) -> ast.Label | None:
        """Parse a label if one starts here and a ':' (or ?: / !:) follows; otherwise rewind and return None."""
        start = self.k
        tok = self.tok

        def followed_by_colon() -> bool:
            t = self.tok
            return t.kind == ":" or (t.kind in ("?", "!") and self.peek().kind == ":")

        if tok.kind == IDENT:
            self.next()
            if followed_by_colon():
                return ast.Label("ident", tok.value, None, None, tok.pos)
        elif tok.kind == STRING and not isinstance(tok, BytesToken):
            self.next()
            if followed_by_colon():
                if tok.parts is None:
                    return ast.Label("string", tok.value, None, None, tok.pos)
                return ast.Label("dynamic", None, self.string_node(tok), None, tok.pos)
        elif tok.kind == "(":
            self.next()
            x = self.expr()
            if self.tok.kind == ")":
                self.next()
                if followed_by_colon():
                    return ast.Label("dynamic", None, x, None, tok.pos)
        elif tok.kind == "[":
            self.next()
            alias = None
            if self.tok.kind == IDENT and self.peek().kind == "=":
                alias = self.next().value
                self.next()
            if self.tok.kind != "]":
                try:
                    x = self.expr()
                except CueSyntaxError:
                    x = None
                if x is not None and self.tok.kind == "]":
                    self.next()
                    if followed_by_colon():
                        return ast.Label("pattern", None, x, alias, tok.pos)
        self.k = start
        return None

    def field_value(self) -> ast.Expr:
        """The value after a label's ':'; `a: b: 1` is `a: {b: 1}`."""
        tok = self.tok
        save = self.k
        alias = None
        if tok.kind == IDENT and self.peek().kind == "=":
            alias = tok.value
            self.next()
            self.next()
        label = self.label_candidate()
        if label is not None:
            self.k = save
            field = self.field_or_embed()
            return ast.StructLit([field], tok.pos)
        if alias is not None:
            raise self.error("value aliases (X=expr after a label) are not supported; alias the label instead")
        return self.expr()

    def comprehension(self) -> ast.Comprehension:
        pos = self.tok.pos
        clauses = []
        while True:
            tok = self.tok
            if tok.kind == IDENT and tok.value == "for":
                self.next()
                first = self.expect(IDENT, "identifier").value
                key = None
                value = first
                if self.tok.kind == ",":
                    self.next()
                    key, value = first, self.expect(IDENT, "identifier").value
                if not (self.tok.kind == IDENT and self.tok.value == "in"):
                    raise self.error(f"expected 'in', found {self.describe(self.tok)}")
                self.next()
                clauses.append(ast.ForClause(key, value, self.expr(), tok.pos))
            elif tok.kind == IDENT and tok.value == "if":
                self.next()
                clauses.append(ast.IfClause(self.expr(), tok.pos))
            elif tok.kind == IDENT and tok.value == "let" and self.peek().kind == IDENT:
                self.next()
                name = self.next().value
                self.expect("=")
                clauses.append(ast.LetClause(name, self.expr(), tok.pos))
            elif tok.kind == COMMA and self.peek().kind == IDENT and self.peek().value in ("for", "if", "let"):
                self.next()
                continue
            else:
                break
        if self.tok.kind != "{":
            raise self.error(f"expected '{{' after comprehension clauses, found {self.describe(self.tok)}")
        body = self.struct_lit()
        return ast.Comprehension(clauses, body, pos)

    # ---- expressions -------------------------------------------------------------------------
    def expr(self, min_prec: int = 1) -> ast.Expr:
        self.enter()
        try:
            x = self.unary()
            while True:
                tok = self.tok
                if tok.kind == IDENT and tok.value in _WORD_OPERATORS:
                    # `a div b`: CUE v0.4's infix form of div, mod, quo and rem
                    if 7 < min_prec:
                        return x
                    self.next()
                    y = self.expr(8)
                    x = ast.Call(ast.Ident(tok.value, tok.pos), [x, y], tok.pos)
                    continue
                prec = _BINARY_PRECEDENCE.get(tok.kind)
                if prec is None or prec < min_prec:
                    return x
                self.next()
                y = self.expr(prec + 1)
                x = ast.Binary(tok.kind, x, y, tok.pos)
        finally:
            self.depth -= 1

    def unary(self) -> ast.Expr:
        tok = self.tok
        if tok.kind in _UNARY:
            self.next()
            self.enter()
            try:
                return ast.Unary(tok.kind, self.unary(), tok.pos)
            finally:
                self.depth -= 1
        return self.primary()

    def primary(self) -> ast.Expr:
        x = self.operand()
        while True:
            tok = self.tok
            if tok.kind == ".":
                self.next()
                sel = self.tok
                if sel.kind == IDENT:
                    self.next()
                    x = ast.Selector(x, sel.value, sel.pos)
                elif sel.kind == STRING and isinstance(sel.value, str) and sel.parts is None:
                    self.next()
                    x = ast.Selector(x, sel.value, sel.pos)
                else:
                    raise self.error(f"expected selector, found {self.describe(sel)}")
            elif tok.kind == "[" and not tok.newline_before:
                self.next()
                lo = hi = None
                if self.tok.kind != ":":
                    lo = self.expr()
                if self.tok.kind == ":":
                    self.next()
                    if self.tok.kind != "]":
                        hi = self.expr()
                    self.expect("]")
                    x = ast.Slice(x, lo, hi, tok.pos)
                else:
                    self.expect("]")
                    x = ast.Index(x, lo, tok.pos)
            elif tok.kind == "(" and not tok.newline_before:
                self.next()
                args = []
                while self.tok.kind != ")":
                    args.append(self.expr())
                    if self.tok.kind == COMMA:
                        self.next()
                    elif self.tok.kind != ")":
                        raise self.error(f"expected ',' or ')', found {self.describe(self.tok)}")
                self.next()
                x = ast.Call(x, args, tok.pos)
            else:
                return x

    def operand(self) -> ast.Expr:
        tok = self.tok
        kind = tok.kind
        if kind == IDENT:
            self.next()
            word = tok.value
            if word == "true" or word == "false":
                return ast.Lit("bool", word == "true", tok.pos)
            if word == "null":
                return ast.Lit("null", None, tok.pos)
            return ast.Ident(word, tok.pos)
        if kind == INT:
            self.next()
            return ast.Lit("int", tok.value, tok.pos)
        if kind == FLOAT:
            self.next()
            return ast.Lit("float", tok.value, tok.pos)
        if kind == STRING:
            self.next()
            return self.string_node(tok)
        if kind == BOTTOM:
            self.next()
            return ast.BottomLit(tok.pos)
        if kind == "(":
            self.next()
            x = self.expr()
            self.expect(")")
            return ast.Paren(x, tok.pos)
        if kind == "{":
            return self.struct_lit()
        if kind == "[":
            return self.list_lit()
        raise self.error(f"expected operand, found {self.describe(tok)}")

    def string_node(self, tok: Token) -> ast.Expr:
        is_bytes = isinstance(tok, BytesToken)
        if tok.parts is None:
            return ast.Lit("bytes" if is_bytes else "string", tok.value, tok.pos)
        parts: list = []
        for p in tok.parts:
            if isinstance(p, list):
                sub = Parser(p + [Token(EOF, None, tok.pos)], self.file)
                sub.depth = self.depth
                x = sub.expr()
                if sub.tok.kind != EOF:
                    raise sub.error(f"unexpected {sub.describe(sub.tok)} in interpolation")
                parts.append(x)
            elif p:
                parts.append(p.decode("utf-8", "surrogateescape") if isinstance(p, bytes) else p)
        return ast.Interp(parts, is_bytes, tok.pos)

    def struct_lit(self) -> ast.StructLit:
        tok = self.expect("{")
        self.enter()
        try:
            decls = self.decls("}")
        finally:
            self.depth -= 1
        self.expect("}")
        return ast.StructLit(decls, tok.pos)

    def list_lit(self) -> ast.ListLit:
        tok = self.expect("[")
        self.enter()
        elems: list = []
        tail = None
        try:
            while self.tok.kind != "]":
                if self.tok.kind == COMMA:
                    self.next()
                    continue
                if self.tok.kind == "...":
                    t = self.next()
                    tail = ast.Ident("_", t.pos) if self.tok.kind in ("]", COMMA) else self.expr()
                    self.skip_comma()
                    if self.tok.kind != "]":
                        raise self.error("an ellipsis must be the last element of a list")
                    break
                if self.tok.kind == IDENT and self.tok.value in ("for", "if") and self._starts_clause():
                    elems.append(self.comprehension())
                else:
                    elems.append(self.expr())
                if self.tok.kind == COMMA:
                    self.next()
                elif self.tok.kind != "]":
                    raise self.error(f"missing ',' in list literal, found {self.describe(self.tok)}")
        finally:
            self.depth -= 1
        self.expect("]")
        return ast.ListLit(elems, tail, tok.pos)


def parse_file(text: str, filename: str = "-") -> ast.File:
    return Parser(tokenize(text, filename), filename).parse_file()


def parse_expr(text: str, filename: str = "-") -> ast.Expr:
    p = Parser(tokenize(text, filename), filename)
    x = p.expr()
    p.skip_comma()
    if p.tok.kind != EOF:
        raise p.error(f"unexpected {p.describe(p.tok)} after expression")
    return x
