"""The package map of docs/architecture.md, enforced: who may import the development API server, the layers
inside it, no import cycles, no folder holding too much of the code, no controller module too long to read at
once, the generated file marked as such.

Every `import` and `from ... import` counts, at module level and inside functions alike: an import moved
into a function is still a dependency, so it neither breaks a cycle nor escapes a rule. Importing a
submodule also runs its parent packages' `__init__.py`; those implicit edges are not counted.
"""

from __future__ import annotations

import ast
import pathlib
import re
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "velashard"

# Production code: everything of velashard except these. It never imports velashard.apiserver or velashard.dev.
DEV_ONLY = ("velashard/apiserver/", "velashard/dev/")
DEV_COMMANDS = {"velashard/cli/apiserver.py", "velashard/cli/dev.py"}
# Only `velashard dev` imports velashard.dev.
MAY_IMPORT_DEV = ("velashard/dev/", "velashard/cli/dev.py")
# Inside velashard.apiserver, bottom to top: what each subpackage may import of velashard.apiserver besides
# itself and the package's own modules (errors.py). Anything outside velashard.apiserver is theirs to use.
APISERVER_LAYERS = {
    "storage": set(),
    "admission": {"storage"},
    "registry": {"storage", "admission"},
    "auth": {"storage", "registry"},
    "controllers": {"storage", "admission", "registry"},
    "simulation": {"storage", "registry", "controllers"},
    "http": {"storage", "admission", "registry", "auth", "controllers", "simulation"},
}
MAX_FOLDER_SHARE = 0.25
# The controller's packages hold modules a reader takes in at once: one idea each, split where an idea ends.
SIZED_PACKAGES = ("velashard/core", "velashard/sharding", "velashard/kube", "velashard/webhook",
                  "velashard/workflow")
MAX_MODULE_LINES = 450
GENERATED = PACKAGE / "apiserver" / "http" / "protobuf_fields_generated.py"
GENERATOR = "hack/gen_protobuf_fields.py"


@dataclass(frozen=True)
class Import:
    source: str  # the importing file, relative to the repository
    line: int
    target: str  # the velashard module imported (a submodule where `from package import submodule`)


def _rel(path: pathlib.Path) -> str:
    return path.relative_to(ROOT).as_posix()


def velashard_modules() -> dict[str, pathlib.Path]:
    """Dotted module name -> file, for every module and package of velashard."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


MODULES = velashard_modules()


def _module_of(path: pathlib.Path) -> str | None:
    return next((name for name, p in MODULES.items() if p == path), None)


def _known(name: str) -> str | None:
    """The module `name` is, or the longest prefix of it that is one (`velashard.x.attribute`)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(path: pathlib.Path) -> list[Import]:
    """The velashard modules a file imports, anywhere in it (functions included)."""
    source = _rel(path)
    module = _module_of(path)
    package = module if path.name == "__init__.py" else (module or "").rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _known(alias.name) if alias.name.split(".")[0] == "velashard" else None
                if target:
                    found.append(Import(source, node.lineno, target))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if base.split(".")[0] != "velashard":
                continue
            for alias in node.names:
                target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else _known(base)
                if target:
                    found.append(Import(source, node.lineno, target))
    return found


def _files(*dirs: str) -> list[pathlib.Path]:
    return [p for d in dirs for p in sorted((ROOT / d).rglob("*.py"))]


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _show(imports: list[Import]) -> str:
    return "\n".join(f"{i.source}:{i.line} imports {i.target}" for i in imports)


def test_production_code_never_imports_the_apiserver_or_dev():
    bad = [i for p in _files("velashard", "hack")
           if not _rel(p).startswith(DEV_ONLY) and _rel(p) not in DEV_COMMANDS
           for i in imports_of(p) if _in(i.target, "velashard.apiserver") or _in(i.target, "velashard.dev")]
    assert not bad, "production code imports the development API server:\n" + _show(bad)


def test_nothing_else_of_velashard_imports_cli():
    bad = [i for p in _files("velashard") if not _rel(p).startswith("velashard/cli/")
           for i in imports_of(p) if _in(i.target, "velashard.cli")]
    assert not bad, "velashard/cli/ is the top layer:\n" + _show(bad)


def test_only_velashard_dev_imports_velashard_dev():
    bad = [i for p in _files("velashard", "hack", "tests") if not _rel(p).startswith(MAY_IMPORT_DEV)
           for i in imports_of(p) if _in(i.target, "velashard.dev")]
    assert not bad, "only velashard/dev/ and velashard/cli/dev.py may import velashard.dev:\n" + _show(bad)


def test_only_its_command_imports_the_dashboard():
    bad = [i for p in _files("velashard", "hack") if not _rel(p).startswith("velashard/dashboard/")
           and _rel(p) != "velashard/cli/dashboard.py" for i in imports_of(p) if _in(i.target, "velashard.dashboard")]
    assert not bad, "only velashard/cli/dashboard.py imports velashard.dashboard (dev runs it as a process):\n" + \
        _show(bad)


def test_the_apiserver_never_imports_dev():
    bad = [i for p in _files("velashard/apiserver") for i in imports_of(p) if _in(i.target, "velashard.dev")]
    assert not bad, "velashard.apiserver imports velashard.dev:\n" + _show(bad)


def test_apiserver_subpackages_import_only_their_lower_layers():
    subpackages = {p.name for p in (PACKAGE / "apiserver").iterdir() if (p / "__init__.py").exists()}
    assert subpackages == set(APISERVER_LAYERS), "a new apiserver subpackage needs a place in APISERVER_LAYERS " \
                                                 "and in docs/architecture.md"
    bad = []
    for name, allowed in APISERVER_LAYERS.items():
        for p in _files(f"velashard/apiserver/{name}"):
            for i in imports_of(p):
                parts = i.target.split(".")
                if parts[:2] == ["velashard", "apiserver"] and len(parts) > 2 and parts[2] in APISERVER_LAYERS \
                        and parts[2] != name and parts[2] not in allowed:
                    bad.append(i)
    assert not bad, "an apiserver layer imports one above it (see APISERVER_LAYERS):\n" + _show(bad)


def import_graph() -> dict[str, dict[str, Import]]:
    """module -> {imported module: the first import of it}, between velashard modules."""
    graph: dict[str, dict[str, Import]] = {name: {} for name in MODULES}
    for name, path in MODULES.items():
        for i in imports_of(path):
            if i.target != name:
                graph[name].setdefault(i.target, i)
    return graph


def find_cycles(graph: dict[str, dict[str, Import]]) -> list[list[str]]:
    """One cycle (a list of modules, the first repeated at the end) per strongly connected component of
    more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return [_cycle_in(graph, set(c), c[0]) for c in components]


def _cycle_in(graph: dict[str, dict[str, Import]], component: set[str], start: str) -> list[str]:
    """A shortest path from start back to itself inside its component (breadth first)."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child not in component:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return path[::-1] + [start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"{start} is in a component without a cycle through it")


def test_no_import_cycles():
    graph = import_graph()
    cycles = find_cycles(graph)
    described = ["\n".join(f"  {graph[a][b].source}:{graph[a][b].line}: {a} -> {b}" for a, b in zip(c, c[1:]))
                 for c in cycles]
    assert not cycles, "import cycles between velashard modules:\n" + "\n\n".join(described)


def test_find_cycles_reports_a_cycle():
    def imp(target: str) -> Import:
        return Import("x.py", 1, target)
    graph = {"a": {"b": imp("b")}, "b": {"c": imp("c")}, "c": {"a": imp("a")}, "d": {"a": imp("a")}}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b": imp("b")}, "b": {}}) == []


def test_no_folder_holds_more_than_a_quarter_of_the_code():
    lines = {p: len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    total = sum(lines.values())
    folders: dict[pathlib.Path, int] = {}
    for path, n in lines.items():
        folders[path.parent] = folders.get(path.parent, 0) + n
    too_big = {_rel(folder): f"{n} of {total} lines" for folder, n in folders.items() if n > MAX_FOLDER_SHARE * total}
    assert not too_big, f"folders holding more than {MAX_FOLDER_SHARE:.0%} of velashard's lines: {too_big}"


def test_no_module_of_the_controller_packages_is_over_the_size_limit():
    lines = {_rel(p): len(p.read_text().splitlines()) for p in _files(*SIZED_PACKAGES)}
    too_long = {path: n for path, n in lines.items() if n > MAX_MODULE_LINES}
    assert lines, f"no modules found under {SIZED_PACKAGES}"
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines (split them where an idea ends): {too_long}"


def test_the_generated_protobuf_table_says_so_on_its_first_line():
    first = GENERATED.read_text().splitlines()[0]
    assert first.startswith("# Code generated by ") and GENERATOR in first and "DO NOT EDIT" in first, first
    assert _rel(GENERATED) in (ROOT / GENERATOR).read_text(), f"{GENERATOR} should name the file it writes"


# The package map of docs/architecture.md: what each production package may import of velashard besides itself
# (the top-level modules observability.py, durations.py and httpdate.py are below everything; cli/ may import all;
# velashard/__init__.py, which holds the version, is not counted).
PACKAGE_IMPORTS = {
    "apis": {"kube.resources"},
    "kube": {"observability"},
    "cue": set(),
    "patch": {"cue"},
    "workflow": {"cue", "kube", "apis", "patch", "observability", "durations"},
    "sharding": {"apis", "kube", "observability"},
    "core": {"apis", "kube", "cue", "patch", "sharding", "workflow", "observability", "durations"},
    "webhook": {"apis", "kube", "core", "sharding", "workflow", "observability", "httpdate"},
    "dashboard": {"apis", "kube", "core", "sharding", "workflow", "observability"},
}


def test_packages_import_only_what_the_package_map_allows():
    bad = []
    for package, allowed in PACKAGE_IMPORTS.items():
        for p in _files(f"velashard/{package}"):
            for i in imports_of(p):
                target = i.target.split(".")[1:]
                if not target or target[0] == package:
                    continue
                if not any(".".join(target[:len(a.split("."))]) == a for a in allowed):
                    bad.append(i)
    assert not bad, "an import the package map of docs/architecture.md does not allow:\n" + _show(bad)


def test_the_package_map_is_layered():
    """No two packages may import each other, so the map is an order of floors: kube/ is the lowest (apis/ lists
    its keys above it), and a kube -> apis import fails the test above however it is written."""
    def packages(allowed: set[str]) -> set[str]:
        return {a.split(".")[0] for a in allowed}
    both = sorted((a, b) for a in PACKAGE_IMPORTS for b in packages(PACKAGE_IMPORTS[a])
                  if a < b and a in packages(PACKAGE_IMPORTS.get(b, set())))
    assert not both, f"packages the map lets import each other: {both}"
    assert "apis" not in packages(PACKAGE_IMPORTS["kube"]), "kube/ is below apis/"


DOC = ROOT / "docs" / "architecture.md"
# Backticked paths in the doc: a module (`core/reconciler.py`), a folder (`dev/`), a glob (`definitions/*.cue`);
# not placeholders such as `DIR/logs/`.
_PATH = re.compile(r"`((?:[a-z_][\w.*-]*/)*[\w.*-]+(?:\.py|\.cue|/))`")
_ROW_PACKAGE = re.compile(r"\|\s*`((?:[\w-]+/)+)`\s*\|")
_FROM_ROOT = ("hack", "tests", "docs", "velashard", "helm", "addons")


def doc_paths(text: str) -> list[tuple[int, str, list[pathlib.Path]]]:
    """(line, path as written, where it may point) for every file or folder docs/architecture.md names. A path is
    relative to velashard/ (the repository's root for hack/, tests/, velashard/ ...); in a package's row of the
    table (`| `apiserver/registry/` | ...`) also to that package and the packages above it (`storage/` there is
    apiserver/storage/), and a bare module name there is in that package or below it (`calls.py` in providers/)."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        row = _ROW_PACKAGE.match(line)
        for written in _PATH.findall(line):
            if written.split("/")[0] in _FROM_ROOT:
                found.append((number, written, [ROOT / written]))
            elif row and "/" not in written:
                found.append((number, written, [PACKAGE / row.group(1) / "**" / written]))
            else:
                bases = [PACKAGE / row.group(1)] + list((PACKAGE / row.group(1)).parents) if row else [PACKAGE]
                found.append((number, written, [base / written for base in bases
                                                if base == PACKAGE or PACKAGE in base.parents]))
    return found


def _exists(path: pathlib.Path) -> bool:
    relative = path.relative_to(ROOT).as_posix()
    return any(ROOT.glob(relative)) if "*" in relative else path.exists()


def test_every_module_the_architecture_doc_names_exists():
    paths = doc_paths(DOC.read_text())
    assert len(paths) > 100, "docs/architecture.md names its modules in backticks"
    missing = [f"docs/architecture.md:{n}: `{written}` (looked for {', '.join(_rel(p) for p in places)})"
               for n, written, places in paths if not any(_exists(p) for p in places)]
    assert not missing, "docs/architecture.md names what does not exist:\n" + "\n".join(missing)


def test_doc_paths_resolves_a_path_in_its_packages_row():
    text = ("| `apiserver/auth/` | `rbac.py`, `gone.py`, `storage/`, `kube/gone.py` | `apis/labels.py` |\n"
            "`core/reconciler.py`, `hack/gone.py`, `DIR/logs/`")
    found = {written: any(_exists(p) for p in places) for _, written, places in doc_paths(text)}
    assert found == {"apiserver/auth/": True, "rbac.py": True, "gone.py": False, "storage/": True,
                     "kube/gone.py": False, "apis/labels.py": True, "core/reconciler.py": True, "hack/gone.py": False}
