"""CEL libraries from PyPI compared side by side, printing one JSON object.

For each installed candidate (cel-python `celpy`, pure Python; common-expression-language `cel`, Rust
bindings; cel-expr-python `cel_expr_python`, Google's C++ runtime):
- correctness: a table of expressions as Kubernetes policies write them (has(), ['key'] map access, `in`,
  size, string functions, macros, null and missing-key handling, error absorption by && and ||,
  unknown functions rejected at compile time), each with cel-go's answer;
- speed: evaluations/s of the shard-label guard as shipped (its six variables, then its validation;
  compiled once, evaluated many times), on a tenant's move it must deny.

    python hack/bench_cel.py [--evaluations 5000]

A candidate that is not installed is reported as such; install the three to compare them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ERROR = "error"              # evaluation fails (cel-go returns an error)
COMPILE_ERROR = "compile-error"

APP = {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
       "metadata": {"name": "WEB-1", "namespace": "team-a",
                    "labels": {"app": "web", "controller.core.oam.dev/scheduled-shard-id": "shard-1"}},
       "spec": {"components": [{"name": "a", "type": "webservice"}, {"name": "b", "type": "worker"}],
                "replicas": 3}}
OLD = {"metadata": {"name": "WEB-1", "labels": {"controller.core.oam.dev/scheduled-shard-id": "shard-0"}}}
REQUEST = {"operation": "UPDATE", "userInfo": {"username": "alice", "groups": ["team-a", "system:authenticated"]}}
VARS = {"object": APP, "oldObject": OLD, "request": REQUEST}
CREATE_VARS = {"object": APP, "oldObject": None, "request": dict(REQUEST, operation="CREATE")}

# (expression, activation, cel-go's answer)
TABLE: list[tuple[str, dict[str, Any], Any]] = [
    ("has(object.metadata.labels)", VARS, True),
    ("has(object.metadata.annotations)", VARS, False),
    ("object.metadata.labels['app'] == 'web'", VARS, True),
    ("'app' in object.metadata.labels", VARS, True),
    ("'x' in object.metadata.labels", VARS, False),
    ("size(object.spec.components) == 2", VARS, True),
    ("object.spec.components.size()", VARS, 2),
    ("object.metadata.name.startsWith('WEB') && object.metadata.name.endsWith('-1')", VARS, True),
    ("object.metadata.name.contains('B-')", VARS, True),
    ("object.metadata.name.lowerAscii() == 'web-1'", VARS, True),
    ("'a,b,c'.split(',') == ['a', 'b', 'c']", VARS, True),
    ("['a', 'b'].join('-')", VARS, "a-b"),
    ("'a-b'.replace('-', '_')", VARS, "a_b"),
    ("'abc'.indexOf('c')", VARS, 2),
    ("'  x '.trim()", VARS, "x"),
    ("'abc'.matches('^a.c$')", VARS, True),
    ("object.spec.components.all(c, has(c.type))", VARS, True),
    ("object.spec.components.exists(c, c.type == 'webservice')", VARS, True),
    ("object.spec.components.map(c, c.name)", VARS, ["a", "b"]),
    ("object.spec.components.filter(c, c.type == 'worker').size() == 1", VARS, True),
    ("request.userInfo.groups.exists(g, g == 'team-a')", VARS, True),
    ("request.userInfo.username in ['bob', 'alice']", VARS, True),
    ("object.spec.replicas * 2 == 6", VARS, True),
    ("object.spec.replicas > 2.5", VARS, True),
    ("object.spec.replicas == 3.0", VARS, True),
    ("int('12') + 1", VARS, 13),
    ("string(3) + 'x'", VARS, "3x"),
    ("oldObject == null", CREATE_VARS, True),
    ("oldObject != null && oldObject.metadata.name == 'x'", CREATE_VARS, False),
    ("object.metadata.labels['missing'] == 'x'", VARS, ERROR),
    ("object.spec.missing == 1", VARS, ERROR),
    ("has(object.spec.missing.field)", VARS, ERROR),
    ("false && object.spec.missing == 1", VARS, False),
    ("object.spec.missing == 1 || true", VARS, True),
    ("'x' + 1", VARS, COMPILE_ERROR),  # Kubernetes compiles with the type checker
    ("1 / 0", VARS, ERROR),
    ("object.metadata.labels['controller.core.oam.dev/scheduled-shard-id'] != "
     "oldObject.metadata.labels['controller.core.oam.dev/scheduled-shard-id']", VARS, True),
    ("notAFunction(object)", VARS, COMPILE_ERROR),
    ("object.metadata.name.notAMethod()", VARS, COMPILE_ERROR),
    ("object.metadata.name ==", VARS, COMPILE_ERROR),
]



def guard_expressions() -> list[tuple[str, str]]:
    """The shard-label guard as shipped (velashard/sharding/guard.py): its variables, then its validation."""
    from velashard.sharding.guard import policy_spec
    spec = policy_spec(["system:serviceaccount:vela-system:vela-core", "ops"], ["shard-admins"])
    return [(v["name"], v["expression"]) for v in spec["variables"]] + \
        [("", v["expression"]) for v in spec["validations"]]


GUARD_VARS = dict(VARS, namespaceObject={"metadata": {"name": "team-a"}})


class Candidate:
    name = ""
    module = ""

    def compile(self, expr: str) -> Any:
        raise NotImplementedError

    def evaluate(self, program: Any, activation: dict[str, Any]) -> Any:
        raise NotImplementedError


class CelPython(Candidate):
    name, module = "cel-python", "celpy"

    def __init__(self) -> None:
        import celpy
        self._celpy = celpy
        self._env = celpy.Environment()

    def compile(self, expr: str) -> Any:
        return self._env.program(self._env.compile(expr))

    def evaluate(self, program: Any, activation: dict[str, Any]) -> Any:
        result = program.evaluate({k: self._celpy.json_to_cel(v) for k, v in activation.items()})
        if isinstance(result, Exception):
            raise result
        return _plain(result, self._celpy.celtypes.BoolType)


class CommonExpressionLanguage(Candidate):
    name, module = "common-expression-language", "cel"

    def __init__(self) -> None:
        import cel
        from cel import stdlib
        self._cel = cel
        self._stdlib = stdlib

    def compile(self, expr: str) -> Any:
        return self._cel.compile(expr)

    def evaluate(self, program: Any, activation: dict[str, Any]) -> Any:
        context = self._cel.Context(activation)
        self._stdlib.add_stdlib_to_context(context)
        return _plain(program.execute(context))


class CelExprPython(Candidate):
    name, module = "cel-expr-python", "cel_expr_python"

    def __init__(self) -> None:
        from cel_expr_python import cel
        from cel_expr_python.ext import ext_strings
        self._env = cel.NewEnv(variables={n: cel.Type.DYN for n in ("object", "oldObject", "request",
                                                                     "namespaceObject", "variables")},
                               extensions=[ext_strings.ExtStrings()])

    def compile(self, expr: str) -> Any:
        return self._env.compile(expr)

    def evaluate(self, program: Any, activation: dict[str, Any]) -> Any:
        value = program.eval(data=activation)
        if value.type().name() == "ERROR":
            raise RuntimeError(str(value.value()))
        return value.plain_value()


def _plain(value: Any, bool_type: type = bool) -> Any:
    if isinstance(value, (bool, bool_type)):
        return bool(value)
    if value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v, bool_type) for v in value]
    if isinstance(value, dict):
        return {_plain(k, bool_type): _plain(v, bool_type) for k, v in value.items()}
    return value


def check(candidate: Candidate) -> dict[str, Any]:
    failures = []
    for expr, activation, expected in TABLE:
        try:
            program = candidate.compile(expr)
        except Exception as err:  # each library has its own exception types
            got: Any = COMPILE_ERROR
            detail = str(err).splitlines()[0][:120]
        else:
            try:
                got = candidate.evaluate(program, activation)
                detail = ""
            except Exception as err:
                got, detail = ERROR, str(err).splitlines()[0][:120] if str(err) else type(err).__name__
        same = got == expected and type(got) is type(expected)
        if not same:
            failures.append({"expression": expr, "expected": expected, "got": got, "detail": detail})
    return {"correct": len(TABLE) - len(failures), "of": len(TABLE), "failures": failures}


def speed(candidate: Candidate, n: int) -> float | str:
    """Guard evaluations per second (each: its variables in order, then its validation), or why the guard
    does not run on this candidate."""
    try:
        programs = [(name, candidate.compile(expr)) for name, expr in guard_expressions()]
        run_guard(candidate, programs)
    except Exception as err:
        return f"the guard fails: {str(err).splitlines()[0][:160]}"
    started = time.perf_counter()
    for _ in range(n):
        run_guard(candidate, programs)
    return round(n / (time.perf_counter() - started))


def run_guard(candidate: Candidate, programs: list[tuple[str, Any]]) -> Any:
    variables: dict[str, Any] = {}
    activation = dict(GUARD_VARS, variables=variables)
    result = None
    for name, program in programs:
        result = candidate.evaluate(program, activation)
        if name:
            variables[name] = result
    if result is not False:  # alice moving an app between shards must be denied
        raise AssertionError(f"the guard allowed a tenant's move: {result!r}")
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--evaluations", type=int, default=5000, help="evaluations of each guard expression")
    args = p.parse_args()
    report: dict[str, Any] = {"cores": os.cpu_count(), "candidates": {}}
    for factory in (CelPython, CommonExpressionLanguage, CelExprPython):
        try:
            candidate: Candidate = factory()
        except ImportError as err:
            report["candidates"][factory.name] = {"installed": False, "detail": str(err)}
            continue
        entry: dict[str, Any] = {"installed": True, **check(candidate)}
        entry["guard_evaluations_per_s"] = speed(candidate, args.evaluations)
        report["candidates"][factory.name] = entry
    rates = {k: v["guard_evaluations_per_s"] for k, v in report["candidates"].items()
             if isinstance(v.get("guard_evaluations_per_s"), int)}
    if rates:
        slowest = min(rates.values())
        report["speed_vs_slowest"] = {k: round(v / slowest, 2) for k, v in rates.items()}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
