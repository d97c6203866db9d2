"""Run one benchmark script side by side in two source trees (e.g. this checkout and a worktree of an earlier
commit), alternating rounds so that both see the same machine, and print one JSON object with each tree's
figures and the ratio of one metric (this tree over the baseline).

    git worktree add /tmp/baseline <commit>
    python hack/bench_compare_trees.py --baseline /tmp/baseline --metric apps_converged_per_second \\
        -- hack/bench_app_controller.py --apps 1000 --traits

The script must exist in both trees and print one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(tree: str, script: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=tree)
    out = subprocess.run([sys.executable, *script], cwd=tree, env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout[out.stdout.index("{"):])


def metric(result: dict, path: str) -> float:
    """The figure at `path`: a key, or keys joined by dots for a nested one (restart.cpu_seconds_per_app.shard)."""
    value: object = result
    for key in path.split("."):
        assert isinstance(value, dict), f"{path}: no {key!r} in {value!r}"
        value = value[key]
    return float(value)  # type: ignore[arg-type]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="the other source tree (a git worktree)")
    parser.add_argument("--metric", required=True, help="the JSON key to compare (dotted for a nested one)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds per tree")
    parser.add_argument("script", nargs=argparse.REMAINDER, help="-- SCRIPT [ARGS...] (a path inside each tree)")
    args = parser.parse_args()
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    if not script:
        parser.error("give the benchmark script after --")
    figures: dict[str, list[float]] = {"baseline": [], "this": []}
    runs: dict[str, list[dict]] = {"baseline": [], "this": []}
    for i in range(args.rounds):
        order = (("baseline", args.baseline), ("this", HERE)) if i % 2 == 0 else (("this", HERE),
                                                                                  ("baseline", args.baseline))
        for name, tree in order:
            result = run(os.path.abspath(tree), script)
            runs[name].append(result)
            figures[name].append(float(metric(result, args.metric)))
    baseline, this = statistics.median(figures["baseline"]), statistics.median(figures["this"])
    print(json.dumps({"metric": args.metric, "script": " ".join(script), "rounds": args.rounds,
                      "baseline_tree": os.path.abspath(args.baseline), "baseline": figures["baseline"],
                      "this": figures["this"], "ratio_this_over_baseline": round(this / baseline, 3) if baseline
                      else None, "runs": runs}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
