"""The evaluator's public API: compile once, evaluate many times, export."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from velashard.cue import ast
from velashard.cue.compiler import Compiler, Scope
from velashard.cue.encode import go_json, go_yaml
from velashard.cue.errors import CueError
from velashard.cue.builtins import PACKAGES
from velashard.cue.labels import is_regular, label_text
from velashard.cue.evaluator import Env, Vertex, evaluate, resolve
from velashard.cue.export_rules import first_error, ordered_keys, to_data
from velashard.cue.export import TagTree, tag_tree
from velashard.cue.limits import Context, LimitExceeded
from velashard.cue.parser import parse_expr, parse_file
from velashard.cue.values import Bottom, SourcePackage
from velashard.cue.vertex import LIST, STRUCT, Conjunct, Data, Fill, release

MAX_SOURCE_BYTES = 8 << 20


class Program:
    """Parsed and resolved CUE files: immutable, shared by every evaluation and thread."""

    def __init__(self, files: list[ast.File], packages: dict[str, SourcePackage] | None = None) -> None:
        names = {f.package for f in files if f.package}
        if len(names) > 1:
            raise CueError(f"found packages {' and '.join(sorted(names))} (files must share one package)",
                           "eval")
        self.packages = packages or {}
        Compiler(files, packages=self.packages).compile()
        self.files = files
        self.top: dict[str, tuple] = {}
        for f in files:
            self.top.update(f.body.names)
        self._expressions: dict[str, ast.Expr] = {}

    def evaluate(self, data: dict[str, Any] | None = None,
                 fills: list[tuple[tuple, Any]] | tuple = ()) -> "Instance":
        """Unify the program with `data` (plain values, e.g. {"parameter": {...}, "context": {...}}), and each
        `(path, value)` of `fills` at its path (keys as `find_task` returns them; KubeVela's FillPath).

        The data is read as evaluation reaches it, not copied: leave it unchanged while the instance is used."""
        root = Vertex(None, None, Context())
        for f in self.files:
            root.conjuncts.append(Conjunct(f.body, None))
        if data:
            if not isinstance(data, dict):
                raise CueError("data unified with a program must be a mapping", "eval")
            root.conjuncts.append(Conjunct(None, None, value=Data(data)))
        for path, value in fills:
            root.conjuncts.append(Conjunct(None, None, value=Fill(tuple(path), value)))
        return Instance(self, root)

    def expression(self, text: str) -> ast.Expr:
        """An expression over the top-level fields; it may start with imports of its own (a script:
        `import "strconv"` then the expression), as KubeVela's outputs' valueFrom may."""
        x = self._expressions.get(text)
        if x is None:
            imports = [i for f in self.files for i in f.imports]
            if text.lstrip().startswith("import"):
                script = parse_file(text, "<expression>")
                embeds = [d for d in script.body.decls if type(d) is ast.Embed]
                if len(embeds) != 1 or len(script.body.decls) != 1:
                    raise CueError("a script must be imports and one expression", "syntax")
                x = embeds[0].x
                imports += script.imports
                for imp in script.imports:
                    if imp.path not in PACKAGES and imp.path not in self.packages:
                        raise CueError(f'package "{imp.path}" is not supported', "eval", "", (imp.pos,))
            else:
                x = parse_expr(text, "<expression>")
            holder = ast.File("<expression>", None, imports, ast.StructLit([], x.pos), x.pos)
            Compiler([], dynamic_top=True, packages=self.packages).expr(x, Scope(None, self.top, holder))
            if len(self._expressions) < 256:
                self._expressions[text] = x
        return x


class Instance:
    """One evaluation of a Program, with its own evaluation context (limits.Context). Not shared between threads.
    Each call below is bounded on its own: steps, nesting and the clock count from zero at its start."""

    def __init__(self, program: Program, root: Vertex) -> None:
        self.program = program
        self.root = root

    def release(self) -> None:
        """Let the evaluation's vertices go now (see vertex.release); nothing of this instance may be read after."""
        ctx = self.root.ctx
        release([self.root, *ctx.packages.values()])
        ctx.packages = {}

    def __enter__(self) -> "Instance":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def _run(self, fn: Any) -> Any:
        self.root.ctx.start()
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
                return resolve(self.root.ctx, x, env)
            return evaluate(self.root.ctx, x, env)
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
            return [label_text(k) for k in ordered_keys(v)
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


    # --- values by path, for engines that walk a value (KubeVela's workflow actions) ---------------------------

    def find_task(self, marker: str, done: set[tuple] | frozenset = frozenset()) -> tuple | None:
        """The path of the first struct with a concrete string field `marker` (e.g. `#do`) whose path is not in
        `done`, in KubeVela's order: fields in order, a struct's fields before the struct itself; definitions are
        not entered, nor is plain data (which cannot hold a definition). Paths hold the keys as arcs store them."""
        return self._run(lambda: _find(self.root, (), marker, done, 0))

    def string_at(self, path: tuple) -> str | None:
        """The concrete string at a path, else None."""
        def run() -> str | None:
            v = _at(self.root, path)
            if type(v) is not Vertex:
                return None
            v.expand()
            return v.scalar if type(v.scalar) is str and v.err is None else None
        return self._run(run)

    def export_at(self, path: tuple) -> Any:
        """Plain data of the value at a path; CueError when it is missing, in error or not concrete."""
        def run() -> Any:
            v = _at(self.root, path)
            if type(v) is not Vertex:
                raise CueError("field not found", "undefined", _path_text(path))
            return to_data(v)
        return self._run(run)

    def tags_at(self, path: tuple) -> TagTree | None:
        """The comment tags (+patchKey, +patchStrategy) of the value at a path and the fields inside it."""
        def run() -> TagTree | None:
            v = _at(self.root, path)
            return tag_tree(v) if v is not None else None
        return self._run(run)

    def error(self) -> CueError | None:
        """The first error in the value outside definitions, hidden fields and incomplete ones (KubeVela fails a
        step whose value has a conflict; a value still waiting for data is not an error)."""
        def run() -> CueError | None:
            err = first_error(self.root)
            return err if err is not None and err.kind != "incomplete" else None
        return self._run(run)


def _path_text(path: tuple) -> str:
    return ".".join(label_text(k) for k in path)


def _at(v: Vertex, path: tuple) -> Vertex | None:
    for key in path:
        v.expand()
        arc = v.arcs.get(key)
        if arc is None:
            return None
        v = arc
    return v


def _data_only(v: Vertex) -> bool:
    return all(c.expr is None and type(c.value) is not Vertex and type(c.value) is not Fill for c in v.conjuncts)


def _find(v: Vertex, path: tuple, marker: str, done: Any, depth: int) -> tuple | None:
    if depth > 200:
        raise LimitExceeded(f"{_path_text(path)}: the value nests more than 200 levels deep")
    v.expand()
    if v.err is not None or v.not_allowed is not None:
        return None
    if v.alts is not None:
        defaults = [a for a, d in v.alts if d] or [a for a, _ in v.alts]
        if len(defaults) != 1:
            return None
        v = defaults[0]
        v.expand()
    if v.kind == STRUCT:
        for key in ordered_keys(v):
            if type(key) is str and (key[:1] == "#" or key[:2] == "_#"):
                continue
            arc = v.arcs[key]
            if not arc.regular or _data_only(arc):
                continue
            found = _find(arc, path + (key,), marker, done, depth + 1)
            if found is not None:
                return found
        m = v.arcs.get(marker)
        if m is not None and path not in done:
            m.expand()
            if type(m.scalar) is str and m.err is None:
                return path
    elif v.kind == LIST:
        for key, arc in v.arcs.items():
            if not _data_only(arc):
                found = _find(arc, path + (key,), marker, done, depth + 1)
                if found is not None:
                    return found
    return None


def plain(value: Any) -> Any:
    """Exported data as JSON's: decimals (CUE's floats) become floats, bytes text."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def compile_package(path: str, text: str) -> SourcePackage:
    """A package written in CUE, importable as `path` by programs compiled with it (compile_sources' packages)."""
    f = parse_file(text, f"{path}.cue")
    Compiler([f]).compile()
    return SourcePackage(path, f.body)


def parse_sources(sources: dict[str, str]) -> list[ast.File]:
    files = []
    for name, text in sources.items():
        if len(text) > MAX_SOURCE_BYTES:
            raise CueError(f"{name}: source larger than {MAX_SOURCE_BYTES} bytes", "limit")
        files.append(parse_file(text, name))
    return files


def compile_sources(sources: dict[str, str], packages: dict[str, SourcePackage] | None = None) -> Program:
    """Parse and compile CUE sources given as {file name: text}; `packages` adds importable packages written in
    CUE (compile_package) to the built-in ones."""
    return Program(parse_sources(sources), packages)


def export_files(files: dict[str, str], expression: str | None = None, out: str = "json") -> str:
    """What `cue export [-e expression] --out json|yaml FILES` prints."""
    data = compile_sources(files).evaluate().export(expression)
    if out == "yaml":
        return go_yaml(data)
    if out == "json":
        return go_json(data)
    raise CueError(f"unknown output format {out!r} (want json or yaml)", "eval")
