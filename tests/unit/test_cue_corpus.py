"""The CUE corpus (tests/unit/cue_corpus/) through velashard's evaluator: for every program, exactly what real
CUE printed (stored as golden files by `python hack/cue_golden.py`), or an error of the same kind.

Node-free and fast: the goldens are files. tests/integration/test_cue_oracle.py checks them against real CUE.
"""

from __future__ import annotations

import pytest

from tests.cue_oracle.corpus import ERROR_KINDS, Case, classify_error, evaluator_kind, load_cases

CASES = load_cases()
EXPECTATION_SUFFIXES = (".json", ".err", ".expected.json", ".expected.err", ".why")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_corpus_case(case: Case) -> None:
    # imported here so that the corpus checks below run (and collection works) without the evaluator
    from velashard.cue import CueError, export_files

    kind, expected = case.expectation()
    if kind == "json":
        got = export_files(case.files(), case.expression, "json")
        assert got == expected, f"{case.id}: output differs from real CUE's\n{case.source}"
        return
    want = classify_error(expected)
    try:
        got = export_files(case.files(), case.expression, "json")
    except CueError as e:
        assert evaluator_kind(e.kind) == want, f"{case.id}: error kind {e.kind!r} ({e}), real CUE: {want!r}\n{expected}"
        return
    pytest.fail(f"{case.id}: real CUE fails ({want}: {expected.splitlines()[0]}) but ours printed\n{got}")


def test_corpus_has_one_expectation_per_case() -> None:
    problems = []
    for case in CASES:
        present = [s for s in EXPECTATION_SUFFIXES[:4] if case.sibling(s).exists()]
        if len(present) != 1:
            problems.append(f"{case.id}: expectations {present}")
        if case.hand_written and not (case.why.exists() and case.why.read_text().strip()):
            problems.append(f"{case.id}: hand-written expectation without a one-line .why")
        if case.why.exists() and not case.hand_written:
            problems.append(f"{case.id}: .why without a hand-written expectation")
        case.expression  # noqa: B018 - raises on a malformed `// args:` line
    assert problems == []


def test_corpus_has_no_orphan_files() -> None:
    stems = {c.path.with_suffix("") for c in CASES}
    orphans = []
    for path in sorted(CASES[0].path.parents[1].glob("*/*")):
        if path.suffix == ".cue":
            continue
        name = path.name
        suffix = next((s for s in sorted(EXPECTATION_SUFFIXES, key=len, reverse=True) if name.endswith(s)), None)
        if suffix is None or path.with_name(name[: -len(suffix)]) not in stems:
            orphans.append(str(path))
    assert orphans == []


def test_corpus_size_and_coverage() -> None:
    assert len(CASES) >= 200
    features = {c.feature for c in CASES}
    for feature in ("basic_types", "bounds", "sized_numbers", "strings", "bytes_values", "structs", "optional_fields",
                    "patterns", "hidden_and_let", "embeddings", "labels", "disjunctions", "default_elimination",
                    "references", "comprehensions", "interpolation", "arithmetic", "comparison_logic",
                    "bottom_tests", "selectors_indexing", "lists", "builtins", "pkg_strings", "pkg_strconv",
                    "pkg_list", "pkg_math", "pkg_struct", "pkg_regexp", "pkg_json", "pkg_yaml", "pkg_base64",
                    "pkg_path", "pkg_time", "export_expression", "syntax_errors", "kubevela", "required_fields"):
        assert feature in features, feature
    kinds = {classify_error(c.expectation()[1]) for c in CASES if c.expectation()[0] == "err"}
    assert kinds == set(ERROR_KINDS)  # every error class is exercised


@pytest.mark.parametrize("stderr, kind", [
    ("expected '}', found 'EOF':\n    ./a.cue:1:5\n", "syntax"),
    ("string literal not terminated:\n    ./a.cue:1:4\n", "syntax"),
    ("unreferenced alias or let clause L:\n    ./a.cue:2:1\n", "syntax"),
    ("a: preference mark not allowed at this position:\n    ./a.cue:1:7\n", "syntax"),
    ("output.spec.replicas: conflicting values 2 and \"x\" (mismatched types int and string):\n", "conflict"),
    ("x: invalid value 11 (out of bound <=10):\n", "conflict"),
    ("p: 3 errors in empty disjunction:\np: conflicting values \"a\" and \"z\":\n", "conflict"),
    ("u: invalid value [1,1] (does not satisfy list.UniqueItems):\n", "conflict"),
    ("image: incomplete value string\n", "incomplete"),
    ("y: non-concrete value int in operand to +:\n", "incomplete"),
    ("out.name: field is required but not present:\n", "incomplete"),
    ("x: undefined field b:\n", "undefined"),
    ("x: reference \"y\" not found:\n", "undefined"),
    ("v: cannot reference optional field opt:\n", "undefined"),
    ("x: invalid list index 5 (out of bounds):\n", "undefined"),
    ("x: field b not allowed:\n    ./a.cue:1:5\n", "closed"),
    ("x: failed arithmetic: division by zero:\n", "other"),
    ("a.b: structural cycle\n", "other"),
    ("error in call to encoding/base64.Decode: illegal base64 data at input byte 3:\n", "other"),
    ("\n", "other"),
])
def test_classify_error(stderr: str, kind: str) -> None:
    assert classify_error(stderr) == kind
