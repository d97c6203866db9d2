"""Assemble a local corpus of CUE programs from KubeVela X-Definitions, the way KubeVela assembles them.

Input: a directory of `vela def` files (`"name": {type: ..., attributes: ...}` plus `template: {...}`)
and of X-Definition YAML objects (`spec.schematic.cue.template`), for instance KubeVela's
`vela-templates/definitions/{internal,registry,deprecated}/**` and the addon catalog's
`{,experimental/}addons/*/definitions/*`, copied out of fresh clones of kubevela/kubevela and kubevela/catalog;
optionally a directory of examples (Markdown and YAML files holding `kind: Application` documents)
whose component/trait/policy properties become realistic `parameter` values.

Output: one self-contained CUE program per case (template, `parameter`, `context`), named
`<origin>.<definition>.<variant>.<expression>.cue`, and `index.json` listing
{file, expression, definition, kind, variant, source}. Feed them to `hack/cue_corpus_check.py`.

    python hack/cue_corpus_assemble.py --defs /tmp/kvdefs/src --examples /tmp/kvdefs/examples \\
        --out /tmp/kvdefs/cases
    python hack/cue_corpus_assemble.py --defs /tmp/kvdefs/src --features   # what the definitions use

The texts of those repositories are not the project's: keep the corpus outside the repository.

Status cases read the objects the same definition rendered, from real CUE's stored answers, so a full
rebuild is: assemble; `hack/cue_corpus_check.py DIR --oracle-only`; assemble again (only the status
cases change); `hack/cue_corpus_check.py DIR --oracle-only --missing-only` (answers whose case text
changed are recomputed).

Assembly (KubeVela's pkg/cue/definition/template.go and kubevela/workflow's pkg/cue/process):
- the template is the file's imports, a newline, then the declarations inside `template: {...}`;
- component and policy: `template + "\\ncontext: _\\nparameter: _\\n"`, `"\\n"`, `parameter: <JSON>`
  (`parameter: {}` without properties), `"\\n"`, `context: <JSON>`;
- trait: `template + "\\n"`, `parameter: <JSON>\\n`, `context: <JSON>` (no `context: _` line);
- `context` is one JSON object with sorted keys (Go's json.Marshal of a map): appAnnotations, appLabels,
  appName, appRevision, appRevisionNum, cluster, clusterVersion {gitVersion, major, minor (a number),
  platform}, components (the Application's components), name, namespace, parameter (the component's
  properties), publishVersion, replicaKey, revision, workflowName; traits also get componentType,
  output (the workload rendered so far) and outputs (auxiliary objects so far, when any);
- status cases (`healthPolicy`, `customStatus`): the status template, `"\\n"`,
  `context: <JSON>\\n` ({appName, appRevision, name, output, outputs?, parameter, status}),
  `parameter: <JSON>\\n`; exported expressions `isHealth` and `message`.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Iterator

# --------------------------------------------------------------------------------------------------
# A small CUE scanner and parser: enough to split `vela def` files, read the parameter schema and
# count which language features and builtins a template uses. Not an evaluator.
# --------------------------------------------------------------------------------------------------


class ParseError(Exception):
    pass


@dataclass
class Tok:
    kind: str          # ident, string, interp, number, bottom, op, newline-comma (','), eof, attr
    value: str
    pos: int
    line: int
    text: str = ""     # raw text for strings
    decoded: Any = None
    preceded_by_comment: list = field(default_factory=list)


_OPS = ["...", "=~", "!~", "==", "!=", "<=", ">=", "&&", "||", "<-",
        "&", "|", "+", "-", "*", "/", "<", ">", "!", "=", ":", ",", ".", "?",
        "(", ")", "[", "]", "{", "}"]
_IDENT_RE = re.compile(r"(?:_?#)?[A-Za-z_$][A-Za-z0-9_$]*")
_NUM_RE = re.compile(
    r"0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|"
    r"(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)(?:[eE][+-]?[0-9_]+)?(?:[KMGTP]i?)?")


def _scan_string(src: str, i: int) -> tuple[int, bool]:
    """Scan a CUE string starting at i (at '#', '"' or "'"). Return (end, has_interpolation)."""
    hashes = 0
    while src[i] == "#":
        hashes += 1
        i += 1
    q = src[i]
    multi = src.startswith(q * 3, i)
    delim = q * 3 if multi else q
    i += len(delim)
    close = delim + "#" * hashes
    esc = "\\" + "#" * hashes
    interp = False
    n = len(src)
    while i < n:
        if src.startswith(close, i):
            return i + len(close), interp
        if src.startswith(esc, i):
            j = i + len(esc)
            if j < n and src[j] == "(":
                interp = True
                depth = 0
                k = j
                while k < n:
                    c = src[k]
                    if c in "\"'#" and (c != "#" or (k + 1 < n and src[k + 1] in "\"#'")):
                        if c == "#":
                            kk = k
                            while kk < n and src[kk] == "#":
                                kk += 1
                            if kk < n and src[kk] in "\"'":
                                k, _ = _scan_string(src, k)
                                continue
                            k += 1
                            continue
                        k, _ = _scan_string(src, k)
                        continue
                    if c == "(":
                        depth += 1
                    elif c == ")":
                        depth -= 1
                        if depth == 0:
                            break
                    k += 1
                i = k + 1
                continue
            i = j + 1
            continue
        if not multi and src[i] == "\n":
            raise ParseError(f"newline in string at {i}")
        i += 1
    raise ParseError("unterminated string")


def _decode_simple_string(raw: str) -> Any:
    """Decode a CUE string literal without interpolation into a Python str (best effort)."""
    hashes = len(raw) - len(raw.lstrip("#"))
    body = raw[hashes:len(raw) - hashes] if hashes else raw
    q = body[0]
    if body.startswith(q * 3):
        inner = body[3:-3]
        lines = inner.split("\n")
        # first line is empty, last line holds the indentation of the closing quotes
        indent = lines[-1]
        content = [ln[len(indent):] if ln.startswith(indent) else ln.lstrip() for ln in lines[1:-1]]
        inner = "\n".join(content)
    else:
        inner = body[1:-1]
    if hashes:
        return inner
    try:
        return json.loads('"' + inner.replace('"', '\\"').replace("\\'", "'").replace('\\\\"', '\\"') + '"')
    except Exception:
        return inner


def tokenize(src: str) -> list[Tok]:
    toks: list[Tok] = []
    i, n, line = 0, len(src), 1
    pending_comments: list[str] = []

    def last_allows_comma() -> bool:
        if not toks:
            return False
        t = toks[-1]
        return (t.kind in ("ident", "string", "interp", "number", "bottom")
                or (t.kind == "op" and t.value in (")", "]", "}", "...")))

    while i < n:
        c = src[i]
        if c == "\n":
            if last_allows_comma():
                toks.append(Tok("op", ",", i, line, "\n"))
            line += 1
            i += 1
            continue
        if c in " \t\r":
            i += 1
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            pending_comments.append(src[i:j])
            i = j
            continue
        start = i
        if c == "@" and i + 1 < n and (src[i + 1].isalpha() or src[i + 1] == "_"):
            m = _IDENT_RE.match(src, i + 1)
            j = m.end()
            if j < n and src[j] == "(":
                depth = 0
                while j < n:
                    if src[j] == "(":
                        depth += 1
                    elif src[j] == ")":
                        depth -= 1
                        if depth == 0:
                            j += 1
                            break
                    elif src[j] in "\"'":
                        j, _ = _scan_string(src, j)
                        continue
                    j += 1
            toks.append(Tok("attr", src[i:j], i, line))
            i = j
            continue
        if c in "\"'" or (c == "#" and re.match(r"#+[\"']", src[i:i + 8])):
            j, interp = _scan_string(src, i)
            raw = src[i:j]
            t = Tok("interp" if interp else "string", raw, start, line, raw)
            if not interp:
                t.decoded = _decode_simple_string(raw)
            t.preceded_by_comment, pending_comments = pending_comments, []
            toks.append(t)
            line += raw.count("\n")
            i = j
            continue
        if src.startswith("_|_", i):
            toks.append(Tok("bottom", "_|_", i, line))
            i += 3
            continue
        m = _IDENT_RE.match(src, i)
        if m and not c.isdigit():
            t = Tok("ident", m.group(0), i, line)
            t.preceded_by_comment, pending_comments = pending_comments, []
            toks.append(t)
            i = m.end()
            continue
        if c.isdigit() or (c == "." and i + 1 < n and src[i + 1].isdigit()):
            m = _NUM_RE.match(src, i)
            toks.append(Tok("number", m.group(0), i, line))
            i = m.end()
            continue
        for op in _OPS:
            if src.startswith(op, i):
                t = Tok("op", op, i, line)
                if op in ("[", "("):
                    t.preceded_by_comment, pending_comments = pending_comments, []
                toks.append(t)
                i += len(op)
                break
        else:
            raise ParseError(f"unexpected character {c!r} at line {line}")
    if last_allows_comma():
        toks.append(Tok("op", ",", n, line, "\n"))
    toks.append(Tok("eof", "", n, line))
    return toks


# AST: plain tuples keep it small. Node kinds:
# ("lit", python_value) ("str", python_str|None, raw) ("num", text) ("ident", name) ("bottom",)
# ("struct", [decl...]) ("list", [elem...])
# ("binop", op, l, r) ("unary", op, x) ("sel", x, name) ("index", x, idx) ("slice", x, a, b)
# ("call", fn, [args]) ("comp", [clauses], body) ("ellipsis", expr|None) ("alias", name, expr)
# decls: ("field", label, flag, value, comments) flag in "", "?", "!"
#        ("pattern", label_expr, value) ("let", name, expr) ("embed", expr) ("comp", clauses, body)
#        ("ellipsis", expr|None) ("import", path, alias)
# labels: ("ident", name) ("str", value) ("dyn", expr) ("alias", name, label)

_BINPREC = {"|": 1, "&": 2, "||": 3, "&&": 4, "==": 5, "!=": 5, "<": 5, "<=": 5, ">": 5, ">=": 5,
            "=~": 5, "!~": 5, "+": 6, "-": 6, "*": 7, "/": 7}
_UNARY = {"+", "-", "!", "*", "!=", "<", "<=", ">", ">=", "=~", "!~"}


class Parser:
    def __init__(self, src: str):
        self.src = src
        self.toks = tokenize(src)
        self.i = 0

    # helpers
    def peek(self, k: int = 0) -> Tok:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def at(self, kind: str, value: str | None = None, k: int = 0) -> bool:
        t = self.peek(k)
        return t.kind == kind and (value is None or t.value == value)

    def at_op(self, value: str, k: int = 0) -> bool:
        return self.at("op", value, k)

    def next(self) -> Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect_op(self, value: str) -> Tok:
        t = self.next()
        if not (t.kind == "op" and t.value == value):
            raise ParseError(f"expected {value!r} at line {t.line}, got {t.value!r}")
        return t

    def skip_attrs(self) -> None:
        while self.at("attr"):
            self.next()

    def skip_commas(self) -> None:
        while self.at_op(","):
            self.next()

    # file and struct bodies
    def parse_file(self) -> list:
        decls = []
        self.skip_commas()
        if self.at("ident", "package"):
            self.next()
            self.next()
        while True:
            self.skip_commas()
            self.skip_attrs()
            self.skip_commas()
            if self.at("ident", "import") and not self.at_op(":", 1):
                self.next()
                if self.at_op("("):
                    self.next()
                    while True:
                        self.skip_commas()
                        if self.at_op(")"):
                            self.next()
                            break
                        decls.append(self._import_spec())
                else:
                    decls.append(self._import_spec())
                continue
            break
        decls.extend(self.parse_decls("eof"))
        return decls

    def _import_spec(self) -> tuple:
        alias = None
        if self.at("ident"):
            alias = self.next().value
        t = self.next()
        if t.kind != "string":
            raise ParseError(f"bad import at line {t.line}")
        return ("import", t.decoded, alias)

    def parse_decls(self, end: str) -> list:
        decls = []
        while True:
            self.skip_commas()
            self.skip_attrs()
            self.skip_commas()
            if end == "eof" and self.at("eof"):
                return decls
            if end == "}" and self.at_op("}"):
                self.next()
                return decls
            if self.at("eof"):
                raise ParseError("unexpected end of input")
            decls.append(self.parse_decl())
            self.skip_attrs()
            if not (self.at_op(",") or self.at_op("}") or self.at("eof")):
                t = self.peek()
                raise ParseError(f"expected ',' or '}}' at line {t.line}, got {t.value!r}")

    def parse_decl(self) -> tuple:
        t = self.peek()
        if t.kind == "ident" and t.value == "let" and self.at("ident", None, 1) and self.at_op("=", 2):
            self.next()
            name = self.next().value
            self.expect_op("=")
            return ("let", name, self.parse_expr())
        if self.at_op("..."):
            self.next()
            if self.at_op(",") or self.at_op("}") or self.at("eof"):
                return ("ellipsis", None)
            return ("ellipsis", self.parse_expr())
        if t.kind == "ident" and t.value in ("for", "if") and not self.at_op(":", 1) \
                and not ((self.at_op("?", 1) or self.at_op("!", 1)) and self.at_op(":", 2)):
            clauses = self.parse_clauses()
            body = self.parse_operand()
            return ("comp", clauses, body)
        # field alias X=label
        alias = None
        if t.kind == "ident" and self.at_op("=", 1):
            alias = t.value
            self.next()
            self.next()
        start = self.i
        comments = self.peek().preceded_by_comment
        label = self.try_label()
        if label is not None:
            flag = ""
            if self.at_op("?") or self.at_op("!"):
                flag = self.next().value
            if self.at_op(":"):
                self.next()
                self.skip_attrs()
                value = self.parse_field_value()
                self.skip_attrs()
                if alias:
                    label = ("alias", alias, label)
                if label[0] == "pattern":
                    return ("pattern", label[1], value)
                return ("field", label, flag, value, comments)
        self.i = start
        if alias:
            raise ParseError(f"alias without field at line {t.line}")
        return ("embed", self.parse_expr())

    def parse_field_value(self) -> Any:
        # chained labels a: b: c: v
        start = self.i
        comments = self.peek().preceded_by_comment
        alias = None
        if self.at("ident") and self.at_op("=", 1):
            alias = self.next().value
            self.next()
        label = self.try_label()
        if label is not None:
            flag = ""
            if self.at_op("?") or self.at_op("!"):
                flag = self.next().value
            if self.at_op(":"):
                self.next()
                self.skip_attrs()
                value = self.parse_field_value()
                if alias:
                    label = ("alias", alias, label)
                if label[0] == "pattern":
                    return ("struct", [("pattern", label[1], value)])
                return ("struct", [("field", label, flag, value, comments)])
        self.i = start
        return self.parse_expr()

    def try_label(self) -> tuple | None:
        t = self.peek()
        if t.kind == "ident":
            if self.at_op(":", 1) or ((self.at_op("?", 1) or self.at_op("!", 1)) and self.at_op(":", 2)):
                self.next()
                return ("ident", t.value)
            return None
        if t.kind == "string":
            if self.at_op(":", 1) or ((self.at_op("?", 1) or self.at_op("!", 1)) and self.at_op(":", 2)):
                self.next()
                return ("str", t.decoded)
            return None
        if t.kind == "interp":
            if self.at_op(":", 1) or ((self.at_op("?", 1) or self.at_op("!", 1)) and self.at_op(":", 2)):
                self.next()
                return ("dyn", ("str", None, t.text))
            return None
        if t.kind == "op" and t.value in ("(", "["):
            save = self.i
            try:
                if t.value == "(":
                    self.next()
                    e = self.parse_expr()
                    self.expect_op(")")
                    lab = ("dyn", e)
                else:
                    self.next()
                    if self.at("ident") and self.at_op("=", 1):
                        self.next()
                        self.next()
                    e = self.parse_expr()
                    self.expect_op("]")
                    lab = ("pattern", e)
                if self.at_op(":") or ((self.at_op("?") or self.at_op("!")) and self.at_op(":", 1)):
                    return lab
            except ParseError:
                pass
            self.i = save
        return None

    def parse_clauses(self) -> list:
        clauses = []
        while True:
            # a newline between clauses, or before the body, does not end the comprehension
            if clauses and self.at_op(",") and self.peek().text == "\n" and (
                    self.at("ident", "for", 1) or self.at("ident", "if", 1) or self.at("ident", "let", 1)
                    or self.at_op("{", 1)):
                self.next()
            if self.at("ident", "for"):
                self.next()
                a = self.next().value
                b = None
                if self.at_op(","):
                    self.next()
                    b = self.next().value
                if not self.at("ident", "in"):
                    raise ParseError(f"expected 'in' at line {self.peek().line}")
                self.next()
                clauses.append(("for", a, b, self.parse_expr()))
            elif self.at("ident", "if"):
                self.next()
                clauses.append(("if", self.parse_expr()))
            elif self.at("ident", "let") and self.at_op("=", 2):
                self.next()
                name = self.next().value
                self.next()
                clauses.append(("let", name, self.parse_expr()))
            else:
                return clauses

    # expressions
    def parse_expr(self, prec: int = 1) -> Any:
        left = self.parse_unary()
        while True:
            t = self.peek()
            if t.kind == "op" and t.value in _BINPREC and _BINPREC[t.value] >= prec:
                op = t.value
                self.next()
                right = self.parse_expr(_BINPREC[op] + 1)
                left = ("binop", op, left, right)
                continue
            return left

    def parse_unary(self) -> Any:
        t = self.peek()
        if t.kind == "op" and t.value in _UNARY:
            self.next()
            return ("unary", t.value, self.parse_unary())
        return self.parse_primary()

    def parse_primary(self) -> Any:
        x = self.parse_operand()
        while True:
            if self.at_op("."):
                self.next()
                t = self.next()
                if t.kind == "ident":
                    x = ("sel", x, t.value)
                elif t.kind == "string":
                    x = ("sel", x, t.decoded)
                else:
                    raise ParseError(f"bad selector at line {t.line}")
            elif self.at_op("["):
                self.next()
                if self.at_op(":"):
                    self.next()
                    b = None if self.at_op("]") else self.parse_expr()
                    self.expect_op("]")
                    x = ("slice", x, None, b)
                    continue
                a = self.parse_expr()
                if self.at_op(":"):
                    self.next()
                    b = None if self.at_op("]") else self.parse_expr()
                    self.expect_op("]")
                    x = ("slice", x, a, b)
                    continue
                self.expect_op("]")
                x = ("index", x, a)
            elif self.at_op("("):
                self.next()
                args = []
                while True:
                    self.skip_commas()
                    if self.at_op(")"):
                        self.next()
                        break
                    args.append(self.parse_expr())
                x = ("call", x, args)
            else:
                return x

    def parse_operand(self) -> Any:
        t = self.next()
        if t.kind == "ident":
            if t.value == "true":
                return ("lit", True)
            if t.value == "false":
                return ("lit", False)
            if t.value == "null":
                return ("lit", None)
            return ("ident", t.value)
        if t.kind == "bottom":
            return ("bottom",)
        if t.kind == "string":
            if t.text.lstrip("#").startswith("'"):
                return ("bytes", t.decoded, t.text)
            return ("str", t.decoded, t.text)
        if t.kind == "interp":
            return ("str", None, t.text)
        if t.kind == "number":
            return ("num", t.value)
        if t.kind == "op":
            if t.value == "(":
                e = self.parse_expr()
                self.expect_op(")")
                return ("paren", e)
            if t.value == "{":
                return ("struct", self.parse_decls("}"))
            if t.value == "[":
                return ("list", self.parse_list_elems())
        raise ParseError(f"unexpected {t.value!r} at line {t.line}")

    def parse_list_elems(self) -> list:
        elems = []
        while True:
            self.skip_commas()
            if self.at_op("]"):
                self.next()
                return elems
            if self.at_op("..."):
                self.next()
                if self.at_op("]") or self.at_op(","):
                    elems.append(("ellipsis", None))
                else:
                    elems.append(("ellipsis", self.parse_expr()))
            elif self.at("ident", "for") or (self.at("ident", "if") and not self.at_op(":", 1)):
                clauses = self.parse_clauses()
                elems.append(("comp", clauses, self.parse_operand()))
            elif self.at("ident") and self.at_op("=", 1):
                name = self.next().value
                self.next()
                elems.append(("alias", name, self.parse_expr()))
            else:
                elems.append(self.parse_expr())
            self.skip_attrs()
            if not (self.at_op(",") or self.at_op("]")):
                t = self.peek()
                raise ParseError(f"expected ',' or ']' at line {t.line}, got {t.value!r}")


def parse_cue(src: str) -> list:
    return Parser(src).parse_file()


# --------------------------------------------------------------------------------------------------
# vela def files
# --------------------------------------------------------------------------------------------------

@dataclass
class Definition:
    path: str                    # relative to the definitions root
    name: str
    kind: str                    # component, trait, policy, workflow-step, ...
    imports: str                 # the import declarations, verbatim
    template: str                # the declarations inside template: {...}, dedented
    metadata: dict
    status: dict                 # customStatus / healthPolicy / details strings
    origin: str                  # vela, vela-registry, vela-deprecated, cat, cat-exp
    error: str = ""


def _top_level_spans(src: str) -> Iterator[tuple[str, int, int, int, int]]:
    """Yield (label, label_start, value_start, value_end, decl_end) for top-level fields whose
    value is a struct literal; import spans as ("import", start, -, -, end)."""
    toks = tokenize(src)
    i, depth = 0, 0
    n = len(toks)
    while i < n:
        t = toks[i]
        if depth == 0 and t.kind == "ident" and t.value == "import" and not (
                toks[i + 1].kind == "op" and toks[i + 1].value == ":"):
            j = i + 1
            if toks[j].kind == "op" and toks[j].value == "(":
                while not (toks[j].kind == "op" and toks[j].value == ")"):
                    j += 1
            else:
                if toks[j].kind == "ident":
                    j += 1
            end = toks[j].pos + len(toks[j].value if toks[j].kind != "string" else toks[j].text)
            yield ("import", t.pos, t.pos, end, end)
            i = j + 1
            continue
        if depth == 0 and t.kind in ("ident", "string") and i + 2 < n and toks[i + 1].kind == "op" \
                and toks[i + 1].value == ":" and toks[i + 2].kind == "op" and toks[i + 2].value == "{":
            label = t.value if t.kind == "ident" else t.decoded
            j = i + 2
            d = 0
            while j < n:
                tj = toks[j]
                if tj.kind == "op" and tj.value == "{":
                    d += 1
                elif tj.kind == "op" and tj.value == "}":
                    d -= 1
                    if d == 0:
                        break
                j += 1
            yield (label, t.pos, toks[i + 2].pos, toks[j].pos + 1, toks[j].pos + 1)
            i = j + 1
            continue
        if t.kind == "op" and t.value in "{[(":
            depth += 1
        elif t.kind == "op" and t.value in "}])":
            depth -= 1
        i += 1


def _literal(node: Any) -> Any:
    """Evaluate a literal-only AST node (metadata of a definition)."""
    k = node[0]
    if k == "lit":
        return node[1]
    if k in ("str", "bytes"):
        return node[1] if node[1] is not None else node[2]
    if k == "num":
        return _num(node[1])
    if k == "paren":
        return _literal(node[1])
    if k == "list":
        return [_literal(e) for e in node[1] if e[0] not in ("ellipsis", "comp")]
    if k == "struct":
        out: dict = {}
        for d in node[1]:
            if d[0] == "field":
                lab = _label_name(d[1])
                if lab is None:
                    continue
                v = _literal(d[3])
                if isinstance(v, dict) and isinstance(out.get(lab), dict):
                    out[lab] = {**out[lab], **v}
                else:
                    out[lab] = v
            elif d[0] == "embed":
                v = _literal(d[1])
                if isinstance(v, dict):
                    out.update(v)
        return out
    if k == "binop" and node[1] == "|":
        return _literal(node[2])
    if k == "unary" and node[1] == "*":
        return _literal(node[2])
    return None


def _label_name(label: tuple) -> str | None:
    if label[0] == "ident":
        return label[1]
    if label[0] == "str":
        return label[1]
    if label[0] == "alias":
        return _label_name(label[2])
    return None


def _num(text: str) -> Any:
    t = text.replace("_", "")
    mult = {"K": 1000, "M": 1000 ** 2, "G": 1000 ** 3, "T": 1000 ** 4, "P": 1000 ** 5,
            "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3, "Ti": 1024 ** 4, "Pi": 1024 ** 5}
    for suf in ("Ki", "Mi", "Gi", "Ti", "Pi", "K", "M", "G", "T", "P"):
        if t.endswith(suf):
            return int(float(t[:-len(suf)]) * mult[suf])
    try:
        return int(t, 0)
    except ValueError:
        return float(t)


def _origin(rel: str) -> str:
    """A short tag for where a definition comes from: vela, vela-registry, vela-deprecated, cat, cat-exp."""
    parts = rel.replace(os.sep, "/").split("/")
    if "vela-templates" in parts or parts[0] == "kubevela":
        for sub in ("registry", "deprecated"):
            if sub in parts:
                return "vela-" + sub
        return "vela"
    return "cat-exp" if "experimental" in parts else "cat"


def read_definition(path: str, root: str) -> Definition | None:
    src = open(path, encoding="utf-8").read()
    rel = os.path.relpath(path, root)
    origin = _origin(rel)
    imports, meta_name, meta_span, tmpl_span = [], None, None, None
    for label, start, vstart, vend, end in _top_level_spans(src):
        if label == "import":
            imports.append(src[start:end])
        elif label == "template":
            tmpl_span = (vstart, vend)
        elif meta_name is None:
            meta_name, meta_span = label, (vstart, vend)
    if meta_name is None or tmpl_span is None:
        return None
    meta = _literal(("struct", Parser(src[meta_span[0] + 1:meta_span[1] - 1]).parse_decls("eof")))
    body = _dedent(src[tmpl_span[0] + 1:tmpl_span[1] - 1])
    attrs = meta.get("attributes") or {}
    status = {}
    st = attrs.get("status") or {}
    for key in ("healthPolicy", "customStatus", "details"):
        if isinstance(st.get(key), str) and st[key].strip():
            status[key] = st[key]
    return Definition(path=rel, name=meta_name, kind=str(meta.get("type", "")),
                      imports="\n".join(imports), template=body, metadata=meta, status=status,
                      origin=origin)


_KINDS = {"ComponentDefinition": "component", "TraitDefinition": "trait", "PolicyDefinition": "policy",
          "WorkflowStepDefinition": "workflow-step"}


def read_yaml_definitions(path: str, root: str) -> list[Definition]:
    """X-Definition objects (YAML) whose spec.schematic.cue.template is the template as stored."""
    import yaml
    rel = os.path.relpath(path, root)
    origin = _origin(rel)
    out = []
    with open(path, encoding="utf-8") as f:
        try:
            docs = list(yaml.safe_load_all(f))
        except yaml.YAMLError:
            return out
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") not in _KINDS:
            continue
        spec = doc.get("spec") or {}
        tmpl = (((spec.get("schematic") or {}).get("cue") or {}).get("template"))
        if not isinstance(tmpl, str) or not tmpl.strip():
            continue
        status = {k: v for k, v in (spec.get("status") or {}).items()
                  if k in ("healthPolicy", "customStatus", "details") and isinstance(v, str) and v.strip()}
        attrs = {k: v for k, v in spec.items() if k != "schematic"}
        out.append(Definition(path=rel, name=str((doc.get("metadata") or {}).get("name", "")),
                              kind=_KINDS[doc["kind"]], imports="", template=tmpl,
                              metadata={"type": _KINDS[doc["kind"]], "attributes": attrs},
                              status=status, origin=origin))
    return out


def _dedent(body: str) -> str:
    """Remove the indentation common to the body's non-blank lines; lines without it (blank ones,
    or inside multi-line strings) are kept as they are, so string values do not change."""
    lines = body.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    indents = [re.match(r"[ \t]*", ln).group(0) for ln in lines if ln.strip()]
    prefix = os.path.commonprefix(indents) if indents else ""
    out = [ln[len(prefix):] if ln.startswith(prefix) else ln for ln in lines]
    return "\n".join(out) + "\n"


def kubevela_template(d: Definition) -> str:
    """The template string KubeVela stores in spec.schematic.cue.template."""
    if d.imports.strip():
        return d.imports.strip() + "\n" + d.template
    return d.template


# --------------------------------------------------------------------------------------------------
# parameter values: from examples, or synthesized from the parameter schema
# --------------------------------------------------------------------------------------------------

NOVALUE = object()


class Schema:
    """Reads a template's parameter schema (AST) and makes plausible values for it."""

    def __init__(self, template_ast: list, seed_mode: str):
        self.mode = seed_mode            # "min": required fields only; "full": every field
        self.defs: dict[str, Any] = {}
        self.lets: dict[str, Any] = {}
        # definitions and lets wherever they are declared (nested scopes rarely reuse a name)
        for node in _walk(template_ast):
            if node[0] == "field":
                n = _label_name(node[1])
                if n and (n.startswith("#") or n.startswith("_#")) and n not in self.defs:
                    self.defs[n] = node[3]
            elif node[0] == "let" and len(node) == 3 and isinstance(node[1], str):
                self.lets.setdefault(node[1], node[2])
        for d in template_ast:
            if d[0] == "field":
                n = _label_name(d[1])
                if n and n in self.defs and d[3] is not self.defs[n]:
                    self.defs[n] = self._merge(self.defs[n], d[3])
        # plain fields used as types (`items: [...item]` with `item: {...}` beside the parameter)
        self.fields: dict[str, Any] = {}
        for node in _walk(template_ast):
            if node[0] == "field":
                n = _label_name(node[1])
                if n and n not in self.fields and n != "parameter":
                    self.fields[n] = node[3]
        # parameter fields the template decodes as JSON or YAML text
        self.encoded: dict[str, str] = {}
        for node in _walk(template_ast):
            if node[0] == "call" and node[1][0] == "sel" and node[1][2] in ("Unmarshal", "Validate") \
                    and node[1][1][0] == "ident" and node[2]:
                arg = node[2][0]
                while arg[0] == "sel":
                    if arg[1][0] == "ident" and arg[1][1] == "parameter":
                        self.encoded[arg[2]] = node[1][1][1]
                        break
                    arg = arg[1]
        self.params = None
        for d in template_ast:
            if d[0] == "field" and _label_name(d[1]) == "parameter":
                self.params = self._merge(self.params, d[3])
        if self.params is None:
            # no `parameter:` of its own, but e.g. `_params: #parameter & parameter`
            for node in _walk(template_ast):
                if node[0] == "binop" and node[1] == "&":
                    a, b = node[2], node[3]
                    if b == ("ident", "parameter"):
                        a, b = b, a
                    if a == ("ident", "parameter") and b[0] in ("ident", "struct", "call"):
                        self.params = b
                        break
        self.depth = 0

    @staticmethod
    def _merge(a: Any, b: Any) -> Any:
        if a is None:
            return b
        return ("binop", "&", a, b)

    def value(self) -> Any:
        if self.params is None:
            return {}
        v = self.gen(self.params, "parameter", required=True)
        return {} if v is NOVALUE else v

    # constraint analysis --------------------------------------------------------------------
    def flatten(self, node: Any, seen: tuple = ()) -> dict:
        """Return a summary: {kinds:set, lits:[..], default:[..], bounds:{}, regex:[..],
        structs:[struct-decls], lists:[list-nodes], alts:[summary...]}"""
        s = {"kinds": set(), "lits": [], "default": [], "lo": None, "hi": None, "regex": [],
             "structs": [], "lists": [], "alts": [], "unknown": False, "maps": []}
        self._collect(node, s, seen)
        return s

    def _collect(self, node: Any, s: dict, seen: tuple) -> None:
        k = node[0]
        if k == "paren":
            return self._collect(node[1], s, seen)
        if k == "binop" and node[1] == "&":
            self._collect(node[2], s, seen)
            self._collect(node[3], s, seen)
            return
        if k == "binop" and node[1] == "|":
            alts = []
            self._alts(node, alts)
            defaults = [a[2] for a in alts if a[0] == "unary" and a[1] == "*"]
            plain = [a[2] if a[0] == "unary" and a[1] == "*" else a for a in alts]
            plain = [a for a in plain if a[0] != "bottom"]
            if defaults:
                for dnode in defaults:
                    dv = self._literal_value(dnode)
                    if dv is not NOVALUE:
                        s["default"].append(dv)
                    else:
                        s["default"].append(("node", dnode))
            subs = [self.flatten(a, seen) for a in plain]
            if all(sub["lits"] and not sub["kinds"] for sub in subs):
                for sub in subs:
                    s["lits"].extend(sub["lits"])
                s["enum"] = True
            else:
                s["alts"].append(subs)
            return
        if k == "unary" and node[1] == "*":
            dv = self._literal_value(node[2])
            s["default"].append(dv if dv is not NOVALUE else ("node", node[2]))
            return self._collect(node[2], s, seen)
        if k == "unary" and node[1] in (">", ">=", "<", "<="):
            v = self._literal_value(node[2])
            if isinstance(v, (int, float)):
                if node[1] in (">", ">="):
                    lo = v + (1 if node[1] == ">" and isinstance(v, int) else 0)
                    s["lo"] = lo if s["lo"] is None else max(s["lo"], lo)
                else:
                    hi = v - (1 if node[1] == "<" and isinstance(v, int) else 0)
                    s["hi"] = hi if s["hi"] is None else min(s["hi"], hi)
                s["kinds"].add("number")
            elif isinstance(v, str):
                s["kinds"].add("string")
            return
        if k == "unary" and node[1] in ("=~",):
            v = self._literal_value(node[2])
            if isinstance(v, str):
                s["regex"].append(v)
            s["kinds"].add("string")
            return
        if k == "unary" and node[1] in ("!=", "!~"):
            return
        if k == "unary" and node[1] == "-":
            v = self._literal_value(node)
            if v is not NOVALUE:
                s["lits"].append(v)
            return
        if k in ("lit", "str", "num", "bytes"):
            v = self._literal_value(node)
            if v is not NOVALUE:
                s["lits"].append(v)
            else:
                s["kinds"].add("string")
            return
        if k == "ident":
            name = node[1]
            builtin = {"string": "string", "int": "int", "float": "float", "number": "number",
                       "bool": "bool", "bytes": "bytes", "null": "null", "uint": "int",
                       "int8": "int", "int16": "int", "int32": "int", "int64": "int",
                       "uint8": "int", "uint16": "int", "uint32": "int", "uint64": "int",
                       "float32": "float", "float64": "float", "rune": "int", "byte": "int"}
            if name in builtin:
                s["kinds"].add(builtin[name])
                if name.startswith("uint") and s["lo"] is None:
                    s["lo"] = 0
                return
            if name == "_":
                s["kinds"].add("top")
                return
            if name in self.defs and name not in seen:
                return self._collect(self.defs[name], s, seen + (name,))
            if name in self.lets and name not in seen:
                return self._collect(self.lets[name], s, seen + (name,))
            if name in self.fields and name not in seen and self.fields[name][0] in ("struct", "binop", "call"):
                return self._collect(self.fields[name], s, seen + (name,))
            s["unknown"] = True
            return
        if k == "struct":
            s["structs"].append(node[1])
            s["kinds"].add("struct")
            return
        if k == "list":
            s["lists"].append(node[1])
            s["kinds"].add("list")
            return
        if k == "call":
            fn = node[1]
            if fn[0] == "ident" and fn[1] == "close" and node[2]:
                return self._collect(node[2][0], s, seen)
            if fn[0] == "sel" and fn[1][0] == "ident":
                pkg, name = fn[1][1], fn[2]
                if pkg == "strings":
                    s["kinds"].add("string")
                    if name == "MinRunes":
                        s["minrunes"] = self._literal_value(node[2][0]) if node[2] else 1
                elif pkg == "list":
                    s["kinds"].add("list")
                    if name == "MinItems":
                        s["minitems"] = self._literal_value(node[2][0]) if node[2] else 1
                elif pkg == "net":
                    s["kinds"].add("string")
                else:
                    s["unknown"] = True
                return
            s["unknown"] = True
            return
        if k == "sel" and node[1][0] == "ident" and node[1][1] in self.defs:
            # #Def.field
            return self._collect(self._select(self.defs[node[1][1]], node[2]) or ("ident", "_"), s, seen)
        s["unknown"] = True

    def _select(self, node: Any, name: str) -> Any:
        if node[0] == "struct":
            for d in node[1]:
                if d[0] == "field" and _label_name(d[1]) == name:
                    return d[3]
        return None

    def _alts(self, node: Any, out: list) -> None:
        if node[0] == "binop" and node[1] == "|":
            self._alts(node[2], out)
            self._alts(node[3], out)
        elif node[0] == "paren" and node[1][0] == "binop" and node[1][1] == "|":
            self._alts(node[1], out)
        else:
            out.append(node)

    def _literal_value(self, node: Any) -> Any:
        k = node[0]
        if k == "lit":
            return node[1]
        if k == "str":
            return node[1] if node[1] is not None else NOVALUE
        if k == "num":
            return _num(node[1])
        if k == "paren":
            return self._literal_value(node[1])
        if k == "unary" and node[1] == "-":
            v = self._literal_value(node[2])
            return -v if isinstance(v, (int, float)) else NOVALUE
        if k == "list":
            vals = []
            for e in node[1]:
                if e[0] in ("ellipsis", "comp"):
                    if e[0] == "ellipsis":
                        continue
                    return NOVALUE
                v = self._literal_value(e)
                if v is NOVALUE:
                    return NOVALUE
                vals.append(v)
            return vals
        if k == "struct":
            out = {}
            for d in node[1]:
                if d[0] != "field" or d[2] == "?":
                    if d[0] == "field":
                        continue
                    return NOVALUE
                v = self._literal_value(d[3])
                n = _label_name(d[1])
                if v is NOVALUE or n is None:
                    return NOVALUE
                out[n] = v
            return out
        return NOVALUE

    # generation --------------------------------------------------------------------------------
    def gen(self, node: Any, hint: str, required: bool) -> Any:
        s = self.flatten(node)
        if s["default"] and self.mode == "min":
            return NOVALUE
        self.depth += 1
        try:
            if self.depth > 12:
                return NOVALUE
            return self._gen_from(s, hint)
        finally:
            self.depth -= 1

    def _gen_from(self, s: dict, hint: str) -> Any:
        if s["lits"]:
            lits = s["lits"]
            if self.mode == "full" and s.get("enum") and len(lits) > 1:
                non_default = [v for v in lits if v not in [d for d in s["default"]]]
                if non_default:
                    return non_default[0]
            if s["default"] and not isinstance(s["default"][0], tuple):
                return s["default"][0]
            return lits[0]
        if s["alts"]:
            # a disjunction of types: pick the alternative the default belongs to, else the first
            subs = s["alts"][0]
            pick = subs[0]
            if self.mode == "full" and s["default"]:
                dv = s["default"][0]
                for sub in subs:
                    if not (sub["lits"] and dv in sub["lits"]):
                        pick = sub
                        break
            merged = dict(pick)
            for key in ("structs", "lists"):
                merged[key] = pick[key] + s[key]
            merged["kinds"] = pick["kinds"] | s["kinds"]
            for key in ("lo", "hi"):
                if merged.get(key) is None:
                    merged[key] = s[key]
            merged["regex"] = pick["regex"] + s["regex"]
            merged["default"] = []
            return self._gen_from(merged, hint)
        if s["default"] and not isinstance(s["default"][0], tuple) and self.mode == "min":
            return NOVALUE
        kinds = s["kinds"]
        if "struct" in kinds or s["structs"]:
            return self._gen_struct(s["structs"], hint)
        if "list" in kinds or s["lists"]:
            return self._gen_list(s["lists"], hint, s)
        if "string" in kinds or "bytes" in kinds:
            return self._gen_string(hint, s)
        if "int" in kinds or "number" in kinds:
            return self._gen_int(hint, s)
        if "float" in kinds:
            return float(self._gen_int(hint, s)) + 0.5
        if "bool" in kinds:
            return True
        if "null" in kinds:
            return None
        if "top" in kinds or s["unknown"]:
            return guess_by_name(hint)
        if s["default"]:
            d = s["default"][0]
            return d if not isinstance(d, tuple) else NOVALUE
        return guess_by_name(hint)

    def _gen_struct(self, structs: list, hint: str) -> Any:
        out: dict = {}
        patterns = []
        conds = []
        for decls in structs:
            for d in self._expand(decls):
                if d[0] == "field":
                    name = _label_name(d[1])
                    if name is None or name.startswith("_") or name.startswith("#"):
                        continue
                    optional = d[2] == "?"
                    if optional and self.mode == "min":
                        continue
                    v = self.gen(d[3], name, required=not optional)
                    if v is NOVALUE:
                        continue
                    if name in out and isinstance(out[name], dict) and isinstance(v, dict):
                        out[name] = {**out[name], **v}
                    else:
                        out[name] = v
                elif d[0] == "pattern":
                    patterns.append(d)
                elif d[0] == "comp":
                    conds.append(d)
        # `if type == "pvc" { claimName: string }`: the fields the values chosen so far switch on
        for d in conds:
            if all(c[0] == "if" and _cond(c[1], out) is True for c in d[1]) and d[2][0] == "struct":
                extra = self._gen_struct([d[2][1]], hint)
                if isinstance(extra, dict):
                    for k, v in extra.items():
                        out.setdefault(k, v)
        if not out and patterns and (self.mode == "full" or self.depth <= 2):
            d = patterns[0]
            key = "app" if re.search("label|selector", hint, re.I) else (
                "example.com/owner" if re.search("annotation", hint, re.I) else "key1")
            v = self.gen(d[2], key, required=True)
            if v is not NOVALUE:
                out[key] = v
        return out

    def _expand(self, decls: list) -> Iterator[tuple]:
        for d in decls:
            if d[0] == "embed":
                s = self.flatten(d[1])
                for st in s["structs"]:
                    yield from self._expand(st)
            else:
                yield d

    def _gen_list(self, lists: list, hint: str, s: dict) -> Any:
        elem_nodes = []
        fixed = None
        for elems in lists:
            typed = [e for e in elems if e[0] == "ellipsis"]
            plain = [e for e in elems if e[0] not in ("ellipsis", "comp")]
            if typed and typed[0][1] is not None:
                elem_nodes.append(typed[0][1])
            elif plain and not typed:
                fixed = plain
            elif plain:
                elem_nodes.extend(plain[:1])
        singular = re.sub(r"(ies)$", "y", hint)
        singular = re.sub(r"(s)$", "", singular) if singular == hint else singular
        if fixed is not None:
            vals = [self.gen(e, singular, True) for e in fixed]
            return [v for v in vals if v is not NOVALUE]
        if not elem_nodes:
            g = guess_by_name(hint)
            return g if isinstance(g, list) else []
        node = elem_nodes[0]
        for extra in elem_nodes[1:]:
            node = ("binop", "&", node, extra)
        saved = self.mode
        # list elements are filled like required structs in both modes
        v = self.gen(node, singular, True)
        self.mode = saved
        if v is NOVALUE:
            return []
        if hint in ("command", "cmd", "args") and isinstance(v, str):
            return ["sh", "-c", "echo hello"] if hint != "args" else ["--verbose"]
        return [v]

    def _gen_string(self, hint: str, s: dict) -> str:
        if hint in self.encoded:
            return '{"title": "demo", "uid": "demo"}' if self.encoded[hint] == "json" else "title: demo\n"
        cands = []
        g = guess_by_name(hint)
        if isinstance(g, str):
            cands.append(g)
        cands += ["demo", "demo-1", "1Gi", "500m", "1", "10", "a", "v1", "default", "Always", "TCP",
                  "example.com", "https://example.com", "/data", "10s", "1.0.0", "demo.example.com",
                  "a1b2c3", "*/5 * * * *", "00:00", "0 0 * * *", "10.0.0.1", "10.0.0.0/16",
                  "us-east-1", "1h", "5m", "true", "ReadWriteOnce"]
        for c in cands:
            if all(_re_ok(r, c) for r in s["regex"]):
                mr = s.get("minrunes")
                if isinstance(mr, int) and len(c) < mr:
                    continue
                return c
        return cands[0]

    def _gen_int(self, hint: str, s: dict) -> int:
        g = guess_by_name(hint)
        v = g if isinstance(g, int) and not isinstance(g, bool) else 1
        if s["lo"] is not None and v < s["lo"]:
            v = int(s["lo"]) if float(s["lo"]).is_integer() else s["lo"]
        if s["hi"] is not None and v > s["hi"]:
            v = int(s["hi"]) if float(s["hi"]).is_integer() else s["hi"]
        return v


def _cond(node: Any, env: dict) -> Any:
    """Evaluate a guard over sibling values: ==, !=, &&, ||, !, `x != _|_`; None when unknown."""
    k = node[0]
    if k == "paren":
        return _cond(node[1], env)
    if k == "unary" and node[1] == "!":
        v = _cond(node[2], env)
        return None if v is None else not v
    if k == "binop" and node[1] in ("&&", "||"):
        a, b = _cond(node[2], env), _cond(node[3], env)
        if a is None or b is None:
            return None
        return (a and b) if node[1] == "&&" else (a or b)
    if k == "binop" and node[1] in ("==", "!="):
        l, r = node[2], node[3]
        if r[0] == "ident" and l[0] != "ident":
            l, r = r, l
        if l[0] != "ident":
            return None
        if r[0] == "bottom":
            present = l[1] in env
            return (not present) if node[1] == "==" else present
        if l[1] not in env:
            return None
        lit = {"lit": lambda n: n[1], "str": lambda n: n[1], "num": lambda n: _num(n[1])}.get(r[0])
        if lit is None:
            return None
        same = env[l[1]] == lit(r)
        return same if node[1] == "==" else not same
    if k == "ident" and isinstance(env.get(node[1]), bool):
        return env[node[1]]
    return None


def _re_ok(pattern: str, s: str) -> bool:
    try:
        return re.search(pattern, s) is not None
    except re.error:
        return True


_NAME_GUESSES = [
    (r"^image$|image$", "nginx:1.25"),
    (r"^namespace$|namespace$", "default"),
    (r"^(cpu|cpuLimit|cpuRequest)$", "500m"),
    (r"mem(ory)?", "512Mi"),
    (r"storage|capacity|size$|disk", "1Gi"),
    (r"^(port|containerPort|targetPort|servicePort|nodePort)$|port$", 8080),
    (r"replica|instances|count", 2),
    (r"percent|weight|utilization|threshold|ratio", 50),
    (r"timeoutSeconds|seconds$|periodSeconds|Seconds$", 10),
    (r"schedule|cron", "*/5 * * * *"),
    (r"mountPath|^path$|Path$|dir$", "/data"),
    (r"^url$|url$|Url$|URL$|endpoint|webhook", "https://example.com"),
    (r"host|domain", "demo.example.com"),
    (r"email", "admin@example.com"),
    (r"password|secret(Key)?$|token|apiKey|accessKey", "s3cr3t"),
    (r"region", "us-east-1"),
    (r"zone", "us-east-1a"),
    (r"version", "1.0.0"),
    (r"^tag$", "latest"),
    (r"duration|timeout|interval|period|delay|^time$", "30s"),
    (r"protocol", "TCP"),
    (r"^key$|Key$", "key1"),
    (r"^value$|Value$", "value1"),
    (r"^(command|cmd)$", ["sh", "-c", "echo hello"]),
    (r"^args$", ["--verbose"]),
    (r"^(labels|annotations|selector|matchLabels|nodeSelector)$", {"app": "demo"}),
    (r"^env$", [{"name": "MODE", "value": "demo"}]),
    (r"[nN]ame$|^name", "demo"),
    (r"^(enabled?|enable[A-Z].*|is[A-Z].*)$", True),
    (r"^(id|uid)$", "a1b2c3"),
    (r"^(ip|address|addr)$", "10.0.0.1"),
    (r"cidr", "10.0.0.0/16"),
    (r"^(type|kind)$", "demo"),
]


def guess_by_name(hint: str) -> Any:
    for pat, val in _NAME_GUESSES:
        if re.search(pat, hint):
            return json.loads(json.dumps(val))
    return "demo"


# examples -----------------------------------------------------------------------------------------

def load_examples(root: str | None) -> dict:
    """Collect (kind, type) -> [ {properties, component, app} ] from Application documents found in
    YAML files and in ```yaml blocks of Markdown files under root."""
    import yaml  # PyYAML is a dependency of the project's tooling
    found: dict = collections.defaultdict(list)
    if not root or not os.path.isdir(root):
        return found
    for dirpath, _, files in sorted(os.walk(root)):
        for fn in sorted(files):
            p = os.path.join(dirpath, fn)
            try:
                text = open(p, encoding="utf-8").read()
            except (UnicodeDecodeError, OSError):
                continue
            chunks = []
            if fn.endswith(".md"):
                chunks = re.findall(r"```ya?ml[^\n]*\n(.*?)```", text, re.S)
            elif fn.endswith((".yaml", ".yml")):
                chunks = [text]
            for chunk in chunks:
                try:
                    docs = list(yaml.safe_load_all(chunk))
                except Exception:
                    continue
                for doc in docs:
                    _collect_app(doc, found, os.path.relpath(p, root))
    return found


def _collect_app(doc: Any, found: dict, where: str) -> None:
    if not isinstance(doc, dict) or doc.get("kind") != "Application":
        return
    spec = doc.get("spec") or {}
    meta = doc.get("metadata") or {}
    comps = [c for c in (spec.get("components") or []) if isinstance(c, dict)]
    app = {"name": meta.get("name") or "demo-app", "namespace": meta.get("namespace") or "default",
           "labels": meta.get("labels") or {}, "annotations": meta.get("annotations") or {},
           "components": comps, "where": where}
    for c in comps:
        props = c.get("properties")
        if isinstance(c.get("type"), str) and isinstance(props, dict):
            found[("component", c["type"])].append({"properties": props, "component": c, "app": app})
        for t in c.get("traits") or []:
            if isinstance(t, dict) and isinstance(t.get("type"), str) and isinstance(t.get("properties"), dict):
                found[("trait", t["type"])].append({"properties": t["properties"], "component": c, "app": app})
    for pol in spec.get("policies") or []:
        if isinstance(pol, dict) and isinstance(pol.get("type"), str) and isinstance(pol.get("properties"), dict):
            found[("policy", pol["type"])].append({"properties": pol["properties"], "component": None,
                                                   "app": app, "policy_name": pol.get("name")})


def _has_placeholder(v: Any) -> bool:
    s = json.dumps(v)
    return bool(re.search(r"<[a-zA-Z][^>]*>|\$\{|\{\{", s))


# --------------------------------------------------------------------------------------------------
# context and assembly
# --------------------------------------------------------------------------------------------------

CLUSTER_VERSION = {"gitVersion": "v1.29.2", "major": "1", "minor": 29, "platform": "linux/amd64"}


class Ordered(dict):
    """A Go struct or a RawExtension: json.Marshal keeps its field order instead of sorting."""


def go_json(v: Any) -> str:
    """json.Marshal as Go does it: map keys sorted (Ordered keeps its order), compact, HTML
    characters escaped, integral float64 values without a fraction (YAML numbers are float64)."""
    return _go(v).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026") \
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _go(v: Any) -> str:
    if isinstance(v, dict):
        items = v.items() if isinstance(v, Ordered) else sorted(v.items())
        return "{" + ",".join(json.dumps(str(k), ensure_ascii=False) + ":" + _go(x) for k, x in items) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_go(x) for x in v) + "]"
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e21:
        return str(int(v))
    if isinstance(v, float):
        r = repr(v)
        if "e" in r:
            m, e = r.split("e")
            r = f"{m}e{'+' if not e.startswith('-') else '-'}{int(e.lstrip('+-')):02d}"
        return r
    if isinstance(v, (bool, type(None), int, str)):
        return json.dumps(v, ensure_ascii=False)
    return json.dumps(str(v), ensure_ascii=False)


def typical_workload(kind: str, name: str, image: str = "nginx:1.25") -> dict:
    """What a component renders before traits run (context.output of a trait), in KubeVela's shape."""
    labels = {"app.oam.dev/component": name, "app.oam.dev/name": "demo-app"}
    pod = {"metadata": {"labels": {"app.oam.dev/component": name, "app.oam.dev/name": "demo-app"}},
           "spec": {"containers": [{"name": name, "image": image,
                                    "ports": [{"containerPort": 80, "name": "port-80", "protocol": "TCP"}]}]}}
    if kind == "HelmRelease":
        return {"apiVersion": "helm.toolkit.fluxcd.io/v2beta1", "kind": "HelmRelease",
                "metadata": {"name": name},
                "spec": {"interval": "30s", "chart": {"spec": {"chart": "podinfo", "version": "6.5.0",
                                                               "sourceRef": {"kind": "HelmRepository",
                                                                             "name": "demo-repo"}}},
                         "values": {}}}
    if kind == "StatefulSet":
        return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "labels": labels},
                "spec": {"replicas": 1, "serviceName": name,
                         "selector": {"matchLabels": {"app.oam.dev/component": name}}, "template": pod}}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"labels": {"app.oam.dev/component": name, "app.oam.dev/name": "demo-app"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app.oam.dev/component": name}},
                     "template": pod}}


def workload_kind_for(meta: dict) -> str:
    applies = [str(a).lower() for a in ((meta.get("attributes") or {}).get("appliesToWorkloads") or [])]
    if applies and all("helmrelease" in a for a in applies):
        return "HelmRelease"
    if applies and not any(a in ("*", "deployments.apps", "webservice", "worker") or "deployment" in a
                           for a in applies) and any("statefulset" in a for a in applies):
        return "StatefulSet"
    return "Deployment"


@dataclass
class Case:
    name: str
    text: str
    expression: str
    definition: str
    kind: str
    variant: str
    source: str
    parameter: Any


def build_context(kind: str, app: dict, comp_name: str, comp_type: str, comp_props: dict,
                  traits: list, parameter_in_context: Any, output: dict | None = None,
                  outputs: dict | None = None, policy: bool = False) -> dict:
    components = []
    for c in app.get("components_override") or [{"name": comp_name, "type": comp_type,
                                                  "properties": comp_props, "traits": traits}]:
        # common.ApplicationComponent's JSON: name, type, externalRevision, properties, dependsOn,
        # inputs, outputs, traits, scopes (empty ones left out); properties are raw JSON
        entry = Ordered(name=c.get("name", ""), type=c.get("type", ""))
        for key in ("externalRevision", "properties", "dependsOn", "inputs", "outputs", "traits", "scopes"):
            val = c.get(key)
            if val in (None, "", [], {}) and key != "properties":
                continue
            if val is None:
                continue
            if key == "properties":
                val = _ordered_deep(val)
            if key == "traits":
                val = [Ordered(type=t.get("type", ""), **({"properties": _ordered_deep(t["properties"])}
                                                          if t.get("properties") is not None else {}))
                       for t in val if isinstance(t, dict)]
            entry[key] = val
        components.append(entry)
    ctx = {
        "appAnnotations": app.get("annotations") or {},
        "appLabels": app.get("labels") or {},
        "appName": app["name"],
        "appRevision": app["name"] + "-v1",
        "appRevisionNum": 1,
        "cluster": "" if policy else "local",
        "clusterVersion": CLUSTER_VERSION,
        "components": components,
        "name": comp_name,
        "namespace": app.get("namespace") or "default",
        "publishVersion": "",
        "replicaKey": "",
        "revision": "" if policy else "7d9c8f6b5",
        "workflowName": "",
    }
    if parameter_in_context is not None:
        ctx["parameter"] = parameter_in_context
    if kind == "trait":
        ctx["componentType"] = comp_type
        ctx["output"] = output or {}
        if outputs:
            ctx["outputs"] = outputs
    return ctx


def _ordered_deep(v: Any) -> Any:
    if isinstance(v, dict):
        return Ordered((k, _ordered_deep(x)) for k, x in v.items())
    if isinstance(v, list):
        return [_ordered_deep(x) for x in v]
    return v


def assemble_program(d: Definition, parameter: Any, context: dict) -> str:
    tmpl = kubevela_template(d)
    if d.kind == "trait":
        text = tmpl + "\n"
        if parameter is not None:
            text += "parameter: " + go_json(parameter) + "\n"
        return text + "context: " + go_json(context) + "\n"
    param_file = "parameter: {}" if parameter is None else "parameter: " + go_json(parameter)
    return "\n".join([tmpl + "\ncontext: _\nparameter: _\n", param_file, "context: " + go_json(context)]) + "\n"


def assemble_status(template: str, parameter: Any, context: dict) -> str:
    ptxt = "parameter: {}\n" if parameter is None else "parameter: " + go_json(parameter) + "\n"
    return template + "\n" + "context: " + go_json(context) + "\n" + ptxt


def top_fields(ast: list) -> set:
    """Labels of the template's top-level fields, also those inside top-level comprehensions."""
    names = set()
    for d in ast:
        if d[0] == "field":
            n = _label_name(d[1])
            if n:
                names.add(n)
        elif d[0] == "comp" and d[2][0] == "struct":
            names |= top_fields(d[2][1])
        elif d[0] == "embed" and d[1][0] == "struct":
            names |= top_fields(d[1][1])
    return names


def export_expressions(d: Definition, ast: list | None) -> list[str]:
    names = top_fields(ast) if ast is not None else set(
        re.findall(r"^(output|outputs|patch|patchOutputs)\s*:", d.template, re.M))
    if ast is None:
        names |= {m for m in re.findall(r"^\s*(output|outputs|patch)\s*:", d.template, re.M)}
    exprs = [e for e in ("output", "outputs", "patch") if e in names]
    if not exprs and d.kind == "policy":
        exprs = ["parameter"]
    return exprs


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", s).strip("-") or "x"


def live_status(obj: dict, name: str = "frontend", namespace: str = "default") -> dict:
    """A running object as the API server returns it: the rendered object with its name, namespace
    and generation, and a healthy-looking status for the kinds KubeVela's health policies read."""
    o = json.loads(json.dumps(obj))
    if not isinstance(o.get("metadata"), dict):
        o["metadata"] = {}
    o["metadata"].setdefault("name", name)
    o["metadata"].setdefault("namespace", namespace)
    o["metadata"].setdefault("generation", 1)
    kind = o.get("kind")
    spec = o.get("spec")
    # the API server's defaults for the fields health policies read
    if isinstance(spec, dict) and kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        spec.setdefault("replicas", 1)
    if isinstance(spec, dict) and kind == "Job":
        spec.setdefault("parallelism", 1)
        spec.setdefault("completions", 1)
        spec.setdefault("backoffLimit", 6)
    replicas = (o.get("spec") or {}).get("replicas", 1) if isinstance(o.get("spec"), dict) else 1
    if not isinstance(replicas, int):
        replicas = 1
    if kind in ("Deployment", "StatefulSet", "ReplicaSet", "CloneSet"):
        o["status"] = {"observedGeneration": 1, "replicas": replicas, "readyReplicas": replicas,
                       "updatedReplicas": replicas, "availableReplicas": replicas, "currentReplicas": replicas}
    elif kind == "DaemonSet":
        o["status"] = {"observedGeneration": 1, "desiredNumberScheduled": 1, "numberReady": 1,
                       "updatedNumberScheduled": 1, "numberAvailable": 1, "currentNumberScheduled": 1}
    elif kind == "Job":
        o["status"] = {"succeeded": 1, "active": 0, "failed": 0}
    elif kind == "CronJob":
        o["status"] = {"lastScheduleTime": "2024-01-01T00:00:00Z"}
    elif kind == "Service":
        o["status"] = {"loadBalancer": {"ingress": [{"ip": "10.0.0.10"}]}}
        o.setdefault("spec", {}).setdefault("clusterIP", "10.96.0.10")
    elif kind == "Ingress":
        o["status"] = {"loadBalancer": {"ingress": [{"ip": "10.0.0.11"}]}}
    elif kind == "PersistentVolumeClaim":
        o["status"] = {"phase": "Bound"}
    else:
        o["status"] = {"phase": "Running", "state": "Running", "status": "Completed", "observedGeneration": 1,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
                                       "message": "ready"}]}
    return o


class Assembler:
    def __init__(self, defs_root: str, examples_root: str | None, max_examples: int = 2,
                 variants: tuple = ("min", "full"), oracle_dir: str | None = None):
        self.defs_root = defs_root
        self.oracle_dir = oracle_dir
        self.examples = load_examples(examples_root)
        self.max_examples = max_examples
        self.variants = variants
        self.definitions: list[Definition] = []
        self.skipped: list[tuple[str, str]] = []
        for dirpath, _, files in sorted(os.walk(defs_root)):
            for fn in sorted(files):
                p = os.path.join(dirpath, fn)
                if fn.endswith((".yaml", ".yml")):
                    found = read_yaml_definitions(p, defs_root)
                    if not found:
                        self.skipped.append((os.path.relpath(p, defs_root), "no X-Definition with a CUE schematic"))
                    self.definitions.extend(found)
                    continue
                if not fn.endswith(".cue"):
                    continue
                try:
                    d = read_definition(p, defs_root)
                except ParseError as e:
                    self.skipped.append((os.path.relpath(p, defs_root), f"cannot split: {e}"))
                    continue
                if d is None:
                    self.skipped.append((os.path.relpath(p, defs_root), "no metadata or no template field"))
                    continue
                self.definitions.append(d)

    def parameter_sets(self, d: Definition, ast: list | None) -> list[tuple[str, Any, dict | None]]:
        """[(variant, parameter, example)]"""
        out: list[tuple[str, Any, dict | None]] = []
        seen = set()
        for ex in self.examples.get((d.kind, d.name), []):
            props = ex["properties"]
            key = go_json(props)
            if key in seen or _has_placeholder(props):
                continue
            seen.add(key)
            out.append((f"ex{len([o for o in out if o[0].startswith('ex')]) + 1}", props, ex))
            if len(out) >= self.max_examples:
                break
        if ast is not None:
            for mode in self.variants:
                try:
                    v = Schema(ast, mode).value()
                except RecursionError:
                    continue
                key = go_json(v)
                if key in seen:
                    continue
                seen.add(key)
                out.append((mode, v, None))
        elif not out:
            out.append(("empty", {}, None))
        return out

    def cases(self, kinds: tuple = ("component", "trait", "policy"), status: bool = True) -> list[Case]:
        cases: list[Case] = []
        names: set[str] = set()
        for d in self.definitions:
            if d.kind not in kinds:
                continue
            try:
                ast = parse_cue(kubevela_template(d))
            except ParseError as e:
                d.error = f"schema not read: {e}"
                ast = None
            exprs = export_expressions(d, ast)
            if not exprs:
                self.skipped.append((d.path, "nothing to export (no output/outputs/patch)"))
                continue
            stem, n = f"{d.origin}.{_slug(d.name)}", 2
            while stem in names:   # the same name twice in one origin
                stem, n = f"{d.origin}.{_slug(d.name)}-{n}", n + 1
            names.add(stem)
            for variant, param, ex in self.parameter_sets(d, ast):
                prog, ctx = self._program(d, param, ex)
                base = f"{stem}.{variant}"
                for e in exprs:
                    cases.append(Case(name=f"{base}.{e}", text=prog, expression=e, definition=d.name,
                                      kind=d.kind, variant=variant, source=d.path, parameter=param))
                if status and d.status:
                    cases.extend(self._status_cases(d, base, param, ctx))
        return cases

    def _program(self, d: Definition, param: Any, ex: dict | None) -> tuple[str, dict]:
        app = {"name": "demo-app", "namespace": "default", "labels": {}, "annotations": {}}
        comp_name = "frontend"
        if ex is not None:
            exapp = ex["app"]
            app.update({k: exapp[k] for k in ("name", "namespace", "labels", "annotations")})
            app["labels"] = {k: str(v) for k, v in (app["labels"] or {}).items()}
            app["annotations"] = {k: str(v) for k, v in (app["annotations"] or {}).items()}
            if ex.get("component"):
                comp_name = ex["component"].get("name") or comp_name
            if exapp.get("components"):
                app["components_override"] = exapp["components"]
        if d.kind == "component":
            ctx = build_context("component", app, comp_name, d.name, param, [], param)
        elif d.kind == "trait":
            wk = workload_kind_for(d.metadata)
            comp_type = "webservice"
            comp_props = {"image": "nginx:1.25", "ports": [{"port": 80, "expose": True}]}
            if ex is not None and ex.get("component"):
                comp_type = ex["component"].get("type") or comp_type
                comp_props = ex["component"].get("properties") or comp_props
            if wk == "HelmRelease":
                comp_type = "helm"
                comp_props = {"chart": "podinfo", "url": "https://stefanprodan.github.io/podinfo",
                              "repoType": "helm", "version": "6.5.0"}
            elif wk == "StatefulSet":
                comp_type = "statefulset"
            image = comp_props.get("image") if isinstance(comp_props.get("image"), str) else "nginx:1.25"
            output = typical_workload(wk, comp_name, image)
            traits = [{"type": d.name, "properties": param}]
            ctx = build_context("trait", app, comp_name, comp_type, comp_props, traits, comp_props,
                                output=output)
        else:
            pname = (ex or {}).get("policy_name") or "demo-policy"
            ctx = build_context("policy", app, pname, d.name, None, [], None, policy=True)
            ctx["components"] = [{"name": "frontend", "type": "webservice",
                                  "properties": {"image": "nginx:1.25"}}]
            ctx["artifacts"] = {"frontend": {"workload": typical_workload("Deployment", "frontend")}}
        return assemble_program(d, param, ctx), ctx

    def _rendered(self, case_name: str) -> Any:
        """What real CUE rendered for a case in an earlier run (its .oracle.json), if it succeeded."""
        if not self.oracle_dir:
            return None
        p = os.path.join(self.oracle_dir, case_name + ".oracle.json")
        try:
            with open(p) as f:
                res = json.load(f)
            return json.loads(res["stdout"]) if res.get("code") == 0 else None
        except (OSError, ValueError, KeyError):
            return None

    def _status_cases(self, d: Definition, base: str, param: Any, render_ctx: dict) -> list[Case]:
        """Health and custom status as KubeVela evaluates them (pkg/cue/definition/health): the
        template context {name, appName, appRevision, output (components only), outputs, parameter,
        status} with the objects as read back from the cluster. The rendered objects come from real
        CUE's answers of this definition's own cases when they are there (run the oracle, assemble
        again, run the oracle on the status cases); before that, a typical Deployment stands in."""
        out = []
        ctx: dict = {"appName": render_ctx["appName"], "appRevision": render_ctx["appRevision"],
                     "name": render_ctx["name"]}
        ns = render_ctx["namespace"]
        if d.kind == "component":
            obj = self._rendered(base + ".output")
            if not isinstance(obj, dict):
                obj = typical_workload("Deployment", render_ctx["name"])
            ctx["output"] = live_status(obj, render_ctx["name"], ns)
        aux = self._rendered(base + ".outputs")
        if isinstance(aux, dict) and aux:
            ctx["outputs"] = {k: live_status(v, k, ns) if isinstance(v, dict) else v for k, v in aux.items()}
        ctx["parameter"] = param
        details = {} if "details" in d.status else None
        for key, expr in (("healthPolicy", "isHealth"), ("customStatus", "message")):
            if key not in d.status:
                continue
            c = dict(ctx)
            c["status"] = {} if details is None else {"details": details}
            if key == "customStatus":
                c["status"] = {**c["status"], "healthy": True}
            out.append(Case(name=f"{base}.status-{expr}", text=assemble_status(d.status[key], param, c),
                            expression=expr, definition=d.name, kind=d.kind + "-status", variant=base.split(".")[-1],
                            source=d.path, parameter=param))
        return out


# --------------------------------------------------------------------------------------------------
# feature census
# --------------------------------------------------------------------------------------------------

def feature_census(defs: list[Definition], kinds: tuple) -> dict:
    """Per feature: the number of definitions whose template (and, separately, status programs) use it."""
    tmpl_counts: dict[str, set] = collections.defaultdict(set)
    status_counts: dict[str, set] = collections.defaultdict(set)
    for d in defs:
        if d.kind not in kinds:
            continue
        key = f"{d.origin}:{d.name}" + ("" if d.kind != "trait" else "(trait)") + f" [{d.path}]"
        for feat in features_of(kubevela_template(d)):
            tmpl_counts[feat].add(key)
        for prog in d.status.values():
            try:
                for feat in features_of(prog):
                    status_counts[feat].add(key)
            except ParseError:
                status_counts["<status does not parse>"].add(key)
    def rank(counts: dict) -> list:
        return [[k, len(v), sorted(x.split(" [")[0] for x in v)[:8]] for k, v in
                sorted(counts.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
    return {"template": rank(tmpl_counts), "status": rank(status_counts)}


def features_of(src: str) -> set[str]:
    feats: set[str] = set()
    toks = tokenize(src)
    imports: dict[str, str] = {}
    try:
        ast = parse_cue(src)
    except ParseError:
        feats.add("<does not parse with the census parser>")
        ast = []
    for d in ast:
        if d[0] == "import":
            alias = d[2] or d[1].split("/")[-1].split(":")[0]
            imports[alias] = d[1]
            feats.add(f'import "{d[1]}"')
    global _CALLEES, _NAMES
    _CALLEES = {id(n[1]) for n in _walk(ast) if n[0] == "call"}
    _NAMES = {}
    for n in _walk(ast):
        if n[0] == "field":
            lab = _label_name(n[1])
            if lab:
                _NAMES.setdefault(lab, []).append(n[3])
        elif n[0] in ("let",) and len(n) == 3 and isinstance(n[1], str):
            _NAMES.setdefault(n[1], []).append(n[2])
    for n in _walk(ast):
        if n[0] == "struct":
            for d in n[1]:
                if d[0] == "comp":
                    feats.add("comprehension in struct {for/if ...{}}")
        elif n[0] == "list":
            for e in n[1]:
                if e[0] == "comp":
                    feats.add("comprehension in list [for ...]")
        elif n[0] == "binop" and n[1] == "|":
            alts = []
            _flat_or(n, alts)
            for a in alts:
                if a[0] == "unary" and a[1] == "*" and a[2][0] == "list" and any(e[0] == "comp" for e in a[2][1]):
                    feats.add("*[for ...] | [] (default that may fail)")
    for t in toks:
        for c in t.preceded_by_comment:
            m = re.match(r"//\s*\+(patchKey|patchStrategy|usage|short|ignore)\b(=\S+)?", c)
            if m:
                tag = m.group(1)
                feats.add(f"// +{tag}" + (m.group(2) if tag == "patchStrategy" and m.group(2) else ""))
        if t.kind == "attr":
            feats.add("attribute @" + t.value[1:].split("(")[0])
        if t.kind == "string" and t.text.startswith("#"):
            feats.add('raw string #"..."#')
        if t.kind in ("string", "interp") and (t.text.lstrip("#").startswith('"""')):
            feats.add('multi-line string """')
        if t.kind in ("string", "interp") and t.text.lstrip("#").startswith("'"):
            feats.add("bytes literal '...'")
        if t.kind == "interp":
            feats.add("string interpolation \\(...)")
        if t.kind == "number" and re.search(r"[KMGTP]i?$", t.value):
            feats.add("number multiplier (1Ki)")
        if t.kind == "number" and ("." in t.value or "e" in t.value.lower()) and not t.value.lower().startswith("0x"):
            feats.add("float literal")
    for node in _walk(ast):
        _node_features(node, feats, imports)
    return feats


_CALLEES: set = set()
_NAMES: dict = {}


def _flat_or(n: Any, out: list) -> None:
    if n[0] == "binop" and n[1] == "|":
        _flat_or(n[2], out)
        _flat_or(n[3], out)
    else:
        out.append(n)


def _operand_kind(node: Any, depth: int = 0) -> str:
    """list, string, number or ? for an operand of +, by what it is or what its name is bound to."""
    k = node[0]
    if depth > 4:
        return "?"
    if k == "paren":
        return _operand_kind(node[1], depth + 1)
    if k == "list":
        return "list"
    if k == "str":
        return "string"
    if k == "num":
        return "number"
    if k == "call":
        fn = node[1]
        if fn[0] == "sel" and fn[1][0] == "ident":
            if fn[1][1] in ("strings", "strconv") and fn[2] not in ("Atoi", "ParseInt", "ParseFloat", "ParseBool",
                                                                   "Split", "Fields", "Count", "Index"):
                return "string"
            if fn[1][1] == "list":
                return "list"
        if fn[0] == "ident" and fn[1] == "len":
            return "number"
        return "?"
    if k == "binop" and node[1] in ("+", "*"):
        a, b = _operand_kind(node[2], depth + 1), _operand_kind(node[3], depth + 1)
        return a if a != "?" else b
    if k == "binop" and node[1] == "|":
        alts = []
        _flat_or(node, alts)
        kinds = {_operand_kind(a[2] if a[0] == "unary" and a[1] == "*" else a, depth + 1) for a in alts}
        kinds.discard("?")
        return kinds.pop() if len(kinds) == 1 else "?"
    if k in ("ident", "sel"):
        name = node[1] if k == "ident" else node[2]
        if name in ("string",):
            return "string"
        if name in ("int", "number", "float"):
            return "number"
        for v in _NAMES.get(name, [])[:3]:
            kk = _operand_kind(v, depth + 1)
            if kk != "?":
                return kk
    return "?"


def _walk(x: Any) -> Iterator[Any]:
    if isinstance(x, tuple):
        yield x
        for c in x[1:]:
            yield from _walk(c)
    elif isinstance(x, list):
        for c in x:
            yield from _walk(c)


_TYPE_IDENTS = {"string", "int", "float", "number", "bool", "bytes", "null", "uint", "int8", "int16",
                "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64", "rune"}
_BUILTIN_FUNCS = {"len", "close", "and", "or", "div", "mod", "quo", "rem"}


def _node_features(node: tuple, feats: set, imports: dict) -> None:
    k = node[0]
    if k == "call":
        fn = node[1]
        if fn[0] == "ident" and fn[1] in _BUILTIN_FUNCS:
            feats.add(f"{fn[1]}()")
        elif fn[0] == "sel" and fn[1][0] == "ident" and fn[1][1] in imports:
            feats.add(f"{imports[fn[1][1]]}.{fn[2]}")
        elif fn[0] == "ident":
            feats.add(f"call {fn[1]}()")
    elif k == "sel" and node[1][0] == "ident" and node[1][1] in imports and id(node) not in _CALLEES:
        feats.add(f"{imports[node[1][1]]}.{node[2]} (not called)")
    elif k == "field":
        lab, flag = node[1], node[2]
        if flag == "?":
            feats.add("optional field x?:")
        elif flag == "!":
            feats.add("required field x!:")
        _label_features(lab, feats)
    elif k == "pattern":
        lv = node[1]
        if lv[0] == "ident" and lv[1] == "string":
            feats.add("pattern [string]: T")
        elif lv[0] == "unary" and lv[1] == "=~":
            feats.add('pattern [=~"re"]: T')
        else:
            feats.add("pattern [expr]: T (other)")
    elif k == "let":
        feats.add("let")
    elif k == "embed":
        feats.add("embedding in struct")
    elif k == "ellipsis":
        feats.add("... (open list/struct)")
    elif k == "comp":
        clauses = node[1]
        kinds = [c[0] for c in clauses]
        for c in clauses:
            if c[0] == "for":
                feats.add("for k, v in" if c[2] is not None else "for x in")
            elif c[0] == "if":
                feats.add("if comprehension")
            elif c[0] == "let":
                feats.add("let clause in comprehension")
        if len(clauses) > 1:
            feats.add("multi-clause comprehension (for/if chained)")
        _ = kinds
    elif k == "binop":
        op = node[1]
        l, r = node[2], node[3]
        if op in ("==", "!=") and (l[0] == "bottom" or r[0] == "bottom"):
            feats.add(f"x {op} _|_")
        elif op == "|":
            feats.add("disjunction |")
        elif op == "&":
            feats.add("conjunction &")
        elif op in ("+",):
            kinds = {_operand_kind(l), _operand_kind(r)} - {"?"}
            if "list" in kinds:
                feats.add("list + list")
            elif "string" in kinds:
                feats.add("string + string")
            elif "number" in kinds:
                feats.add("number + number")
            else:
                feats.add("+ (operands not known statically)")
        elif op == "*":
            kinds = {_operand_kind(l), _operand_kind(r)} - {"?"}
            if "list" in kinds:
                feats.add("list * n")
            elif "string" in kinds:
                feats.add("string * n")
            else:
                feats.add("* multiply")
        elif op in ("-", "/"):
            feats.add(f"{op} arithmetic")
        elif op in ("&&", "||"):
            feats.add(f"{op}")
        elif op in ("=~", "!~"):
            feats.add(f"binary {op} regexp match")
        elif op in ("<", "<=", ">", ">="):
            feats.add("comparison < <= > >=")
        elif op in ("==", "!="):
            feats.add(f"{op} comparison")
    elif k == "unary":
        op = node[1]
        if op == "*":
            if node[2][0] == "bottom":
                feats.add("*_|_ default")
            else:
                feats.add("default *x")
        elif op in ("<", "<=", ">", ">="):
            feats.add("bound >=, <= ...")
        elif op == "=~":
            feats.add('bound =~"re"')
        elif op == "!~":
            feats.add('bound !~"re"')
        elif op == "!=":
            feats.add("bound !=x")
        elif op == "!":
            feats.add("! not")
        elif op == "-":
            feats.add("unary -")
    elif k == "bottom":
        feats.add("_|_ literal")
    elif k == "ident":
        n = node[1]
        if n in _TYPE_IDENTS and n not in ("string", "int", "bool", "null", "number", "float"):
            feats.add(f"sized/other type {n}")
        elif n == "_":
            feats.add("top _")
        elif n.startswith("#") or n.startswith("_#"):
            feats.add("definition reference #X")
        elif n.startswith("_"):
            feats.add("hidden reference _x")
    elif k == "index":
        feats.add("index x[i] / x[\"k\"]")
    elif k == "slice":
        feats.add("slice x[a:b]")
    elif k == "alias":
        feats.add("alias X=")


def _label_features(lab: tuple, feats: set) -> None:
    if lab[0] == "alias":
        feats.add("field alias X=label")
        return _label_features(lab[2], feats)
    if lab[0] == "dyn":
        feats.add("dynamic label (expr): / \"\\(x)\":")
    elif lab[0] == "str":
        feats.add('quoted label "x":')
    elif lab[0] == "ident":
        n = lab[1]
        if n.startswith("#"):
            feats.add("definition #X:")
        elif n.startswith("_#"):
            feats.add("hidden definition _#X:")
        elif n.startswith("_"):
            feats.add("hidden field _x:")


# --------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--defs", required=True,
                    help="directory of vela def .cue files and X-Definition .yaml files (searched recursively)")
    ap.add_argument("--examples", help="directory of .md/.yaml files holding example Applications")
    ap.add_argument("--out", help="directory to write the cases and index.json into")
    ap.add_argument("--max-examples", type=int, default=2, help="example-based variants per definition")
    ap.add_argument("--no-status", action="store_true", help="leave out health/custom status cases")
    ap.add_argument("--features", action="store_true",
                    help="print which CUE features and builtins the definitions use (JSON)")
    ap.add_argument("--kinds", default="component,trait,policy")
    args = ap.parse_args(argv)
    kinds = tuple(args.kinds.split(","))
    asm = Assembler(args.defs, args.examples, max_examples=args.max_examples, oracle_dir=args.out)
    if args.features:
        census = feature_census(asm.definitions, kinds)
        counted = [d for d in asm.definitions if d.kind in kinds]
        print(json.dumps({"definitions": len(counted),
                          "by_kind": collections.Counter(d.kind for d in counted),
                          **census}, indent=1))
        return 0
    if not args.out:
        ap.error("--out is required unless --features")
    os.makedirs(args.out, exist_ok=True)
    cases = asm.cases(kinds, status=not args.no_status)
    index = []
    for c in cases:
        fn = c.name + ".cue"
        with open(os.path.join(args.out, fn), "w", encoding="utf-8") as f:
            f.write(c.text)
        index.append({"file": fn, "expression": c.expression, "definition": c.definition,
                      "kind": c.kind, "variant": c.variant, "source": c.source})
    with open(os.path.join(args.out, "index.json"), "w", encoding="utf-8") as f:
        json.dump(index, f, indent=1)
        f.write("\n")
    summary = {
        "definitions": len([d for d in asm.definitions if d.kind in kinds]),
        "cases": len(cases),
        "by_kind": collections.Counter(c.kind for c in cases),
        "by_variant": collections.Counter(re.sub(r"\d+$", "", c.variant) for c in cases),
        "schema_not_read": [d.path for d in asm.definitions if d.error],
        "skipped": asm.skipped,
    }
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
