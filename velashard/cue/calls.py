"""Calling builtins: arguments evaluated to plain data, results turned back into values; the few
builtins that need the evaluator itself (len, and, or, close, list.Sort) live here."""

from __future__ import annotations

from functools import cmp_to_key
from typing import Any

from velashard.cue import ast
from velashard.cue.errors import CueError
from velashard.cue.evaluator import LIST, STRUCT, Conjunct, Env, Vertex, evaluate, temp_vertex
from velashard.cue.export import from_data, to_data
from velashard.cue.values import (NULL, Bottom, Disj, Func, Validator, default_of, fmt, is_atom, make_disj)


def call(x: ast.Call, env: Env | None) -> Any:
    fn = evaluate(x.fn, env)
    if type(fn) is Bottom:
        return fn
    if type(fn) is not Func:
        return Bottom(f"cannot call non-function {fmt(fn) if is_atom(fn) else 'value'}", "eval", (x.pos,))
    if fn.raw:
        return _RAW[fn.name](fn, x, env)
    args = []
    for a in x.args:
        v = argument(a, env)
        if type(v) is Bottom:
            return v if v.positions else Bottom(v.message, v.kind, (a.pos,))
        args.append(v)
    if fn.validator and fn.arity >= 1 and len(args) == fn.arity - 1:
        return Validator(fn.name, fn.fn, tuple(args))
    if fn.arity >= 0 and len(args) != fn.arity:
        return Bottom(f"{fn.name}: expected {fn.arity} arguments, got {len(args)}", "eval", (x.pos,))
    try:
        result = fn.fn(*args)
    except CueError as err:
        return Bottom(f"error in call to {fn.name}: {err.message}", err.kind, (x.pos,))
    except (TypeError, ValueError, IndexError, KeyError, AttributeError, OverflowError) as err:
        return Bottom(f"error in call to {fn.name}: {err}", "eval", (x.pos,))
    return from_data(result)


def argument(a: ast.Expr, env: Env | None) -> Any:
    """An argument as plain data; not concrete is an incomplete error."""
    v = default_of(evaluate(a, env))
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


def _len(fn: Func, x: ast.Call, env: Env | None) -> Any:
    if len(x.args) != 1:
        return Bottom("len: expected 1 argument", "eval", (x.pos,))
    v = default_of(evaluate(x.args[0], env))
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
            return sum(1 for k, a in v.arcs.items() if a.regular and type(k) is str and k[:1] not in "#_")
    if is_atom(v):
        return Bottom(f"invalid argument {fmt(v)} for len", "eval", (x.pos,))
    return Bottom(f"len: incomplete argument {fmt(v)}", "incomplete", (x.pos,))


def _list_items(fn: Func, x: ast.Call, env: Env | None) -> Any:
    if len(x.args) != 1:
        return Bottom(f"{fn.name}: expected 1 argument", "eval", (x.pos,))
    v = default_of(evaluate(x.args[0], env))
    if type(v) is Bottom:
        return v
    if type(v) is not Vertex or v.kind != LIST:
        return Bottom(f"{fn.name}: argument must be a list", "eval", (x.pos,))
    return list(v.arcs.values())


def _and(fn: Func, x: ast.Call, env: Env | None) -> Any:
    items = _list_items(fn, x, env)
    if type(items) is Bottom:
        return items
    v = Vertex(None, None)
    for a in items:
        v.conjuncts.append(Conjunct(None, None, value=a))
    return v.value()


def _or(fn: Func, x: ast.Call, env: Env | None) -> Any:
    items = _list_items(fn, x, env)
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


def _close(fn: Func, x: ast.Call, env: Env | None) -> Any:
    return temp_vertex(x, env).value()


def _sort(fn: Func, x: ast.Call, env: Env | None) -> Any:
    if len(x.args) != 2:
        return Bottom(f"{fn.name}: expected 2 arguments", "eval", (x.pos,))
    items = argument(x.args[0], env)
    if type(items) is Bottom:
        return items
    if type(items) is not list:
        return Bottom(f"{fn.name}: first argument must be a list", "eval", (x.pos,))
    cmp = evaluate(x.args[1], env)
    if type(cmp) is Bottom:
        return cmp
    if type(cmp) is not Vertex:
        return Bottom(f"{fn.name}: second argument must be a comparator struct {{x, y, less}}", "eval", (x.pos,))

    def less(a: Any, b: Any) -> bool:
        v = Vertex(None, None)
        v.conjuncts.append(Conjunct(None, None, value=cmp))
        v.conjuncts.append(Conjunct(None, None, value=from_data({"x": a, "y": b})))
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
    return from_data(ordered)


_RAW = {"len": _len, "and": _and, "or": _or, "close": _close,
        "list.Sort": _sort, "list.SortStable": _sort, "list.IsSorted": _sort}
