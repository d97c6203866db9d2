"""Every third-party package the code imports is declared, and every CUE file it reads ships in the wheel (who
imports what of velashard itself: test_architecture.py)."""

from __future__ import annotations

import ast
import glob
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
# import name -> distribution name as setup.py declares it, where they differ
DISTRIBUTIONS = {"yaml": "PyYAML", "flask": "Flask", "helm_python": "helm-python-sdk",
                 "re2": "google-re2"}


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


def test_every_third_party_import_is_declared():
    declared = {re.split(r"[<>=\[ ]", req)[0].lower()
                for req in re.findall(r'"([A-Za-z0-9_.\-]+[^"]*)"', (ROOT / "setup.py").read_text())}
    top = {m.split(".")[0] for p in sources("velashard") for m in imported_modules(p)}
    third_party = top - set(sys.stdlib_module_names) - {"velashard", "__future__"}
    missing = sorted(m for m in third_party if DISTRIBUTIONS.get(m, m).lower().replace("_", "-")
                     not in {d.replace("_", "-") for d in declared})
    assert missing == []


def _package_data() -> list[str]:
    """setup.py's package_data patterns for the velashard package."""
    for node in ast.walk(ast.parse((ROOT / "setup.py").read_text())):
        if isinstance(node, ast.keyword) and node.arg == "package_data":
            return ast.literal_eval(node.value)["velashard"]
    raise AssertionError("setup.py has no package_data")


def test_every_cue_file_is_package_data():
    """The built-in definitions, the providers' schemas and the engine's own step templates are read at run time:
    a `pip install .` (the image's wheel) without them would fail at the first step."""
    shipped = {f for pattern in _package_data() for f in glob.glob(pattern, root_dir=ROOT / "velashard", recursive=True)}
    cue = {p.relative_to(ROOT / "velashard").as_posix() for p in (ROOT / "velashard").rglob("*.cue")}
    assert {"workflow/providers/op.cue", "workflow/steps/suspend.cue"} <= cue
    assert sorted(cue - shipped) == []
