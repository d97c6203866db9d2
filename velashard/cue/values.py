"""Scalar values of CUE and their unification.

Concrete values are plain Python objects: NULL, bool, int (CUE int), Decimal (CUE float), str, bytes.
Constraints are small classes: Top, BasicType (a set of kinds), Bound (`>=0`, `=~"re"`), Validator
(a builtin applied to all but its first argument), Conj (a kind set with bounds and validators that do
not reduce further), Disj (alternatives with defaults) and Bottom (an error)."""

from __future__ import annotations

import math
from decimal import Context, Decimal
from typing import Any, Callable

from velashard.cue.errors import CueError, Pos
from velashard.cue.regex import compile_regex


class _Null:
    __slots__ = ()

    def __repr__(self) -> str:
        return "null"


NULL = _Null()

# kinds as bits
K_NULL, K_BOOL, K_INT, K_FLOAT, K_STRING, K_BYTES, K_STRUCT, K_LIST = 1, 2, 4, 8, 16, 32, 64, 128
K_NUMBER = K_INT | K_FLOAT
K_SCALAR = K_NULL | K_BOOL | K_NUMBER | K_STRING | K_BYTES
K_ALL = K_SCALAR | K_STRUCT | K_LIST
KIND_NAMES = {K_NULL: "null", K_BOOL: "bool", K_INT: "int", K_FLOAT: "float", K_STRING: "string",
              K_BYTES: "bytes", K_STRUCT: "struct", K_LIST: "list"}


def kind_name(mask: int) -> str:
    if mask == K_NUMBER:
        return "number"
    if mask == K_ALL:
        return "_"
    names = [n for k, n in KIND_NAMES.items() if mask & k]
    return "|".join(names) if names else "_|_"


def kind_of(v: Any) -> int:
    t = type(v)
    if t is str:
        return K_STRING
    if t is int:
        return K_INT
    if t is bool:
        return K_BOOL
    if t is Decimal:
        return K_FLOAT
    if t is bytes:
        return K_BYTES
    if v is NULL:
        return K_NULL
    return 0


def is_atom(v: Any) -> bool:
    t = type(v)
    return t is str or t is int or t is bool or t is Decimal or t is bytes or v is NULL


class Top:
    __slots__ = ()

    def __repr__(self) -> str:
        return "_"


TOP = Top()


class Bottom:
    """An error value. kind: conflict, incomplete, undefined, closed, cycle, limit, eval."""
    __slots__ = ("message", "kind", "positions", "path")

    def __init__(self, message: str, kind: str = "eval", positions: tuple[Pos, ...] = (), path: str = "") -> None:
        self.message, self.kind, self.positions, self.path = message, kind, positions, path

    @property
    def incomplete(self) -> bool:
        return self.kind in ("incomplete", "cycle")

    def error(self, path: str = "") -> CueError:
        return CueError(self.message, self.kind, self.path or path, self.positions)

    def __repr__(self) -> str:
        return "_|_"


class BasicType:
    __slots__ = ("mask",)

    def __init__(self, mask: int) -> None:
        self.mask = mask

    def __repr__(self) -> str:
        return kind_name(self.mask)


class Bound:
    __slots__ = ("op", "value", "regex")

    def __init__(self, op: str, value: Any) -> None:
        self.op, self.value = op, value
        self.regex = compile_regex(value) if op in ("=~", "!~") else None

    def __repr__(self) -> str:
        return f"{self.op}{fmt(self.value)}"

    def mask(self) -> int:
        if self.op in ("=~", "!~"):
            return K_STRING | K_BYTES
        if self.op == "!=":
            return K_ALL
        return kind_of(self.value) | (K_NUMBER if kind_of(self.value) & K_NUMBER else 0)

    def check(self, v: Any) -> bool:
        op = self.op
        if op == "!=":
            return not equal_atoms(v, self.value)
        if op == "=~" or op == "!~":
            s = v.decode("utf-8", "replace") if type(v) is bytes else v
            found = self.regex.search(s) is not None
            return found if op == "=~" else not found
        try:
            if op == "<":
                return v < self.value
            if op == "<=":
                return v <= self.value
            if op == ">":
                return v > self.value
            return v >= self.value
        except TypeError:
            return False


class Validator:
    """A builtin applied to all but its first argument, as `strings.MinRunes(3)`: a constraint."""
    __slots__ = ("name", "fn", "args")

    def __init__(self, name: str, fn: Callable, args: tuple) -> None:
        self.name, self.fn, self.args = name, fn, args

    def __repr__(self) -> str:
        return f"{self.name}({', '.join(fmt(a) for a in self.args)})"


class Conj:
    """A conjunction of constraints that is not concrete yet: kinds allowed, bounds, validators."""
    __slots__ = ("mask", "bounds")

    def __init__(self, mask: int, bounds: tuple) -> None:
        self.mask, self.bounds = mask, bounds

    def __repr__(self) -> str:
        parts = [] if self.mask == K_ALL else [kind_name(self.mask)]
        return " & ".join(parts + [repr(b) for b in self.bounds])


class Disj:
    """Alternatives with default flags, as `*"a" | "b"`; values may be vertices (structs, lists)."""
    __slots__ = ("alts",)

    def __init__(self, alts: list[tuple[Any, bool]]) -> None:
        self.alts = alts

    def defaults(self) -> list:
        return [v for v, d in self.alts if d]

    def __repr__(self) -> str:
        return " | ".join(("*" if d else "") + fmt(v) for v, d in self.alts)


class Func:
    """A builtin function; `arity` is the number of arguments (-1: any); `validator` if a partial call
    (one argument short) makes a constraint."""
    __slots__ = ("name", "fn", "arity", "validator", "raw")

    def __init__(self, name: str, fn: Callable, arity: int, validator: bool = False, raw: bool = False) -> None:
        self.name, self.fn, self.arity, self.validator, self.raw = name, fn, arity, validator, raw

    def __repr__(self) -> str:
        return self.name


class CueSource:
    """A package member written in CUE (list.Ascending); the evaluator compiles it on first use."""
    __slots__ = ("text", "expr")

    def __init__(self, text: str) -> None:
        self.text = text
        self.expr: Any = None


class Package:
    __slots__ = ("path", "members")

    def __init__(self, path: str, members: dict[str, Any]) -> None:
        self.path, self.members = path, members


class SourcePackage:
    """A package written as a CUE file whose fields may refer to each other (KubeVela's vela/op and its kin):
    compiled once and shared; every evaluation that imports it unifies its own copy of the file's fields."""
    __slots__ = ("path", "body")

    def __init__(self, path: str, body: Any) -> None:
        self.path, self.body = path, body

    def __repr__(self) -> str:
        return f'package "{self.path}"'


def fmt(v: Any) -> str:
    """A value as CUE would print it in a message."""
    t = type(v)
    if t is str:
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return str(v)
    if t is Decimal:
        return format_decimal(v)
    if t is bytes:
        return "'" + v.decode("utf-8", "replace") + "'"
    if v is NULL:
        return "null"
    return repr(v)


def format_decimal(d: Decimal) -> str:
    return str(d)


def equal_atoms(a: Any, b: Any) -> bool:
    ka, kb = kind_of(a), kind_of(b)
    if ka & K_NUMBER and kb & K_NUMBER:
        return a == b
    return ka == kb and a == b


def mismatch(a: Any, b: Any, pos: tuple = ()) -> Bottom:
    ka, kb = value_kind(a), value_kind(b)
    if ka and kb and not (ka & kb):
        return Bottom(f"conflicting values {fmt(a)} and {fmt(b)} (mismatched types {kind_name(ka)} and "
                      f"{kind_name(kb)})", "conflict", pos)
    return Bottom(f"conflicting values {fmt(a)} and {fmt(b)}", "conflict", pos)


def value_kind(v: Any) -> int:
    k = kind_of(v)
    if k:
        return k
    t = type(v)
    if t is BasicType or t is Conj:
        return v.mask
    if t is Bound:
        return v.mask()
    if t is Top or t is Validator:
        return K_ALL
    return 0


def as_constraint(v: Any) -> Any:
    """A builtin validator named without a call (`time.Duration`) is the validator itself."""
    if type(v) is Func and v.validator and v.arity == 1:
        return Validator(v.name, v.fn, ())
    return v


def unify_scalar(a: Any, b: Any) -> Any:
    """Unify two non-struct values."""
    if type(a) is Func:
        a = as_constraint(a)
    if type(b) is Func:
        b = as_constraint(b)
    if a is TOP or a is None:
        return b
    if b is TOP or b is None:
        return a
    ta, tb = type(a), type(b)
    if ta is Bottom:
        return a
    if tb is Bottom:
        return b
    if ta is Disj or tb is Disj:
        return unify_disj(a, b)
    ka, kb = kind_of(a), kind_of(b)
    if ka and kb:
        if ka == kb and a == b:
            return a
        return mismatch(a, b)
    if ka:
        return check_atom(a, b)
    if kb:
        return check_atom(b, a)
    return merge_constraints(a, b)


def check_atom(v: Any, c: Any) -> Any:
    """A concrete value unified with a constraint."""
    t = type(c)
    k = kind_of(v)
    if t is BasicType:
        if c.mask & k:
            return v
        return mismatch(c, v)
    if t is Bound:
        if not (c.mask() & k) or not c.check(v):
            if c.mask() & k:
                return Bottom(f"invalid value {fmt(v)} (out of bound {c!r})", "conflict")
            return mismatch(c, v)
        return v
    if t is Validator:
        return check_validator(v, c)
    if t is Conj:
        if not (c.mask & k):
            return mismatch(c, v)
        for b in c.bounds:
            r = check_atom(v, b)
            if type(r) is Bottom:
                return r
        return v
    return Bottom(f"cannot unify {fmt(v)} with {c!r}", "conflict")


def check_validator(v: Any, c: Validator) -> Any:
    try:
        ok = c.fn(v, *c.args)
    except CueError as err:
        return Bottom(f"invalid value {fmt(v)} (does not satisfy {c!r}): {err.message}", "conflict")
    if ok is True:
        return v
    if type(ok) is Bottom:
        return ok
    return Bottom(f"invalid value {fmt(v)} (does not satisfy {c!r})", "conflict")


def _parts(c: Any) -> tuple[int, tuple]:
    t = type(c)
    if t is BasicType:
        return c.mask, ()
    if t is Bound:
        return K_ALL, (c,)
    if t is Validator:
        return K_ALL, (c,)
    if t is Conj:
        return c.mask, c.bounds
    return K_ALL, ()


def merge_constraints(a: Any, b: Any) -> Any:
    ma, ba = _parts(a)
    mb, bb = _parts(b)
    mask = ma & mb
    bounds = list(ba)
    for x in bb:
        if not any(_same_bound(x, y) for y in bounds):
            bounds.append(x)
    for x in bounds:
        if type(x) is Bound:
            mask &= x.mask() if x.op != "!=" else K_ALL
    if mask == 0:
        return mismatch(a, b)
    bounds = _simplify_bounds(bounds)
    if type(bounds) is Bottom:
        return bounds
    if type(bounds) is not list:
        return check_atom(bounds, BasicType(mask))  # the bounds pin one value (>=1 & <=1)
    if not bounds:
        return BasicType(mask)
    one = single_int(mask, bounds)
    if one is not None:
        return one
    if len(bounds) == 1 and mask == K_ALL:
        return bounds[0]
    if len(bounds) == 1 and type(bounds[0]) is Bound and bounds[0].op in ("<", "<=", ">", ">=") and \
            mask == bounds[0].mask():
        return bounds[0]
    return Conj(mask, tuple(bounds))


def _same_bound(x: Any, y: Any) -> bool:
    if type(x) is Bound and type(y) is Bound:
        return x.op == y.op and equal_atoms(x.value, y.value)
    if type(x) is Validator and type(y) is Validator:
        return x.name == y.name and x.args == y.args
    return False


def _simplify_bounds(bounds: list) -> Any:
    """Keep the tightest lower and upper bound; an empty range is a conflict."""
    lower = upper = None
    rest = []
    for b in bounds:
        if type(b) is Bound and b.op in (">", ">=") and kind_of(b.value) & K_NUMBER | K_STRING:
            if lower is None or b.value > lower.value or (b.value == lower.value and b.op == ">"):
                lower = b
        elif type(b) is Bound and b.op in ("<", "<="):
            if upper is None or b.value < upper.value or (b.value == upper.value and b.op == "<"):
                upper = b
        else:
            rest.append(b)
    if lower is not None and upper is not None:
        try:
            if lower.value > upper.value or (lower.value == upper.value and (lower.op == ">" or upper.op == "<")):
                return Bottom(f"incompatible bounds {lower!r} and {upper!r}", "conflict")
            if lower.value == upper.value:
                return lower.value
        except TypeError:
            return Bottom(f"incompatible bounds {lower!r} and {upper!r}", "conflict")
    out = [b for b in (lower, upper) if b is not None]
    return out + rest


def single_int(mask: int, bounds: list) -> Any:
    """`int & >2 & <4` is 3: an int range with room for one value is that value (as CUE simplifies)."""
    if mask != K_INT or len(bounds) != 2:
        return None
    lo, hi = bounds
    if type(lo) is not Bound or type(hi) is not Bound or lo.op not in (">", ">=") or hi.op not in ("<", "<="):
        return None
    if not (kind_of(lo.value) & K_NUMBER and kind_of(hi.value) & K_NUMBER):
        return None
    first = math.floor(lo.value) + 1 if lo.op == ">" else math.ceil(lo.value)
    last = math.ceil(hi.value) - 1 if hi.op == "<" else math.floor(hi.value)
    return first if first == last else None


def unify_disj(a: Any, b: Any) -> Any:
    """Unification distributes over disjunctions; defaults combine by the spec's rules U0-U2: a side
    without defaults does not restrict the other's."""
    da = a.alts if type(a) is Disj else [(a, False)]
    db = b.alts if type(b) is Disj else [(b, False)]
    ha = any(d for _, d in da)
    hb = any(d for _, d in db)
    out: list[tuple[Any, bool]] = []
    errors: list[Bottom] = []
    for va, fa in da:
        for vb, fb in db:
            v = unify_scalar(va, vb)
            if type(v) is Bottom:
                errors.append(v)
                continue
            add_alt(out, v, (ha or hb) and (fa or not ha) and (fb or not hb))
    if not out and len(errors) > 1:
        return Bottom(f"{len(errors)} errors in empty disjunction: " + "; ".join(e.message for e in errors[:4]),
                      "conflict")
    return make_disj(out, errors[0] if errors else None)


def add_alt(out: list, v: Any, default: bool) -> None:
    for i, (w, d) in enumerate(out):
        if same_value(v, w):
            out[i] = (w, d or default)
            return
    out.append((v, default))


def same_value(a: Any, b: Any) -> bool:
    if is_atom(a) and is_atom(b):
        return equal_atoms(a, b) and kind_of(a) == kind_of(b)
    if type(a) is not type(b):
        return False
    if type(a) is BasicType:
        return a.mask == b.mask
    if type(a) is Bound:
        return _same_bound(a, b)
    if type(a) is Top:
        return True
    if type(a) is Conj:
        return a.mask == b.mask and len(a.bounds) == len(b.bounds) and all(
            any(_same_bound(x, y) for y in b.bounds) for x in a.bounds)
    return a is b


def make_disj(alts: list[tuple[Any, bool]], err: Bottom | None = None) -> Any:
    if not alts:
        if err is not None:
            return err
        return Bottom("empty disjunction", "conflict")
    if len(alts) == 1:
        return alts[0][0]
    return Disj(alts)


def default_of(v: Any) -> Any:
    """The value an operand stands for in an expression: a disjunction's single default (or its single
    value), else an incomplete error."""
    if type(v) is Disj:
        ds = v.defaults()
        if len(ds) == 1:
            return ds[0]
        if not ds and len(v.alts) == 1:
            return v.alts[0][0]
        return Bottom(f"incomplete value {v!r} ({'ambiguous default' if ds else 'unresolved disjunction'})",
                      "incomplete")
    return v


def term_flags(v: Any, rule: str) -> list[tuple[Any, bool]]:
    """The alternatives a disjunction term contributes, with default flags by the spec's rules M0-M3 and
    D0-D2. rule: "T" (a marked term), "F" (an unmarked term of a marked disjunction), "own" (a term of an
    unmarked disjunction)."""
    own = v.alts if type(v) is Disj else [(v, False)]
    has_own = any(d for _, d in own)
    if rule == "T":
        return own if has_own else [(x, True) for x, _ in own]
    if rule == "F":
        return [(x, False) for x, _ in own]
    return list(own)


def to_decimal(v: Any) -> Decimal:
    return v if type(v) is Decimal else Decimal(v)


# apd's context as CUE configures it: 24 significant digits.
DECIMAL = Context(prec=24)
