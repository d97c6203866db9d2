"""Predeclared identifiers and the standard packages, as CUE defines them.

Package functions take and return plain data (str, int, Decimal, bool, bytes, None for null, list,
dict) and raise CueError; the evaluator converts at the edge. Nothing here touches files, the
network, the environment or the clock: the `tool/...` packages are not provided, and a function
a package does not have is an error naming it."""

from __future__ import annotations

import base64
import hashlib
import json
import math as _math
import re
from decimal import ROUND_CEILING, ROUND_DOWN, ROUND_FLOOR, ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any, Callable

from velashard.cue.errors import CueError
from velashard.cue.values import (K_FLOAT, K_INT, K_NUMBER, K_BOOL, K_BYTES, K_NULL, K_STRING, TOP,
                                  BasicType, Bound, Conj, CueSource, Func, Package, DECIMAL)
from velashard.cue.regex import compile_regex, expand, matches, replace_all


def _ints(lo: int, hi: int) -> Conj:
    return Conj(K_INT, (Bound(">=", lo), Bound("<=", hi)))


UNIVERSE: dict[str, Any] = {
    "_": TOP,
    "bool": BasicType(K_BOOL), "string": BasicType(K_STRING), "bytes": BasicType(K_BYTES),
    "number": BasicType(K_NUMBER), "int": BasicType(K_INT), "float": BasicType(K_FLOAT),
    "null": BasicType(K_NULL),
    "uint": Conj(K_INT, (Bound(">=", 0),)),
    "int8": _ints(-128, 127), "int16": _ints(-32768, 32767), "int32": _ints(-2**31, 2**31 - 1),
    "int64": _ints(-2**63, 2**63 - 1), "int128": _ints(-2**127, 2**127 - 1),
    "uint8": _ints(0, 255), "uint16": _ints(0, 65535), "uint32": _ints(0, 2**32 - 1),
    "uint64": _ints(0, 2**64 - 1), "uint128": _ints(0, 2**128 - 1), "rune": _ints(0, 0x10FFFF),
    "float32": Conj(K_NUMBER, (Bound(">=", Decimal("-3.40282346638528859811704183484516925440e+38")),
                               Bound("<=", Decimal("3.40282346638528859811704183484516925440e+38")))),
    "float64": Conj(K_NUMBER, (Bound(">=", Decimal("-1.797693134862315708145274237317043567981e+308")),
                               Bound("<=", Decimal("1.797693134862315708145274237317043567981e+308")))),
}


def fail(message: str, kind: str = "eval") -> CueError:
    return CueError(message, kind)


# ---- predeclared functions -----------------------------------------------------------------------
def _intop(name: str, fn: Callable[[int, int], int]) -> Func:
    def op(a: Any, b: Any) -> int:
        if type(a) is not int or type(b) is not int:
            raise fail(f"{name}: arguments must be integers")
        if b == 0:
            raise fail(f"{name}: division by zero")
        return fn(a, b)
    return Func(name, op, 2)


def _euclid_div(a: int, b: int) -> int:
    q = a // b
    if a - q * b < 0:
        q += 1 if b < 0 else -1
    if a - q * b < 0 or a - q * b >= abs(b):
        q = (a - (a % abs(b))) // b
    return q


def _euclid_mod(a: int, b: int) -> int:
    return a % abs(b)


def _quo(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _rem(a: int, b: int) -> int:
    return a - _quo(a, b) * b


UNIVERSE.update({
    "div": _intop("div", lambda a, b: (a - _euclid_mod(a, b)) // b),
    "mod": _intop("mod", _euclid_mod),
    "quo": _intop("quo", _quo),
    "rem": _intop("rem", _rem),
    # len, close, and, or need the evaluator: velashard.cue.evaluator.call handles them by name
    "len": Func("len", None, 1, raw=True),
    "close": Func("close", None, 1, raw=True),
    "and": Func("and", None, 1, raw=True),
    "or": Func("or", None, 1, raw=True),
})


# ---- strings -------------------------------------------------------------------------------------
def _need_str(name: str, *vals: Any) -> None:
    for v in vals:
        if type(v) is not str:
            raise fail(f"{name}: expected a string, got {type(v).__name__}")


def _byte_index(s: str, sub: str, last: bool = False) -> int:
    bs, bsub = s.encode(), sub.encode()
    return bs.rfind(bsub) if last else bs.find(bsub)


def _go_split(s: str, sep: str, n: int = -1, after: bool = False) -> list[str]:
    if n == 0:
        return []
    if sep == "":
        chars = list(s)
        if n > 0 and len(chars) > n:
            chars = chars[:n - 1] + ["".join(chars[n - 1:])]
        return chars
    out: list[str] = []
    start = 0
    while n < 0 or len(out) < n - 1:
        i = s.find(sep, start)
        if i < 0:
            break
        out.append(s[start:i + len(sep)] if after else s[start:i])
        start = i + len(sep)
    out.append(s[start:])
    return out


def _title(s: str) -> str:
    out = []
    prev = " "
    for c in s:
        out.append(c.upper() if not (prev.isalnum() or prev == "_" or prev == "'") else c)
        prev = c
    return "".join(out)


def _go_count(s: str, sub: str) -> int:
    return len(s) + 1 if sub == "" else s.count(sub)


def _replace(s: str, old: str, new: str, n: int) -> str:
    return s.replace(old, new) if n < 0 else s.replace(old, new, n)


def _go_trim_space(s: str) -> str:
    return s.strip(" \t\n\v\f\r\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
                   "\u200a\u2028\u2029\u202f\u205f\u3000")


STRINGS: dict[str, Func] = {f.name: f for f in [
    Func("Compare", lambda a, b: (a > b) - (a < b), 2),
    Func("Contains", lambda s, sub: sub in s, 2),
    Func("ContainsAny", lambda s, chars: any(c in s for c in chars), 2),
    Func("Count", _go_count, 2),
    Func("EqualFold", lambda a, b: a.casefold() == b.casefold(), 2),
    Func("Fields", lambda s: s.split(), 1),
    Func("HasPrefix", lambda s, p: s.startswith(p), 2),
    Func("HasSuffix", lambda s, p: s.endswith(p), 2),
    Func("Index", lambda s, sub: _byte_index(s, sub), 2),
    Func("IndexAny", lambda s, chars: min([s.encode().find(c.encode()) for c in chars if c in s] or [-1]), 2),
    Func("LastIndex", lambda s, sub: _byte_index(s, sub, True), 2),
    Func("LastIndexAny", lambda s, chars: max([s.encode().rfind(c.encode()) for c in chars] or [-1]), 2),
    Func("Join", lambda elems, sep: _join(elems, sep), 2),
    Func("Repeat", lambda s, n: _repeat(s, n), 2),
    Func("Replace", _replace, 4),
    Func("Split", lambda s, sep: _go_split(s, sep), 2),
    Func("SplitAfter", lambda s, sep: _go_split(s, sep, -1, True), 2),
    Func("SplitN", lambda s, sep, n: _go_split(s, sep, n), 3),
    Func("SplitAfterN", lambda s, sep, n: _go_split(s, sep, n, True), 3),
    Func("Title", _title, 1),
    Func("ToTitle", _title, 1),
    Func("ToLower", lambda s: s.lower(), 1),
    Func("ToUpper", lambda s: s.upper(), 1),
    Func("Trim", lambda s, cut: s.strip(cut), 2),
    Func("TrimLeft", lambda s, cut: s.lstrip(cut), 2),
    Func("TrimRight", lambda s, cut: s.rstrip(cut), 2),
    Func("TrimPrefix", lambda s, p: s[len(p):] if p and s.startswith(p) else s, 2),
    Func("TrimSuffix", lambda s, p: s[:-len(p)] if p and s.endswith(p) else s, 2),
    Func("TrimSpace", _go_trim_space, 1),
    Func("MinRunes", lambda s, n: len(s) >= n, 2, validator=True),
    Func("MaxRunes", lambda s, n: len(s) <= n, 2, validator=True),
    Func("Runes", lambda s: [ord(c) for c in s], 1),
    Func("ByteAt", lambda b, i: (b.encode() if type(b) is str else b)[i], 2),
    Func("ByteSlice", lambda b, i, j: (b.encode() if type(b) is str else b)[i:j], 3),
    Func("SliceRunes", lambda s, i, j: s[i:j], 3),
]}


def _join(elems: Any, sep: str) -> str:
    if type(elems) is not list:
        raise fail("strings.Join: first argument must be a list of strings")
    for e in elems:
        if type(e) is not str:
            raise fail(f"strings.Join: list element {_show(e)} is not a string")
    return sep.join(elems)


def _repeat(s: str, n: int) -> str:
    if n < 0:
        raise fail("strings.Repeat: negative Repeat count")
    if len(s) * n > (4 << 20):
        raise fail("strings.Repeat: result too long", "limit")
    return s * n


def _show(v: Any) -> str:
    if type(v) is str:
        return json.dumps(v)
    return str(v)


# ---- strconv -------------------------------------------------------------------------------------
def _atoi(s: str) -> int:
    try:
        if not re.fullmatch(r"[+-]?[0-9]+", s):
            raise ValueError
        return int(s)
    except ValueError:
        raise fail(f'strconv.Atoi: parsing {json.dumps(s)}: invalid syntax') from None


def _parse_int(s: str, base: int, bits: int) -> int:
    text = s.replace("_", "") if base == 0 else s
    try:
        v = int(text, base)
    except ValueError:
        raise fail(f'strconv.ParseInt: parsing {json.dumps(s)}: invalid syntax') from None
    if bits and not -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
        raise fail(f'strconv.ParseInt: parsing {json.dumps(s)}: value out of range')
    return v


def _parse_float(s: str, bits: int) -> Decimal:
    try:
        return Decimal(s.replace("_", ""))
    except InvalidOperation:
        raise fail(f'strconv.ParseFloat: parsing {json.dumps(s)}: invalid syntax') from None


def _parse_bool(s: str) -> bool:
    if s in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if s in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise fail(f'strconv.ParseBool: parsing {json.dumps(s)}: invalid syntax')


def _format_int(i: int, base: int) -> str:
    if not 2 <= base <= 36:
        raise fail("strconv.FormatInt: illegal base")
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    n = abs(i)
    out = ""
    while True:
        n, r = divmod(n, base)
        out = digits[r] + out
        if n == 0:
            break
    return "-" + out if i < 0 else out


def go_quote(s: str) -> str:
    out = ['"']
    for c in s:
        o = ord(c)
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c in "\a\b\f\n\r\t\v":
            out.append({"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                        "\v": "\\v"}[c])
        elif o < 0x20 or o == 0x7f:
            out.append(f"\\x{o:02x}")
        elif c.isprintable() or c == " ":
            out.append(c)
        elif o < 0x10000:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    out.append('"')
    return "".join(out)


def _unquote(s: str) -> str:
    if len(s) >= 2 and s[0] == s[-1] == "`":
        return s[1:-1]
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'":
        try:
            return json.loads('"' + s[1:-1].replace("\\'", "'") + '"') if s[0] == '"' else s[1:-1]
        except ValueError:
            pass
    raise fail("strconv.Unquote: invalid syntax")


STRCONV: dict[str, Func] = {f.name: f for f in [
    Func("Atoi", _atoi, 1),
    Func("Itoa", lambda i: str(i), 1),
    Func("ParseInt", _parse_int, 3),
    Func("ParseUint", lambda s, base, bits: abs(_parse_int(s, base, bits + 1 if bits else 0)), 3),
    Func("ParseFloat", _parse_float, 2),
    Func("ParseBool", _parse_bool, 1),
    Func("FormatInt", _format_int, 2),
    Func("FormatUint", _format_int, 2),
    Func("FormatBool", lambda b: "true" if b else "false", 1),
    Func("FormatFloat", lambda f, fmt_, prec, bits: _format_float(f, fmt_, prec), 4),
    Func("Quote", go_quote, 1),
    Func("QuoteToASCII", lambda s: go_quote(s).encode("ascii", "backslashreplace").decode(), 1),
    Func("Unquote", _unquote, 1),
]}


def _format_float(f: Any, fmt_: Any, prec: int) -> str:
    """Go's strconv.FormatFloat for the formats f, e, E, g, G; precision -1 is the shortest exact form."""
    code = chr(fmt_) if type(fmt_) is int else str(fmt_)
    x = float(f)
    if code not in ("f", "e", "E", "g", "G"):
        raise fail(f"strconv.FormatFloat: unsupported format {code!r}")
    if prec >= 0:
        text = f"{x:.{prec}{code}}"
    else:
        shortest = Decimal(repr(x))
        if code == "f":
            text = format(shortest, "f")
        elif code in "eE":
            digits = len(shortest.normalize().as_tuple().digits) - 1
            text = f"{x:.{max(digits, 0)}{code}}"
        else:
            exp = shortest.adjusted()
            text = format(shortest.normalize(), "f") if -4 <= exp < 21 else f"{x:{code}}"
    if code in "eEgG":
        text = re.sub(r"([eE][+-])(\d)$", r"\g<1>0\2", text)
    return text


# ---- list ----------------------------------------------------------------------------------------
def _need_list(name: str, v: Any) -> list:
    if type(v) is not list:
        raise fail(f"{name}: expected a list, got {_kind(v)}")
    return v


def _kind(v: Any) -> str:
    return {dict: "struct", list: "list", str: "string", int: "int", bool: "bool", bytes: "bytes",
            Decimal: "float", type(None): "null"}.get(type(v), "value")


def _numbers(name: str, xs: list) -> list:
    for x in _need_list(name, xs):
        if type(x) not in (int, Decimal):
            raise fail(f"{name}: list element {_show(x)} is not a number")
    return xs


def _sum(xs: list) -> Any:
    _numbers("list.Sum", xs)
    if all(type(x) is int for x in xs):
        return sum(xs)
    total = Decimal(0)
    for x in xs:
        total = DECIMAL.add(total, Decimal(x))
    return total


def _product(xs: list) -> Any:
    _numbers("list.Product", xs)
    if all(type(x) is int for x in xs):
        p = 1
        for x in xs:
            p *= x
        return p
    p = Decimal(1)
    for x in xs:
        p = DECIMAL.multiply(p, Decimal(x))
    return p


def _avg(xs: list) -> Decimal:
    _numbers("list.Avg", xs)
    if not xs:
        raise fail("list.Avg: empty list")
    total = Decimal(0)
    for x in xs:
        total = DECIMAL.add(total, Decimal(x))
    return DECIMAL.divide(total, Decimal(len(xs)))


def _max(xs: list) -> Any:
    _numbers("list.Max", xs)
    if not xs:
        raise fail("list.Max: empty list")
    return max(xs)


def _min(xs: list) -> Any:
    _numbers("list.Min", xs)
    if not xs:
        raise fail("list.Min: empty list")
    return min(xs)


def _range(start: Any, limit: Any, step: Any) -> list:
    if step == 0:
        raise fail("list.Range: step must be non zero")
    if (step > 0 and start > limit) or (step < 0 and start < limit):
        raise fail("list.Range: end must be greater than start when step is positive")
    out = []
    x = start
    while (x < limit) if step > 0 else (x > limit):
        out.append(x)
        if len(out) > 100_000:
            raise fail("list.Range: more than 100000 elements", "limit")
        x = x + step if type(x) is int and type(step) is int else DECIMAL.add(Decimal(x), Decimal(step))
    return out


def _flatten(xs: Any, depth: int) -> list:
    out: list = []
    for x in _need_list("list.FlattenN", xs):
        if type(x) is list and depth != 0:
            out.extend(_flatten(x, depth - 1))
        else:
            out.append(x)
    return out


def _concat(lists: Any) -> list:
    out: list = []
    for x in _need_list("list.Concat", lists):
        out.extend(_need_list("list.Concat", x))
    return out


def _slice(xs: list, i: int, j: int) -> list:
    if i < 0 or j > len(xs) or i > j:
        raise fail(f"list.Slice: invalid slice index [{i}:{j}] of length {len(xs)}")
    return xs[i:j]


def _take(xs: list, n: int) -> list:
    if n < 0:
        raise fail("list.Take: negative index")
    return xs[:n]


def _drop(xs: list, n: int) -> list:
    if n < 0:
        raise fail("list.Drop: negative index")
    return xs[n:]


def _unique(xs: list) -> bool:
    seen = []
    for x in xs:
        if x in seen:
            return False
        seen.append(x)
    return True


def _sort_strings(xs: list) -> list:
    for x in _need_list("list.SortStrings", xs):
        if type(x) is not str:
            raise fail(f"list.SortStrings: element {_show(x)} is not a string")
    return sorted(xs)


LIST: dict[str, Any] = {f.name: f for f in [
    Func("Concat", _concat, 1),
    Func("Contains", lambda xs, v: v in _need_list("list.Contains", xs), 2),
    Func("Drop", _drop, 2),
    Func("FlattenN", _flatten, 2),
    Func("Take", _take, 2),
    Func("Slice", _slice, 3),
    Func("Range", _range, 3),
    Func("Repeat", lambda xs, n: _need_list("list.Repeat", xs) * n if n >= 0 else [], 2),
    Func("Sum", _sum, 1),
    Func("Product", _product, 1),
    Func("Avg", _avg, 1),
    Func("Max", _max, 1),
    Func("Min", _min, 1),
    Func("SortStrings", _sort_strings, 1),
    Func("IsSortedStrings", lambda xs: xs == sorted(xs), 1),
    Func("UniqueItems", _unique, 1, validator=True),
    Func("MinItems", lambda xs, n: len(xs) >= n, 2, validator=True),
    Func("MaxItems", lambda xs, n: len(xs) <= n, 2, validator=True),
    Func("Sort", None, 2, raw=True),

    Func("SortStable", None, 2, raw=True),
    Func("IsSorted", None, 2, raw=True),
]}


# ---- math ----------------------------------------------------------------------------------------
def _round(x: Any, mode: str) -> int:
    if type(x) is int:
        return x
    return int(Decimal(x).quantize(Decimal(1), rounding=mode))


def _pow(x: Any, y: Any) -> Any:
    if type(x) is int and type(y) is int and y >= 0:
        if y > 10_000:
            raise fail("math.Pow: exponent too large", "limit")
        return Decimal(x ** y)
    return DECIMAL.power(Decimal(x), Decimal(y))


def _float_fn(name: str, fn: Callable[[float], float]) -> Func:
    def wrapped(x: Any) -> Decimal:
        try:
            return Decimal(repr(fn(float(x))))
        except (ValueError, OverflowError) as err:
            raise fail(f"math.{name}: {err}") from None
    return Func(name, wrapped, 1)


def _full(d: Decimal) -> Decimal:
    """All 24 digits, as apd leaves an inexact operation's result (math.Log10(1000) is 3.000...)."""
    if d == 0:
        return d
    return d.quantize(Decimal(1).scaleb(d.adjusted() - 23), context=DECIMAL)


def _decimal_fn(name: str, fn: Callable[[Decimal], Decimal]) -> Func:
    """A function apd computes exactly to 24 digits, as CUE does (math.Sqrt(16) is 4)."""
    def wrapped(x: Any) -> Decimal:
        try:
            return fn(Decimal(x))
        except (ArithmeticError, ValueError) as err:
            raise fail(f"math.{name}: {err}") from None
    return Func(name, wrapped, 1)


def _multiple_of(x: Any, y: Any) -> bool:
    if y == 0:
        raise fail("math.MultipleOf: division by zero")
    return Decimal(x) % Decimal(y) == 0


MATH: dict[str, Any] = {f.name: f for f in [
    Func("Floor", lambda x: _round(x, ROUND_FLOOR), 1),
    Func("Ceil", lambda x: _round(x, ROUND_CEILING), 1),
    Func("Trunc", lambda x: _round(x, ROUND_DOWN), 1),
    Func("Round", lambda x: _round(x, ROUND_HALF_UP), 1),
    Func("RoundToEven", lambda x: _round(x, ROUND_HALF_EVEN), 1),
    Func("Abs", lambda x: abs(x), 1),
    Func("Pow", _pow, 2),
    _decimal_fn("Sqrt", DECIMAL.sqrt), _decimal_fn("Log", lambda x: _full(DECIMAL.ln(x))),
    _decimal_fn("Log2", lambda x: _full(DECIMAL.divide(DECIMAL.ln(x), DECIMAL.ln(Decimal(2))))),
    _decimal_fn("Log10", lambda x: _full(DECIMAL.divide(DECIMAL.ln(x), DECIMAL.ln(Decimal(10))))),
    _decimal_fn("Exp", DECIMAL.exp), _float_fn("Sin", _math.sin),
    _float_fn("Cos", _math.cos), _float_fn("Tan", _math.tan),
    Func("Signbit", lambda x: x < 0, 1),
    Func("Exp2", lambda x: _pow(2, x), 1),
    Func("MultipleOf", lambda x, y: _multiple_of(x, y), 2, validator=True),
]}
MATH.update({
    "Pi": Decimal("3.14159265358979323846264338327950288419716939937510582097494459"),
    "E": Decimal("2.71828182845904523536028747135266249775724709369995957496696763"),
    "MaxInt8": 127, "MinInt8": -128, "MaxInt16": 32767, "MinInt16": -32768,
    "MaxInt32": 2**31 - 1, "MinInt32": -2**31, "MaxInt64": 2**63 - 1, "MinInt64": -2**63,
    "MaxUint8": 255, "MaxUint16": 65535, "MaxUint32": 2**32 - 1, "MaxUint64": 2**64 - 1,
})

STRUCT: dict[str, Any] = {f.name: f for f in [
    Func("MinFields", lambda s, n: type(s) is dict and len(s) >= n, 2, validator=True),
    Func("MaxFields", lambda s, n: type(s) is dict and len(s) <= n, 2, validator=True),
]}


# ---- regexp (RE2, with Go's successive matches and templates: regex.py) ---------------------------
def _find(pattern: str, s: str) -> str:
    m = compile_regex(pattern).search(s)
    if m is None:
        raise fail("regexp.Find: no match")
    return m.group(0)


def _find_all(pattern: str, s: str, n: int) -> list:
    out = []
    for m in matches(compile_regex(pattern), s):
        if 0 <= n <= len(out):
            break
        out.append(m.group(0))
    if not out:
        raise fail("regexp.FindAll: no match")
    return out


def _groups(m: Any) -> list:
    return [m.group(0)] + [g or "" for g in m.groups()]


def _find_submatch(pattern: str, s: str) -> list:
    m = compile_regex(pattern).search(s)
    if m is None:
        raise fail("regexp.FindSubmatch: no match")
    return _groups(m)


def _find_all_submatch(pattern: str, s: str, n: int) -> list:
    out = []
    for m in matches(compile_regex(pattern), s):
        if 0 <= n <= len(out):
            break
        out.append(_groups(m))
    if not out:
        raise fail("regexp.FindAllSubmatch: no match")
    return out


def _find_named(pattern: str, s: str) -> dict:
    m = compile_regex(pattern).search(s)
    if m is None:
        raise fail("regexp.FindNamedSubmatch: no match")
    return {k: v or "" for k, v in m.groupdict().items()}


def _valid_regexp(pattern: str) -> bool:
    compile_regex(pattern)
    return True


_META = frozenset("\\.+*?()|[]{}^$")


REGEXP: dict[str, Any] = {f.name: f for f in [
    Func("Match", lambda p, s: compile_regex(p).search(s) is not None, 2),
    Func("Find", _find, 2),
    Func("FindAll", _find_all, 3),
    Func("FindSubmatch", _find_submatch, 2),
    Func("FindAllSubmatch", _find_all_submatch, 3),
    Func("FindNamedSubmatch", _find_named, 2),
    Func("ReplaceAll", lambda p, src, repl: replace_all(compile_regex(p), src, lambda m: expand(m, repl)), 3),
    Func("ReplaceAllLiteral", lambda p, src, repl: replace_all(compile_regex(p), src, lambda m: repl), 3),
    Func("QuoteMeta", lambda s: "".join("\\" + c if c in _META else c for c in s), 1),
    Func("Valid", _valid_regexp, 1, validator=True),
]}


# ---- encodings -----------------------------------------------------------------------------------
def _to_text(v: Any, name: str) -> str:
    if type(v) is bytes:
        return v.decode("utf-8", "replace")
    if type(v) is str:
        return v
    raise fail(f"{name}: expected a string or bytes, got {_kind(v)}")


def _json_unmarshal(data: Any) -> Any:
    text = _to_text(data, "json.Unmarshal")
    try:
        return json.loads(text, parse_float=Decimal, parse_constant=_reject)
    except ValueError as err:
        raise fail(f"json.Unmarshal: invalid JSON: {err}") from None


def _reject(word: str) -> Any:
    raise ValueError(f"invalid literal {word}")


def _json_valid(data: Any) -> bool:
    try:
        json.loads(_to_text(data, "json.Valid"), parse_constant=_reject)
        return True
    except ValueError:
        return False


def _json_indent(src: Any, prefix: str, indent: str) -> str:
    from velashard.cue.encode import go_json
    return go_json(_json_unmarshal(src), indent, prefix, escape_html=False, trailing_newline=False)


def _json_compact(src: Any) -> str:
    from velashard.cue.encode import go_json
    return go_json(_json_unmarshal(src), None, escape_html=False, trailing_newline=False)


def _json_marshal(v: Any) -> str:
    from velashard.cue.encode import go_json
    return go_json(v, None, trailing_newline=False)


def _json_marshal_stream(vs: Any) -> str:
    return "".join(_json_marshal(v) + "\n" for v in _need_list("json.MarshalStream", vs))


JSON: dict[str, Any] = {f.name: f for f in [
    Func("Marshal", _json_marshal, 1),
    Func("MarshalStream", _json_marshal_stream, 1),
    Func("Unmarshal", _json_unmarshal, 1),
    Func("Valid", _json_valid, 1),
    Func("Indent", _json_indent, 3),
    Func("Compact", _json_compact, 1),
]}


def _yaml_marshal(v: Any) -> str:
    from velashard.cue.encode import go_yaml
    return go_yaml(v)


def _yaml_marshal_stream(vs: Any) -> str:
    from velashard.cue.encode import go_yaml
    return "---\n".join(go_yaml(v) for v in _need_list("yaml.MarshalStream", vs))


def _yaml_unmarshal(data: Any) -> Any:
    import yaml
    text = _to_text(data, "yaml.Unmarshal")
    try:
        value = yaml.load(text, Loader=_yaml_loader())  # noqa: S506 - SafeLoader with exact decimals
    except yaml.YAMLError as err:
        raise fail(f"yaml.Unmarshal: {str(err).splitlines()[0]}") from None
    return _yaml_data(value)


def _yaml_data(v: Any) -> Any:
    if isinstance(v, dict):
        return {(("true" if k else "false") if isinstance(k, bool) else str(k)): _yaml_data(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_yaml_data(x) for x in v]
    if isinstance(v, float):
        return Decimal(repr(v))
    return v


_loader: Any = None


def _yaml_loader() -> Any:
    """PyYAML's SafeLoader, keeping floats as exact decimals and timestamps as strings (as CUE does)."""
    global _loader
    if _loader is None:
        import yaml

        class Loader(yaml.SafeLoader):
            pass

        # YAML 1.2's core schema, as CUE's parser resolves plain scalars: `yes`, `on`, 0777 and dates
        # stay strings.
        Loader.yaml_implicit_resolvers = {}
        core = [
            ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
            ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
            ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", list("-+0123456789")),
            ("tag:yaml.org,2002:float",
             r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
             list("-+.0123456789")),
        ]
        for tag, pattern, first in core:
            Loader.add_implicit_resolver(tag, re.compile(pattern), first)

        def int_constructor(loader: Any, node: Any) -> Any:
            text = loader.construct_scalar(node)
            if text.startswith("0o"):
                return int(text[2:], 8)
            return int(text, 0) if text.startswith("0x") else int(text)

        Loader.add_constructor("tag:yaml.org,2002:int", int_constructor)
        Loader.add_constructor("tag:yaml.org,2002:bool",
                               lambda loader, node: loader.construct_scalar(node).lower() == "true")

        def float_constructor(loader: Any, node: Any) -> Any:
            text = loader.construct_scalar(node).replace("_", "")
            try:
                return Decimal(text)
            except InvalidOperation:
                return loader.construct_yaml_float(node)

        Loader.add_constructor("tag:yaml.org,2002:float", float_constructor)
        Loader.add_constructor("tag:yaml.org,2002:timestamp", lambda loader, node: loader.construct_scalar(node))
        _loader = Loader
    return _loader


YAML: dict[str, Any] = {f.name: f for f in [
    Func("Marshal", _yaml_marshal, 1),
    Func("MarshalStream", _yaml_marshal_stream, 1),
    Func("Unmarshal", _yaml_unmarshal, 1),
]}


def _b64_encode(encoding: Any, data: Any) -> str:
    if encoding is not None:
        raise fail("base64.Encode: only the standard encoding (null) is supported")
    raw = data.encode() if type(data) is str else data
    return base64.b64encode(raw).decode()


def _b64_decode(encoding: Any, data: Any) -> bytes:
    if encoding is not None:
        raise fail("base64.Decode: only the standard encoding (null) is supported")
    try:
        return base64.b64decode(_to_text(data, "base64.Decode"), validate=True)
    except ValueError as err:
        raise fail(f"base64.Decode: illegal base64 data: {err}") from None


BASE64: dict[str, Any] = {f.name: f for f in [
    Func("Encode", _b64_encode, 2),
    Func("Decode", _b64_decode, 2),
    Func("EncodedLen", lambda enc, n: (n + 2) // 3 * 4, 2),
    Func("DecodedLen", lambda enc, n: n // 4 * 3, 2),
]}

HEX: dict[str, Any] = {f.name: f for f in [
    Func("Encode", lambda b: (b.encode() if type(b) is str else b).hex(), 1),
    Func("Decode", lambda s: bytes.fromhex(s), 1),
    Func("EncodedLen", lambda n: n * 2, 1),
    Func("DecodedLen", lambda n: n // 2, 1),
]}


def _digest(name: str, algo: str) -> Func:
    return Func(name, lambda data: hashlib.new(algo, data.encode() if type(data) is str else data).digest(), 1)


SHA256 = {"Sum256": _digest("Sum256", "sha256"), "Sum224": _digest("Sum224", "sha224"), "Size": 32,
          "BlockSize": 64}
SHA1 = {"Sum": _digest("Sum", "sha1"), "Size": 20, "BlockSize": 64}
SHA512 = {"Sum512": _digest("Sum512", "sha512"), "Sum384": _digest("Sum384", "sha384"), "Size": 64,
          "BlockSize": 128}
MD5 = {"Sum": _digest("Sum", "md5"), "Size": 16, "BlockSize": 64}


# ---- path (Go's path package; the OS argument defaults to unix) ----------------------------------
def _clean(p: str) -> str:
    if p == "":
        return "."
    rooted = p.startswith("/")
    parts: list[str] = []
    for seg in p.split("/"):
        if seg == "" or seg == ".":
            continue
        if seg == "..":
            if parts and parts[-1] != "..":
                parts.pop()
            elif not rooted:
                parts.append("..")
            continue
        parts.append(seg)
    out = "/".join(parts)
    if rooted:
        return "/" + out
    return out or "."


def _base(p: str, os: str = "unix") -> str:
    if p == "":
        return "."
    p = p.rstrip("/")
    if p == "":
        return "/"
    return p.rsplit("/", 1)[-1]


def _dir(p: str, os: str = "unix") -> str:
    i = p.rfind("/")
    return _clean(p[:i + 1])


def _ext(p: str, os: str = "unix") -> str:
    base = p.rsplit("/", 1)[-1]
    i = base.rfind(".")
    return base[i:] if i >= 0 else ""


def _join_path(elems: list, os: str = "unix") -> str:
    parts = [e for e in _need_list("path.Join", elems) if e != ""]
    return _clean("/".join(parts)) if parts else ""


def _split_path(p: str, os: str = "unix") -> list:
    i = p.rfind("/")
    return [p[:i + 1], p[i + 1:]]


def _path_match(pattern: str, name: str, os: str = "unix") -> bool:
    """Go's path.Match: `*` and `?` never match '/', classes as [a-z] and [^...], `\\` escapes."""
    rx = ["^"]
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            rx.append("[^/]*")
        elif c == "?":
            rx.append("[^/]")
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            rx.append(re.escape(pattern[i]))
        elif c == "[":
            j = pattern.find("]", i + 1)
            if j < 0:
                raise fail("path.Match: syntax error in pattern")
            body = pattern[i + 1:j]
            rx.append("[" + ("^/" + body[1:] if body.startswith("^") else body) + "]")
            i = j
        else:
            rx.append(re.escape(c))
        i += 1
    return re.match("".join(rx) + "$", name) is not None


PATH: dict[str, Any] = {f.name: f for f in [
    Func("Match", _path_match, -1),
    Func("Base", _base, -1), Func("Dir", _dir, -1), Func("Ext", _ext, -1), Func("Join", _join_path, -1),
    Func("Clean", lambda p, os="unix": _clean(p), -1), Func("Split", _split_path, -1),
    Func("IsAbs", lambda p, os="unix": p.startswith("/"), -1),
    Func("ToSlash", lambda p, os="unix": p, -1), Func("FromSlash", lambda p, os="unix": p, -1),
]}


# ---- time ----------------------------------------------------------------------------------------
_DURATION = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")
_UNITS = {"ns": 1, "us": 10**3, "µs": 10**3, "μs": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9,
          "h": 3600 * 10**9}


def parse_duration(s: str) -> int:
    text = s
    sign = 1
    if text[:1] in "+-":
        sign = -1 if text[0] == "-" else 1
        text = text[1:]
    if text == "0":
        return 0
    if not text:
        raise fail(f'time: invalid duration "{s}"')
    total = Decimal(0)
    pos = 0
    while pos < len(text):
        m = _DURATION.match(text, pos)
        if not m or m.group(1) in ("", "."):
            raise fail(f'time: invalid duration "{s}"')
        total += Decimal(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return sign * int(total)


def _is_duration(s: str) -> bool:
    parse_duration(s)
    return True


_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def _is_time(s: str) -> bool:
    if not _RFC3339.match(s):
        raise fail(f'invalid time "{s}"')
    return True


_GO_LAYOUT = [("2006", "%Y"), ("January", "%B"), ("Jan", "%b"), ("Monday", "%A"), ("Mon", "%a"),
              ("01", "%m"), ("02", "%d"), ("_2", "%d"), ("15", "%H"), ("03", "%I"), ("04", "%M"), ("05", "%S"),
              ("PM", "%p"), ("MST", "%Z"), ("Z07:00", "%z"), ("-07:00", "%z"), ("-0700", "%z"), ("Z0700", "%z"),
              ("06", "%y"), ("1", "%m"), ("2", "%d"), ("3", "%I"), ("4", "%M"), ("5", "%S")]


def _strptime_format(layout: str) -> str:
    out = []
    i = 0
    while i < len(layout):
        if layout.startswith((".000", ".999", ",000", ",999"), i):
            j = i + 1
            while j < len(layout) and layout[j] in "09":
                j += 1
            out.append(layout[i] + "%f")  # .000 (required) and .999 (optional) fractions alike
            i = j
            continue
        for token, code in _GO_LAYOUT:
            if layout.startswith(token, i):
                out.append(code)
                i += len(token)
                break
        else:
            out.append("%%" if layout[i] == "%" else layout[i])
            i += 1
    return "".join(out)


def _parse_time(layout: str, value: str) -> Any:
    import datetime
    fmt_ = _strptime_format(layout)
    text = value[:-1] + "+00:00" if fmt_.endswith("%z") and value.endswith("Z") else value
    fraction = ""
    if "%f" in fmt_:
        found = re.search(r"[.,](\d+)", text)
        if found:
            fraction = found.group(1)  # nanoseconds kept here; strptime takes microseconds at most
            text = text[:found.start(1)] + fraction[:6] + text[found.end(1):]
        else:
            fmt_ = fmt_.replace(".%f", "").replace(",%f", "")
    try:
        return datetime.datetime.strptime(text, fmt_), fraction
    except ValueError:
        raise fail(f'parsing time "{value}" as "{layout}": cannot parse') from None


def _rfc3339(t: Any, fraction: str = "") -> str:
    """Go's RFC3339Nano in UTC: the fraction as given, without trailing zeros."""
    import datetime
    if t.tzinfo is not None:
        t = t.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    digits = (fraction or f"{t.microsecond:06d}").rstrip("0")
    return t.strftime("%Y-%m-%dT%H:%M:%S") + ("." + digits if digits else "") + "Z"


def _unix(sec: int, nsec: int) -> str:
    import datetime
    t = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=sec + nsec // 10**9)
    return _rfc3339(t, f"{nsec % 10**9:09d}")


TIME: dict[str, Any] = {f.name: f for f in [
    Func("Duration", _is_duration, 1, validator=True),
    Func("ParseDuration", parse_duration, 1),
    Func("Time", _is_time, 1, validator=True),
    Func("Format", lambda value, layout: bool(_parse_time(layout, value)), 2, validator=True),
    Func("Parse", lambda layout, value: _rfc3339(*_parse_time(layout, value)), 2),
    Func("Unix", _unix, 2),
]}
TIME.update({"Nanosecond": 1, "Microsecond": 10**3, "Millisecond": 10**6, "Second": 10**9,
             "Minute": 60 * 10**9, "Hour": 3600 * 10**9,
             "RFC3339": "2006-01-02T15:04:05Z07:00", "RFC3339Nano": "2006-01-02T15:04:05.999999999Z07:00",
             "Kitchen": "3:04PM"})

_PACKAGE_MEMBERS: dict[str, dict[str, Any]] = {
    "strings": STRINGS, "strconv": STRCONV, "list": LIST, "math": MATH, "struct": STRUCT, "regexp": REGEXP,
    "encoding/json": JSON, "encoding/yaml": YAML, "encoding/base64": BASE64, "encoding/hex": HEX,
    "crypto/sha256": SHA256, "crypto/sha1": SHA1, "crypto/sha512": SHA512, "crypto/md5": MD5,
    "path": PATH, "time": TIME,
}
PACKAGES: dict[str, Package] = {}
for _path, _members in _PACKAGE_MEMBERS.items():
    for _f in _members.values():
        if isinstance(_f, Func) and "." not in _f.name:
            _f.name = f"{_path.split('/')[-1]}.{_f.name}"
    PACKAGES[_path] = Package(_path, _members)
LIST["Ascending"] = CueSource("{T: number | string, x: T, y: T, less: x < y}")
LIST["Descending"] = CueSource("{T: number | string, x: T, y: T, less: x > y}")


def package(path: str) -> Package:
    return PACKAGES[path]
