"""`velashard cue export|eval|vet`: the cue command line tool's everyday commands, on velashard's own
CUE evaluator (same JSON for the same input; errors on stderr with exit 1, usage errors exit 2)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from decimal import Decimal
from typing import Any

import yaml

from velashard.cli.usage import UsageError
from velashard.cue import CueError, compile_sources
from velashard.cue.encode import go_json, go_yaml
from velashard.cue.pretty import format_value


INTERMIXED = True  # files and flags in any order, as the cue tool takes them


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("command", choices=("export", "eval", "vet"),
                        help="export: concrete JSON or YAML; eval: the evaluated value in CUE syntax; "
                             "vet: check data files against the CUE files")
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help=".cue files (one package), and .json/.yaml data files unified with them")
    parser.add_argument("-e", "--expression", action="append", default=[],
                        help="export or print this expression instead of the whole value (repeatable)")
    parser.add_argument("--out", default=None, choices=("json", "yaml", "cue"), help="output format")
    parser.add_argument("-l", "--path", action="append", default=[],
                        help="place data files at this path (e.g. -l parameter), as cue's -l does")
    parser.add_argument("-c", "--concrete", action="store_true", help="vet: require concrete values")


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as err:
        raise CueError(f"cannot read {path}: {err.strerror or err}", "eval") from None
    except UnicodeDecodeError:
        raise CueError(f"{path}: not UTF-8 text", "eval") from None


def _data_documents(path: str, text: str) -> list[Any]:
    try:
        if path.endswith(".json"):
            return [json.loads(text, parse_float=Decimal)]
        return [d for d in yaml.load_all(text, Loader=_loader())]  # noqa: S506 - SafeLoader subclass
    except (ValueError, yaml.YAMLError) as err:
        raise CueError(f"{path}: invalid {'JSON' if path.endswith('.json') else 'YAML'}: "
                       f"{str(err).splitlines()[0]}", "syntax") from None


def _loader() -> Any:
    from velashard.cue.builtins import _yaml_loader
    return _yaml_loader()


def _place(doc: Any, path: list[str]) -> Any:
    for label in reversed(path):
        doc = {label: doc}
    return doc


def run(args: argparse.Namespace) -> int:
    cue_files = [f for f in args.files if f.endswith(".cue") or f == "-"]
    data_files = [f for f in args.files if f not in cue_files]
    for f in data_files:
        if not f.endswith((".json", ".yaml", ".yml")):
            raise UsageError(f"{f}: unknown file type (want .cue, .json, .yaml or .yml)")
    placement = [p for spec in args.path for p in spec.split(".") if p]
    try:
        sources = {}
        for f in cue_files:
            sources[f if f == "-" else _display(f)] = sys.stdin.read() if f == "-" else _read(f)
        docs = [(f, d) for f in data_files for d in _data_documents(f, _read(f))]
        program = compile_sources(sources)
        if args.command == "vet" and docs:
            for f, doc in docs:
                instance = program.evaluate(_place(doc, placement))
                instance.export(None) if args.concrete else _check(instance)
            return 0
        instance = program.evaluate(_merge([_place(d, placement) for _, d in docs]))
        if args.command == "vet":
            _check(instance, args.concrete)
            return 0
        expressions = args.expression or [None]
        out = args.out or ("cue" if args.command == "eval" else "json")
        for expr in expressions:
            if args.command == "eval":
                sys.stdout.write(format_value(instance.lookup(expr)))
                continue
            data = instance.export(expr)
            sys.stdout.write(go_yaml(data) if out == "yaml" else go_json(data))
        return 0
    except CueError as err:
        print(err.render(), file=sys.stderr)
        return 1


def _display(path: str) -> str:
    return path if os.path.isabs(path) or path.startswith(".") else "./" + path


def _check(instance: Any, concrete: bool = False) -> None:
    if concrete:
        instance.export(None)
        return
    from velashard.cue.export_rules import first_error
    err = instance._run(lambda: first_error(instance.root))
    if err is not None:
        raise err


def _merge(docs: list[Any]) -> dict | None:
    if not docs:
        return None
    merged: dict = {}
    for d in docs:
        if not isinstance(d, dict):
            raise CueError("a data file that is not a mapping needs -l to place it", "eval")
        merged = _merge_two(merged, d)
    return merged


def _merge_two(a: Any, b: Any) -> Any:
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = _merge_two(out[k], v) if k in out else v
        return out
    if a != b:
        raise CueError(f"conflicting values {json.dumps(a, default=str)} and {json.dumps(b, default=str)}",
                       "conflict")
    return a
