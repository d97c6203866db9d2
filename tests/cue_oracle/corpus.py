"""The CUE corpus: programs under tests/unit/cue_corpus/<feature>/<case>.cue and their golden files.

Each case is one `.cue` file. Its first line may be `// args: -e EXPR` to export an expression instead of
the whole file. Next to it, exactly one expectation:

- `<case>.json`: the exact stdout of real CUE (`cue export <case>.cue --out json [-e EXPR]`), when it succeeds;
- `<case>.err`: the exact stderr of real CUE, when it fails;
- `<case>.expected.json` (or `<case>.expected.err`) with a one-line `<case>.why`: written by hand where the
  oracle (CUE v0.4.0-beta.1) and current CUE differ and velashard follows current CUE. Regeneration never
  overwrites these.

This module needs no Node.js: the unit tests read the stored files only.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "unit" / "cue_corpus"
ARGS_PREFIX = "// args:"
ERROR_KINDS = ("syntax", "conflict", "incomplete", "undefined", "closed", "other")


@dataclass(frozen=True)
class Case:
    path: Path  # the .cue file

    @property
    def feature(self) -> str:
        return self.path.parent.name

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def id(self) -> str:
        return f"{self.feature}/{self.name}"

    @property
    def filename(self) -> str:
        """The name the program has when real CUE runs it (error positions print it, e.g. ./x.cue:1:4)."""
        return self.path.name

    @property
    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def expression(self) -> str | None:
        """The `-e EXPR` of the case's `// args:` first line, if any."""
        first = self.source.split("\n", 1)[0]
        if not first.startswith(ARGS_PREFIX):
            return None
        words = shlex.split(first[len(ARGS_PREFIX):])
        if len(words) != 2 or words[0] != "-e":
            raise ValueError(f"{self.id}: only `// args: -e EXPR` is supported, got {first!r}")
        return words[1]

    def sibling(self, suffix: str) -> Path:
        return self.path.with_name(self.name + suffix)

    @property
    def golden_json(self) -> Path:
        return self.sibling(".json")

    @property
    def golden_err(self) -> Path:
        return self.sibling(".err")

    @property
    def expected_json(self) -> Path:
        return self.sibling(".expected.json")

    @property
    def expected_err(self) -> Path:
        return self.sibling(".expected.err")

    @property
    def why(self) -> Path:
        return self.sibling(".why")

    @property
    def hand_written(self) -> bool:
        """True when the expectation is written by hand (CUE v0.4 differs from current CUE here)."""
        return self.expected_json.exists() or self.expected_err.exists()

    def expectation(self) -> tuple[str, str]:
        """("json", exact stdout) or ("err", exact stderr), hand-written expectations first."""
        for kind, path in (("json", self.expected_json), ("err", self.expected_err),
                           ("json", self.golden_json), ("err", self.golden_err)):
            if path.exists():
                return kind, path.read_text(encoding="utf-8")
        raise FileNotFoundError(f"{self.id}: no golden file; run `python hack/cue_golden.py`")

    def files(self) -> dict[str, str]:
        return {self.filename: self.source}

    def cue_args(self) -> list[str]:
        """The command line real CUE runs for this case (flags go separately: {"--out": "json"})."""
        expr = self.expression
        return ["export", self.filename] + (["-e", expr] if expr is not None else [])


def load_cases(root: Path = CORPUS) -> list[Case]:
    # Golden and expectation files end in .json/.err, never .cue, so every .cue file is a case.
    return [Case(p) for p in sorted(root.glob("*/*.cue"))]


# First-line patterns of real CUE's stderr, checked in order. Real CUE prints one line per error, each
# `path: message` followed by indented positions; the first error decides the kind. What each kind means:
#   syntax     - the program is rejected before evaluation: the scanner, the parser, or the compiler's
#                static checks (`expected '}', found 'EOF'`, a `let` clashing with a field or never used);
#                no path prefix
#                except for a misplaced `*`;
#   conflict   - unification failed: two values, a value and a bound or validator, or every disjunct;
#   incomplete - a value is not concrete where export needs it (including required fields not present);
#   undefined  - a reference, field, list index or optional field that is not there;
#   closed     - a field not allowed by a closed struct (definition, close(), closed pattern);
#   other      - everything else: bad operand types, division by zero, builtin call failures, cycles.
_KIND_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("syntax", re.compile(r"^(expected |illegal |missing ',' |string literal not terminated|"
                          r"comment not terminated|unknown escape sequence|invalid (escape|character)|"
                          r"unexpected |cannot have both alias and field|unreferenced alias or let clause)"
                          r"|: preference mark not allowed")),
    ("closed", re.compile(r"field \S+ not allowed")),
    ("undefined", re.compile(r"undefined field|reference \".*\" not found|cannot reference optional field|"
                             r"invalid list index \S+ \(out of bounds\)")),
    ("incomplete", re.compile(r"incomplete value|non-concrete value|field is required but not present")),
    # a bound or validator violation is a failed unification too: 11 & <=10 is _|_ just like 1 & 2
    ("conflict", re.compile(r"conflicting values|invalid value .* \((out of bound|does not satisfy) |"
                            r"errors in empty disjunction|incompatible list lengths")),
)


# velashard.cue's error kinds that real CUE's messages do not tell apart
_EVALUATOR_KINDS = {"eval": "other", "limit": "other", "cycle": "other"}


def evaluator_kind(kind: str) -> str:
    """The ERROR_KINDS class of a velashard.cue CueError.kind."""
    return _EVALUATOR_KINDS.get(kind, kind)


def classify_error(stderr: str) -> str:
    """Which kind of error real CUE reported: one of ERROR_KINDS, decided by its first error line."""
    first = next((line for line in stderr.splitlines() if line.strip()), "")
    for kind, pattern in _KIND_PATTERNS:
        if pattern.search(first):
            return kind
    return "other"


@dataclass(frozen=True)
class Golden:
    """What real CUE said for a case, in the form it is stored: ("json", stdout) or ("err", stderr)."""

    kind: str
    text: str


def golden_from_answer(case: Case, answer: dict[str, object]) -> Golden:
    """Turn an oracle answer into the golden file to store; refuse answers that fit neither form."""
    code, stdout, stderr = answer["code"], str(answer["stdout"]), str(answer["stderr"])
    if code == 0 and not stderr:
        return Golden("json", stdout)
    if code != 0 and not stdout:
        return Golden("err", stderr)
    raise ValueError(f"{case.id}: real CUE answered code {code} with stdout {stdout!r} and stderr {stderr!r}")


def stored_golden(case: Case) -> Golden | None:
    """The oracle-produced golden file on disk (never a hand-written expectation), if any."""
    for kind, path in (("json", case.golden_json), ("err", case.golden_err)):
        if path.exists():
            return Golden(kind, path.read_text(encoding="utf-8"))
    return None


def write_golden(case: Case, golden: Golden) -> None:
    keep, drop = ((case.golden_json, case.golden_err) if golden.kind == "json"
                  else (case.golden_err, case.golden_json))
    keep.write_text(golden.text, encoding="utf-8")
    drop.unlink(missing_ok=True)  # a case that changed from success to failure must not keep both
