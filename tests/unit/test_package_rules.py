"""Rules about the package as a whole: the development API server stays out of production code, and every
third-party package the code imports is declared."""

from __future__ import annotations

import ast
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAY_IMPORT_DEV_SERVER = {"velashard/cli/apiserver.py", "velashard/cli/dev.py"}
# import name -> distribution name as setup.py declares it, where they differ
DISTRIBUTIONS = {"yaml": "PyYAML", "jinja2": "Jinja2", "flask": "Flask", "helm_python": "helm-python-sdk"}


def imported_modules(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def sources(*dirs: str) -> list[pathlib.Path]:
    return [p for d in dirs for p in sorted((ROOT / d).rglob("*.py"))]


def test_nothing_outside_the_dev_commands_imports_the_apiserver():
    offenders = [str(p.relative_to(ROOT)) for p in sources("velashard", "hack")
                 if not str(p.relative_to(ROOT)).startswith(("velashard/apiserver/", "velashard/dev/"))
                 and str(p.relative_to(ROOT)) not in MAY_IMPORT_DEV_SERVER
                 and any(m.split(".")[:2] in (["velashard", "apiserver"], ["velashard", "dev"])
                         for m in imported_modules(p))]
    assert offenders == []


def test_every_third_party_import_is_declared():
    declared = {re.split(r"[<>=\[ ]", req)[0].lower()
                for req in re.findall(r'"([A-Za-z0-9_.\-]+[^"]*)"', (ROOT / "setup.py").read_text())}
    top = {m.split(".")[0] for p in sources("velashard") for m in imported_modules(p)}
    third_party = top - set(sys.stdlib_module_names) - {"velashard", "__future__"}
    missing = sorted(m for m in third_party if DISTRIBUTIONS.get(m, m).lower().replace("_", "-")
                     not in {d.replace("_", "-") for d in declared})
    assert missing == []
