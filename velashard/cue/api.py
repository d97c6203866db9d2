"""The evaluator's public API: compile once, evaluate many times, export."""

from __future__ import annotations

from typing import Any

from velashard.cue import ast
from velashard.cue.compiler import Compiler, Scope
from velashard.cue.encode import go_json, go_yaml
from velashard.cue.errors import CueError
from velashard.cue.compiler import QUOTED, is_regular
from velashard.cue.evaluator import Env, Vertex, evaluate, resolve
from velashard.cue.export_rules import first_error, ordered_keys, to_data
from velashard.cue.export import TagTree, tag_tree
from velashard.cue.limits import CTX, LimitExceeded
from velashard.cue.parser import parse_expr, parse_file
from velashard.cue.values import Bottom
from velashard.cue.vertex import STRUCT, Conjunct, Data

MAX_SOURCE_BYTES = 8 << 20


class Program:
    """Parsed and resolved CUE files: immutable, shared by every evaluation and thread."""

    def __init__(self, files: list[ast.File]) -> None:
        packages = {f.package for f in files if f.package}
        if len(packages) > 1:
            raise CueError(f"found packages {' and '.join(sorted(packages))} (files must share one package)",
                           "eval")
        Compiler(files).compile()
        self.files = files
        self.top: dict[str, tuple] = {}
        for f in files:
            self.top.update(f.body.names)
        self._expressions: dict[str, ast.Expr] = {}

    def evaluate(self, data: dict[str, Any] | None = None) -> "Instance":
        """Unify the program with `data` (plain values, e.g. {"parameter": {...}, "context": {...}}).

        The data is read as evaluation reaches it, not copied: leave it unchanged while the instance is used."""
        root = Vertex(None, None)
        for f in self.files:
            root.conjuncts.append(Conjunct(f.body, None))
        if data:
            if not isinstance(data, dict):
                raise CueError("data unified with a program must be a mapping", "eval")
            root.conjuncts.append(Conjunct(None, None, value=Data(data)))
        return Instance(self, root)

    def expression(self, text: str) -> ast.Expr:
        x = self._expressions.get(text)
        if x is None:
            x = parse_expr(text, "<expression>")
            holder = ast.File("<expression>", None, [i for f in self.files for i in f.imports],
                              ast.StructLit([], x.pos), x.pos)
            Compiler([], dynamic_top=True).expr(x, Scope(None, self.top, holder))
            if len(self._expressions) < 256:
                self._expressions[text] = x
        return x


class Instance:
    """One evaluation of a Program. Not shared between threads."""

    def __init__(self, program: Program, root: Vertex) -> None:
        self.program = program
        self.root = root

    def _run(self, fn: Any) -> Any:
        CTX.steps = 0
        CTX.depth = 0
        CTX.copying = set()
        try:
            return fn()
        except RecursionError:
            raise LimitExceeded("evaluation nested too deeply (a structural cycle?)") from None

    def lookup(self, expression: str | None = None) -> Any:
        """The value of an expression over the top-level fields (a Vertex, a scalar, or a Bottom)."""
        def run() -> Any:
            if not expression:
                self.root.expand()
                return self.root
            x = self.program.expression(expression)
            env = Env(None, self.root)
            self.root.expand()
            t = type(x)
            if t is ast.Ident and x.target[0] == "field" and x.target[1] not in self.root.arcs:
                return Bottom(f'reference "{x.name}" not found', "undefined", (x.pos,))
            if t is ast.Ident or t is ast.Selector or t is ast.Index:
                return resolve(x, env)
            return evaluate(x, env)
        return self._run(run)

    def exists(self, expression: str) -> bool:
        v = self.lookup(expression)
        return type(v) is not Bottom

    def fields(self, expression: str) -> list[str]:
        """The regular field labels of a struct (empty for anything else), even where some fields have errors:
        KubeVela reads each output of `outputs` on its own."""
        def run() -> list[str]:
            v = self.lookup(expression)
            if type(v) is not Vertex:
                return []
            v.expand()
            if v.kind != STRUCT:
                return []
            return [k.lstrip(QUOTED) if k[:1] == QUOTED else k for k in ordered_keys(v)
                    if is_regular(k) and v.arcs[k].regular]
        return self._run(run)

    def tags(self, expression: str) -> TagTree | None:
        """The `// +key=value` comment tags of an expression's field and the fields inside it (KubeVela's
        +patchKey and +patchStrategy), nested as its exported data."""
        return self._run(lambda: tag_tree(self.lookup(expression)))

    def export(self, expression: str | None = None, check: bool = True) -> Any:
        """Plain data of the whole value or of an expression; CueError if it is not concrete. With
        `check`, an error anywhere in the value fails the export, as the cue tool does."""
        def run() -> Any:
            if check:
                err = first_error(self.root)
                if err is not None:
                    raise err
            v = self.lookup(expression)
            if type(v) is Bottom:
                raise v.error(expression or "")
            if type(v) is not Vertex:
                return to_data(v, expression or "")
            return to_data(v)
        return self._run(run)


def parse_sources(sources: dict[str, str]) -> list[ast.File]:
    files = []
    for name, text in sources.items():
        if len(text) > MAX_SOURCE_BYTES:
            raise CueError(f"{name}: source larger than {MAX_SOURCE_BYTES} bytes", "limit")
        files.append(parse_file(text, name))
    return files


def compile_sources(sources: dict[str, str]) -> Program:
    """Parse and compile CUE sources given as {file name: text}."""
    return Program(parse_sources(sources))


def export_files(files: dict[str, str], expression: str | None = None, out: str = "json") -> str:
    """What `cue export [-e expression] --out json|yaml FILES` prints."""
    data = compile_sources(files).evaluate().export(expression)
    if out == "yaml":
        return go_yaml(data)
    if out == "json":
        return go_json(data)
    raise CueError(f"unknown output format {out!r} (want json or yaml)", "eval")
