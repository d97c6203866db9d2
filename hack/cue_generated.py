"""Generated CUE programs through real CUE and through velashard's evaluator, at scale, printing one JSON object:
{examples, agree, disagree, disagree_by_reason, first_disagreements}.

    python hack/cue_generated.py --examples 2000 [--seed 1] [--keep 5]

The same generator and comparison as tests/integration/test_cue_generated.py (the same JSON byte for byte, or
an error of the same kind), but without stopping or shrinking at the first difference. Needs
`npm ci --prefix tests/cue_oracle`. Exit status 1 when any program disagrees.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.cue_oracle.generate import compare, report, sample_programs  # noqa: E402
from tests.cue_oracle.oracle import Oracle, available, unavailable_reason  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=2000, help="how many programs (default 2000)")
    parser.add_argument("--seed", type=int, default=None, help="hypothesis seed, for a repeatable run")
    parser.add_argument("--keep", type=int, default=5, help="how many disagreements to print (default 5)")
    args = parser.parse_args(argv)
    if not available():
        print(json.dumps({"error": f"real CUE is not available: {unavailable_reason()}"}))
        return 2
    try:
        from velashard.cue import CueError, export_files
    except ImportError as e:
        print(json.dumps({"error": f"velashard.cue is not importable: {e}"}))
        return 2
    started = time.monotonic()
    programs = sample_programs(args.examples, args.seed)
    with Oracle() as oracle:
        results = [compare(oracle.run, export_files, CueError, p) for p in programs]
    out = json.loads(report(len(results), results, args.keep))
    out["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(out, indent=2, ensure_ascii=False))
    return 1 if out["disagree"] else 0


if __name__ == "__main__":
    sys.exit(main())
