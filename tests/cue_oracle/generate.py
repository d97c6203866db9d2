"""Random CUE programs for differential testing (hypothesis), and the comparison of two evaluators on them.

`programs()` draws whole files from a grammar of the constructs the corpus covers: nested structs; ints,
floats, strings, bools and null; bounds and sized types; disjunctions with defaults; references to fields
declared earlier or later in the file, to siblings, into structs and lists; hidden fields and `let`;
list and struct comprehensions (`for`, `for ... if`, `for ... let`, `if` guards, `!= _|_` tests);
interpolation; arithmetic; list literals; definitions, closedness and optional fields; a field unified from
two places; and now and then one injected error (a conflict, a bound or closedness violation, an incomplete
value, an undefined field).

Programs are built typed, so that most of them evaluate: every field has a kind decided up front, and an
expression only refers to fields of the kind it needs. References follow a random rank (a field refers only
to lower-ranked ones, so there are no cycles) while the text is shuffled (so references point forwards as
often as backwards). Names carry their nesting depth (`t` top level, `a` inside, `b` deeper) so that a
reference never picks up a shadowing field by accident.

Left out on purpose, because CUE v0.4.0-beta.1 (the oracle) and current CUE disagree there (see the corpus's
`.why` files): list `+`/`*`, divisions whose decimals do not terminate or integers beyond 24 digits (v0.4
rounds to 24 significant digits, current CUE to 34), two disjunctions with different defaults unified,
a comprehension's bare value variable as a parenthesized label (`(v): ...`), list elements with defaults
passed to builtins, defaults that are themselves errors, required fields, unused imports.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from hypothesis import strategies as st

from tests.cue_oracle.corpus import classify_error, evaluator_kind

SCALARS = ("int", "float", "string", "bool")
KINDS = SCALARS + ("null", "struct", "list_int", "list_str")

INT_LITS = ("0", "1", "2", "3", "7", "10", "42", "-5", "100", "0x1F", "1_000", "8080", "-12")
FLOAT_LITS = ("0.5", "1.5", "2.0", "3.25", "10.75", "-0.5", "1e3", "2.5e2", "0.125", "100.0", "1.10")
STR_LITS = ('"web"', '"api-server"', '""', '"a b"', '"<tag>"', '"x&y"', '"caf\\u00e9"', '"日本"',
            '"tab\\tsep"', '"line\\nbreak"', '"quote\\"d"', '"back\\\\slash"', '"😀"', '"UPPER"', '"v1.2.3"',
            "#\"raw \\d\"#")
WORDS = ('"alpha"', '"beta"', '"gamma"', '"delta"')
DIVISORS = ("1", "2", "4", "5", "8", "10")  # terminating decimals only: 1/3 prints differently in v0.4


@dataclass
class Referable:
    """An expression another field may refer to, and what it is."""

    expr: str
    kind: str
    length: int | None = None          # for lists built from literals
    fields: dict[str, "Referable"] = field(default_factory=dict)  # for structs: fields sure to exist
    optional: tuple[str, ...] = ()     # for structs: optional fields that may be absent
    default: bool = False              # a value with a default (`*"a" | "b"`), not yet resolved


class _Builder:
    def __init__(self, draw: Callable[[Any], Any]) -> None:
        self.draw = draw
        self.imports: set[str] = set()
        self.counter = 0

    # -- helpers -----------------------------------------------------------------------------------
    def pick(self, options: Any) -> Any:
        return self.draw(st.sampled_from(list(options)))

    def chance(self, p: float) -> bool:
        # sampled_from rather than floats(0, 1) < p: hypothesis draws boundary floats such as 0.0 far more
        # often than p; and with the True entries last, shrinking leads towards the simpler program.
        k = round(p * 20)
        return bool(self.draw(st.sampled_from([False] * (20 - k) + [True] * k)))

    def refs(self, scope: list[Referable], kind: str) -> list[Referable]:
        out: list[Referable] = []
        for r in scope:
            if r.kind == kind:
                out.append(r)
            if r.kind == "struct":
                out.extend(self.refs(list(r.fields.values()), kind))
        return out

    # -- scalar expressions --------------------------------------------------------------------------
    def expr(self, kind: str, scope: list[Referable], depth: int = 0, plain: bool = False) -> str:
        """An expression of `kind` (never a default disjunction: those only stand alone as a field's value).
        `plain`: not a bare reference to a value with a default. v0.4 passes list elements to builtins
        without taking their defaults (non-concrete value for element 0 of string list argument 0), current
        CUE takes them; so list elements are plain."""
        refs = [r for r in self.refs(scope, kind) if not (plain and r.default)]
        if refs and self.chance(0.35):
            return self.pick(refs).expr
        deep = depth >= 2
        if kind == "int":
            choice = self.pick(["lit"] * 3 + ([] if deep else ["arith", "divmod", "len", "index"]))
            if choice == "arith":
                op = self.pick("+-*")
                if op == "*":  # times a small literal: chains of references never reach 24 digits
                    return f"({self.expr('int', scope, depth + 1)} * {self.pick(('2', '3', '-1', '10'))})"
                return f"({self.expr('int', scope, depth + 1)} {op} {self.expr('int', scope, depth + 1)})"
            if choice == "divmod":
                fn = self.pick(["div", "mod", "quo", "rem"])
                d = self.pick(("2", "3", "4", "7"))
                if self.chance(0.5):
                    return f"{fn}({self.expr('int', scope, depth + 1)}, {d})"
                return f"({self.expr('int', scope, depth + 1)} {fn} {d})"
            if choice == "len":
                lists = self.refs(scope, "list_int") + self.refs(scope, "list_str")
                if lists and self.chance(0.6):
                    return f"len({self.pick(lists).expr})"
                return f"len({self.pick(WORDS)})"
            if choice == "index":
                lists = [r for r in self.refs(scope, "list_int") if r.length]
                if lists:
                    r = self.pick(lists)
                    return f"{r.expr}[{self.draw(st.integers(0, r.length - 1))}]"
            return self.pick(INT_LITS)
        if kind == "float":
            choice = self.pick(["lit"] * 3 + ([] if deep else ["arith", "div"]))
            if choice == "arith":
                op = self.pick("+-*")
                a = self.expr("float", scope, depth + 1)
                b = (self.pick(("2", "0.5", "1.5", "10")) if op == "*"
                     else self.expr(self.pick(["int", "float"]), scope, depth + 1))
                return f"({a} {op} {b})" if self.chance(0.5) else f"({b} {op} {a})"
            if choice == "div":
                return f"({self.expr('int', scope, depth + 1)} / {self.pick(DIVISORS)})"
            return self.pick(FLOAT_LITS)
        if kind == "string":
            choice = self.pick(["lit"] * 3 + ([] if deep else ["interp", "concat", "pkg", "index"]))
            if choice == "interp":
                parts = [self.expr(self.pick(SCALARS), scope, depth + 1) for _ in range(self.draw(st.integers(1, 3)))]
                sep = self.pick(["-", " ", ":", "/", ""])
                return '"' + sep.join(f"\\({p})" for p in parts) + '"'
            if choice == "concat":
                return f"({self.expr('string', scope, depth + 1)} + {self.expr('string', scope, depth + 1)})"
            if choice == "pkg":
                fn = self.pick(["upper", "join", "replace", "itoa", "trim"])
                if fn == "itoa":
                    self.imports.add("strconv")
                    return f"strconv.FormatInt({self.expr('int', scope, depth + 1)}, 10)"
                self.imports.add("strings")
                if fn == "upper":
                    return f"strings.ToUpper({self.expr('string', scope, depth + 1)})"
                if fn == "join":
                    lists = self.refs(scope, "list_str")
                    arg = self.pick(lists).expr if lists and self.chance(0.5) else \
                        f"[{self.expr('string', scope, depth + 1, plain=True)}, {self.pick(WORDS)}]"
                    return f"strings.Join({arg}, \",\")"
                if fn == "replace":
                    return f"strings.Replace({self.expr('string', scope, depth + 1)}, \"a\", \"o\", -1)"
                return f"strings.TrimSpace({self.expr('string', scope, depth + 1)})"
            if choice == "index":
                lists = [r for r in self.refs(scope, "list_str") if r.length]
                if lists:
                    r = self.pick(lists)
                    return f"{r.expr}[{self.draw(st.integers(0, r.length - 1))}]"
            return self.pick(STR_LITS + WORDS)
        if kind == "bool":
            choice = self.pick(["lit"] * 2 + ([] if deep else ["cmp", "logic", "not", "exists"]))
            if choice == "cmp":
                k = self.pick(["int", "float", "string"])
                ops = ["==", "!="] if k == "string" else ["<", "<=", ">", ">=", "==", "!="]
                return f"({self.expr(k, scope, depth + 1)} {self.pick(ops)} {self.expr(k, scope, depth + 1)})"
            if choice == "logic":
                a, b = self.expr("bool", scope, depth + 1), self.expr("bool", scope, depth + 1)
                return f"({a} {self.pick(['&&', '||'])} {b})"
            if choice == "not":
                return f"!{self.expr('bool', scope, depth + 1)}"
            if choice == "exists":
                structs = self.refs(scope, "struct")
                if structs:
                    s = self.pick(structs)
                    names = list(s.optional) + list(s.fields) + ["zz"]
                    return f"({s.expr}.{self.pick(names)} {self.pick(['!=', '=='])} _|_)"
            return self.pick(["true", "false"])
        if kind == "null":
            return "null"
        raise ValueError(kind)

    # -- whole field values ----------------------------------------------------------------------------
    def value(self, kind: str, scope: list[Referable], depth: int) -> tuple[str, Referable]:
        """A field's value (may be a default disjunction, a bound, a struct or a list) and what it offers
        for references (its expression left empty: the caller knows the field's name)."""
        if kind in ("int", "string", "float", "bool") and self.chance(0.25):
            text = self.constrained(kind, scope)
            return text, Referable("", kind, default="*" in text)
        if kind in SCALARS or kind == "null":
            text = self.expr(kind, scope)
            # a bare reference to a value with a default passes the default on
            return text, Referable("", kind, default=any(r.expr == text and r.default for r in self.refs(scope, kind)))
        if kind == "struct":
            items, ref = self.struct_items(scope, depth)
            return render_struct(items), ref
        return self.list_value(kind, scope, depth)

    def constrained(self, kind: str, scope: list[Referable]) -> str:
        if kind == "int":
            form = self.pick(["default", "bounds", "sized"])
            if form == "default":
                return f"*{self.pick(INT_LITS)} | int"
            if form == "bounds":
                lo, hi = sorted(self.draw(st.integers(-20, 120)) for _ in range(2))
                return f"int & >={lo} & <={hi} & {self.draw(st.integers(lo, hi))}"
            return f"{self.pick(['uint8', 'int32', 'uint', 'int8'])} & {self.draw(st.integers(0, 127))}"
        if kind == "string":
            form = self.pick(["enum", "default", "regex", "noteq"])
            if form == "enum":
                words = self.draw(st.lists(st.sampled_from(WORDS), min_size=2, max_size=4, unique=True))
                return " | ".join(("*" if i == 0 else "") + w for i, w in enumerate(words))
            if form == "default":
                return f"string | *{self.pick(WORDS)}"
            if form == "regex":
                return f'=~"^[a-z]+$" & {self.pick(WORDS)}'
            return f'!="" & {self.pick(WORDS)}'
        if kind == "float":
            return f"*{self.pick(FLOAT_LITS)} | float"
        return f"*{self.pick(['true', 'false'])} | bool"

    def struct_items(self, scope: list[Referable], depth: int) -> tuple[list[str], Referable]:
        """A struct's declarations: fields named by depth (`a` at depth 1, `b` below) that may refer to earlier
        siblings, sometimes an optional field, an embedded `if` guard or a `for` over another struct."""
        child = "ab"[min(depth, 1)]
        n = self.draw(st.integers(0, 4 if depth < 2 else 2))
        items: list[str] = []
        fields: dict[str, Referable] = {}
        optional: list[str] = []
        local = list(scope)
        for i in range(n):
            name = f"{child}{i}"
            if self.chance(0.15):
                items.append(f"{name}?: {self.pick(SCALARS)}")
                optional.append(name)
                continue
            k = self.pick(KINDS if depth < 2 else SCALARS)
            text, ref = self.value(k, local, depth + 1)
            items.append(f"{name}: {text}")
            r = requalify(ref, name)
            fields[name] = r
            local.append(r)
        if self.chance(0.25):
            cond = self.expr("bool", local, 1)
            items.append(f"if {cond} {{g{self.counter}: {self.expr(self.pick(SCALARS), local, 1)}}}")
            self.counter += 1
        if depth >= 1 and self.chance(0.15):
            structs = [s for s in self.refs(scope, "struct") if s.fields]
            if structs:
                items.append(f'for k, v in {self.pick(structs).expr} {{"\\(k)-{self.counter}": v}}')
                self.counter += 1
        self.draw_order(items)
        return items, Referable("", "struct", None, fields, tuple(optional))

    def draw_order(self, lines: list[str]) -> None:
        """Sometimes move guards and loops between the fields (export order depends on where they are)."""
        if len(lines) > 1 and self.chance(0.3):
            i = self.draw(st.integers(0, len(lines) - 1))
            lines.insert(self.draw(st.integers(0, len(lines) - 1)), lines.pop(i))

    def list_value(self, kind: str, scope: list[Referable], depth: int) -> tuple[str, Referable]:
        elem = "int" if kind == "list_int" else "string"
        sources = self.refs(scope, kind)
        structs = [s for s in self.refs(scope, "struct") if s.fields]
        form = self.pick(["literal", "literal"] + (["for", "forif", "forlet"] if sources else [])
                         + (["keys"] if structs and elem == "string" else []))
        if form == "for":
            src = self.pick(sources)
            body = "x * 2" if elem == "int" else '"p-\\(x)"'
            return f"[for x in {src.expr} {{{body}}}]", Referable("", kind)
        if form == "forif":
            src = self.pick(sources)
            cond = f"x > {self.pick(INT_LITS)}" if elem == "int" else 'x != ""'
            body = "x + i" if elem == "int" else '"\\(i)=\\(x)"'
            return f"[for i, x in {src.expr} if {cond} {{{body}}}]", Referable("", kind)
        if form == "forlet":
            src = self.pick(sources)
            bound = "x * 3" if elem == "int" else 'x + "!"'
            return f"[for x in {src.expr} let y = {bound} {{y}}]", Referable("", kind)
        if form == "keys":
            return f"[for k, _ in {self.pick(structs).expr} {{k}}]", Referable("", kind)
        items = [self.expr(elem, scope, 1, plain=True) for _ in range(self.draw(st.integers(0, 4)))]
        return "[" + ", ".join(items) + "]", Referable("", kind, len(items))


@dataclass
class _Definition:
    name: str
    schema: dict[str, str]   # field -> kind
    defaulted: set[str]      # fields with a default
    is_open: bool


@st.composite
def programs(draw: Callable[[Any], Any]) -> str:
    """One CUE file (text) from the grammar described in the module docstring."""
    b = _Builder(draw)
    n = draw(st.integers(1, 8))
    kinds = [draw(st.sampled_from(KINDS)) for _ in range(n)]
    order = draw(st.permutations(range(n)))  # evaluation rank: a field refers only to earlier-ranked ones
    scope: list[Referable] = []
    pieces: list[str] = []

    defs = [_definition(b, d, pieces) for d in range(draw(st.integers(0, 2)))]
    for i in order:
        name = f"t{i}"
        if kinds[i] == "struct" and defs and b.chance(0.4):
            d = b.pick(defs)
            # a field with a default gets a literal: a reference could bring a second, different default
            # (v0.4 fails those with an empty message, see disjunctions/defaults_disagree)
            given = {f: (b.expr(k, scope, 1) if f not in d.defaulted else _SAMPLE_LITERAL[k])
                     for f, k in d.schema.items() if f not in d.defaulted or b.chance(0.5)}
            pieces.append(f"{name}: {d.name} & {{" + ", ".join(f"{f}: {v}" for f, v in given.items()) + "}")
            fields = {f: Referable(f"{name}.{f}", k, default=f in d.defaulted and f not in given)
                      for f, k in d.schema.items()}
            ref = Referable(name, "struct", None, fields)
        elif kinds[i] == "struct":
            items, r = b.struct_items(scope, 0)
            if len(items) > 1 and b.chance(0.3):  # one struct unified from two places in the file
                cut = draw(st.integers(1, len(items) - 1))
                pieces += [f"{name}: {render_struct(items[:cut])}", f"{name}: {render_struct(items[cut:])}"]
            else:
                pieces.append(f"{name}: {render_struct(items)}")
            ref = requalify(r, name)
        else:
            text, r = b.value(kinds[i], scope, 0)
            if kinds[i] in ("int", "string", "bool") and b.chance(0.15):  # the type here, the value there
                pieces += [f"{name}: {kinds[i]}", f"{name}: {text}"]
            else:
                pieces.append(f"{name}: {text}")
            ref = requalify(r, name)
        scope.append(ref)
        if b.chance(0.15):  # hidden fields and lets: usable by later-ranked fields, not exported
            k = b.pick(SCALARS)
            value = b.expr(k, scope, 1)
            hname = f"_h{i}" if b.chance(0.5) else f"L{i}"
            pieces.append(f"{hname}: {value}" if hname.startswith("_") else f"let {hname} = {value}")
            scope.append(Referable(hname, k))

    pieces += _injected_error(b, scope, defs)
    # An unreferenced let is a compile error in every CUE version ("unreferenced alias or let clause"):
    # keep one now and then, drop the rest so that they do not drown the programs that evaluate.
    pieces = [p for p in pieces if not p.startswith("let ") or _referenced(p.split()[1], pieces) or b.chance(0.05)]
    if len(pieces) > 1:
        pieces = draw(st.permutations(pieces))
    header = "".join(f'import "{p}"\n' for p in sorted(b.imports))
    return header + ("\n" if header else "") + "\n".join(pieces) + "\n"


def _referenced(name: str, pieces: list[str]) -> bool:
    pattern = re.compile(rf"(?<![\w#]){re.escape(name)}(?!\w)")
    return sum(len(pattern.findall(p)) for p in pieces) > 1  # more than its own declaration


def _definition(b: _Builder, index: int, pieces: list[str]) -> _Definition:
    """`#D<index>: {...}` with typed fields, some defaulted, maybe an optional field, maybe open."""
    schema = {f"a{j}": b.pick(["int", "string", "bool"]) for j in range(b.draw(st.integers(1, 3)))}
    defaulted = {f for f in schema if b.chance(0.5)}
    is_open = b.chance(0.3)
    body = []
    for f, k in schema.items():
        if f in defaulted:
            lit = {"int": b.pick(INT_LITS), "string": b.pick(WORDS), "bool": "true"}[k]
            body.append(f"{f}: *{lit} | {k}")
        else:
            body.append(f"{f}: {k}")
    if b.chance(0.4):
        body.append("o0?: string")
    if is_open:
        body.append("...")
    pieces.append(f"#D{index}: " + render_struct(body))
    return _Definition(f"#D{index}", schema, defaulted, is_open)


_SAMPLE_LITERAL = {"int": "1", "string": '"s"', "bool": "true"}


def _injected_error(b: _Builder, scope: list[Referable], defs: list[_Definition]) -> list[str]:
    """At most one deliberate error, so that the first error real CUE reports is the interesting one."""
    if not b.chance(0.2):
        return []
    kind = b.pick(["conflict", "type", "bound", "closed", "incomplete", "undefined"])
    scalars = [r for r in scope if r.kind in ("int", "string", "bool") and r.expr.startswith("t") and "." not in r.expr]
    if kind == "conflict" and scalars:
        r = b.pick(scalars)
        lit = {"int": b.pick(INT_LITS), "string": b.pick(WORDS), "bool": b.pick(["true", "false"])}[r.kind]
        return [f"{r.expr}: {lit}"]
    if kind == "type" and scalars:
        r = b.pick(scalars)
        return [f"{r.expr}: " + ("42" if r.kind == "string" else '"oops"')]
    if kind == "bound":
        return [b.pick(["e0: int & <=3\ne0: 10", 'e0: =~"^a" & "beta"', "e0: uint8 & 300", "e0: >0 & -1"])]
    if kind == "closed":
        closed = [d for d in defs if not d.is_open]
        if closed:
            d = b.pick(closed)
            given = ", ".join(f"{f}: {_SAMPLE_LITERAL[k]}" for f, k in d.schema.items())
            return [f"e0: {d.name} & {{{given}, zz: 1}}"]
        return ["e0: close({a0: 1}) & {a1: 2}"]
    if kind == "incomplete":
        return [b.pick(["e0: int", "e0: string", "e0: {a0: bool}", "e0: *1 | *2 | 3", "e0: >5"])]
    structs = [r for r in scope if r.kind == "struct" and r.expr.startswith("t")]
    if structs:
        return [f"e0: {b.pick(structs).expr}.zz"]
    return ["e0: nowhere"]


def requalify(r: Referable, expr: str) -> Referable:
    """`r` as reached through `expr` (a sibling's bare name, or `t3.a1` from the top level)."""
    return Referable(expr, r.kind, r.length, {f: requalify(s, f"{expr}.{f}") for f, s in r.fields.items()},
                     r.optional, r.default)


def render_struct(items: list[str]) -> str:
    return "{" + ("\n" + "\n".join(items) + "\n" if items else "") + "}"


@dataclass
class Comparison:
    agree: bool
    program: str
    real: dict[str, Any]
    ours: str  # what our evaluator printed, or `CueError(kind): message`, or the crash
    why: str = ""

    def summary(self) -> dict[str, Any]:
        return {"program": self.program, "real": self.real, "ours": self.ours, "why": self.why}


FILENAME = "gen.cue"


def _empty_message(stderr: str) -> bool:
    """`t4: ` and nothing else: a path with no message."""
    first = next((line for line in stderr.splitlines() if line.strip()), "")
    return re.fullmatch(r"[^\s:]+:\s*", first) is not None


def compare(run_real: Callable[[dict[str, str], list[str], dict[str, Any]], dict[str, Any]],
            export_files: Callable[..., str], cue_error: type[BaseException], program: str) -> Comparison:
    """Evaluate `program` with real CUE and with ours: equal stdout byte for byte, or the same error kind."""
    files = {FILENAME: program}
    real = run_real(files, ["export", FILENAME], {"--out": "json"})
    try:
        ours = export_files(files, None, "json")
    except cue_error as e:  # the error class is all we compare for failures
        kind = evaluator_kind(getattr(e, "kind", "other"))
        got = f"CueError({kind}): {e}"
        if real["code"] == 0:
            return Comparison(False, program, real, got, "real CUE succeeded, ours failed")
        want = classify_error(real["stderr"])
        if kind == "incomplete" and _empty_message(real["stderr"]):
            # CUE v0.4 reports defaults that meet to _|_ (`*true | bool` & `*false | bool`) with an empty
            # message; by the spec, and in current CUE, what is left has no default: incomplete
            return Comparison(True, program, real, got, "")
        return Comparison(kind == want, program, real, got, "" if kind == want else f"error kind {kind} != {want}")
    except Exception as e:  # noqa: BLE001 - a crash is a disagreement to report, not a test error
        return Comparison(False, program, real, f"crash {type(e).__name__}: {e}", "our evaluator crashed")
    if real["code"] != 0:
        why = f"real CUE failed ({classify_error(real['stderr'])}), ours succeeded"
        return Comparison(False, program, real, ours, why)
    return Comparison(ours == real["stdout"], program, real, ours, "" if ours == real["stdout"] else "output differs")


def report(n: int, comparisons: list[Comparison], keep: int = 5) -> str:
    bad = [c for c in comparisons if not c.agree]
    reasons = Counter(c.why for c in bad)
    return json.dumps({"examples": n, "agree": n - len(bad), "disagree": len(bad),
                       "disagree_by_reason": dict(reasons.most_common()),
                       "first_disagreements": [c.summary() for c in bad[:keep]]}, indent=2, ensure_ascii=False)


def sample_programs(n: int, seed: int | None = None) -> list[str]:
    """`n` programs drawn without shrinking (for a run at scale that counts agreements instead of failing)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as with_seed

    out: list[str] = []

    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(programs())
    def collect(program: str) -> None:
        out.append(program)

    (with_seed(seed)(collect) if seed is not None else collect)()
    return out
