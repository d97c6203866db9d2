"""Generated CUE programs (tests/cue_oracle/generate.py) through real CUE and through velashard's evaluator:
the same JSON byte for byte, or an error of the same kind.

$CUE_GEN_EXAMPLES sets how many programs (default 150, well under a minute); for a run at scale that counts
agreements instead of stopping at the first difference: `python hack/cue_generated.py --examples 2000`.
Needs Node.js and `npm ci --prefix tests/cue_oracle`; skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings

from tests.cue_oracle.corpus import classify_error
from tests.cue_oracle.generate import compare, programs, sample_programs
from tests.cue_oracle.oracle import Oracle, available, unavailable_reason

if os.environ.get("CI") and not available():  # CI installs the oracle: there a missing one is a failure
    raise RuntimeError(f"real CUE is required in CI: {unavailable_reason()}")
pytestmark = pytest.mark.skipif(not available(), reason=unavailable_reason() if not available() else "")

EXAMPLES = int(os.environ.get("CUE_GEN_EXAMPLES", "150"))


@pytest.fixture(scope="module")
def oracle() -> Iterator[Oracle]:
    with Oracle() as o:
        yield o


@pytest.fixture(scope="module")
def evaluator() -> tuple[Any, type[BaseException]]:
    # imported here, not at module level, so that collection and the oracle-only test work without it
    from velashard.cue import CueError, export_files
    return export_files, CueError


# derandomized: the same programs on every run, so CI is deterministic (hack/cue_generated.py explores new ones)
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program=programs())
def test_generated_programs_agree_with_real_cue(oracle: Oracle, evaluator: tuple[Any, type[BaseException]],
                                                program: str) -> None:
    export_files, cue_error = evaluator
    result = compare(oracle.run, export_files, cue_error, program)
    assert result.agree, json.dumps(result.summary(), indent=2, ensure_ascii=False)


def test_generator_makes_programs_real_cue_mostly_evaluates(oracle: Oracle) -> None:
    """The generator, checked by the oracle alone: most programs evaluate, the rest fail in more than one
    error class, and none is malformed except for the occasional deliberate unused `let`."""
    outcomes: Counter[str] = Counter()
    for program in sample_programs(120, seed=22):
        real = oracle.export({"gen.cue": program})
        kind = "ok" if real["code"] == 0 else classify_error(real["stderr"])
        outcomes[kind] += 1
        if kind == "syntax":
            assert "unreferenced alias or let clause" in real["stderr"], (program, real["stderr"])
    assert outcomes["ok"] >= 0.6 * sum(outcomes.values()), outcomes
    # about one program in six carries an injected error; which kinds show up depends on the draw
    assert len(set(outcomes) - {"ok", "syntax"}) >= 2, outcomes
