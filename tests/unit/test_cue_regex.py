"""CUE's regular expressions are RE2 (linear time: no pattern backtracks), with Go's ReplaceAll, and an
evaluation has a wall-clock budget that no builtin escapes. The RE2 syntax itself is held to real CUE by the
corpus (tests/unit/cue_corpus/pkg_regexp/re2_*)."""

from __future__ import annotations

import time

import pytest

from velashard.cue.api import compile_sources
from velashard.cue.errors import CueError
from velashard.cue.limits import Limits


def value(text: str, path: str = "x"):
    return compile_sources({"a.cue": text}).evaluate().export(path)


@pytest.mark.parametrize("n", [30, 5000])
def test_a_pathological_pattern_takes_linear_time(n):
    program = compile_sources({"a.cue": f'x: "{"a" * n}!" =~ "^(a+)+$"\ny: "{"a" * n}!" !~ "^(a|aa)+$"\n'})
    best = min(_timed(lambda: program.evaluate().export()) for _ in range(5))  # best of 5: a busy machine
    assert best < 0.010, best  # Python's re took ~17 s at n=30, doubling with each character
    assert program.evaluate().export() == {"x": False, "y": True}


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def test_replace_all_follows_go():
    assert value('import "regexp"\nx: regexp.ReplaceAll("a*", "baaab", "<$0>")') == "<>b<aaa>b<>"
    assert value('import "regexp"\nx: regexp.ReplaceAll("(?P<w>\\\\w+)@(\\\\w+)", "me@home", '
                 '"${2}:$w:$$:${missing}:$9:$1x")') == "home:me:$:::"
    assert value('import "regexp"\nx: regexp.ReplaceAllLiteral("o", "foo", "$1")') == "f$1$1"


def test_a_pattern_re2_does_not_have_is_an_error_that_says_so():
    with pytest.raises(CueError, match="invalid regular expression"):
        value('x: "ab" =~ "a(?=b)"')


def test_an_evaluation_stops_at_its_wall_clock_budget(monkeypatch):
    monkeypatch.setattr(Limits, "seconds", 0.05)
    program = compile_sources({"a.cue": 'import "list"\nx: [for i in list.Range(0, 90000, 1) {i * 2}]\n'})
    with pytest.raises(CueError, match="longer than 0.05 s"):
        program.evaluate().export("x")
