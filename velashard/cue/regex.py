"""CUE's regular expressions: RE2 syntax and semantics, as the CUE specification says, run by RE2 itself
(google-re2), whose matching takes time linear in the text: no pattern can make an evaluation backtrack for
ever. Also Go's regexp behaviour where it differs from Python's: the successive matches of FindAll and
ReplaceAll (no empty match right after the previous match) and ReplaceAll's `$1`/`${name}` templates."""

from __future__ import annotations

from typing import Any, Iterator

import re2

from velashard.cue.errors import CueError

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a bad pattern is the author's error, reported as such; not a line on stderr
_CACHE: dict[str, Any] = {}
_CACHE_SIZE = 4096


def compile_regex(pattern: Any) -> Any:
    """The compiled pattern (str or bytes); CueError when it is not RE2 syntax."""
    if type(pattern) is bytes:
        pattern = pattern.decode("utf-8", "replace")
    rx = _CACHE.get(pattern)
    if rx is None:
        try:
            rx = re2.compile(pattern, _OPTIONS)
        except re2.error as err:
            reason = err.args[0] if err.args else err
            if isinstance(reason, bytes):
                reason = reason.decode("utf-8", "replace")
            raise CueError(f"invalid regular expression {pattern!r}: {reason}", "eval") from None
        if len(_CACHE) < _CACHE_SIZE:
            _CACHE[pattern] = rx
    return rx


def matches(rx: Any, text: str) -> Iterator[Any]:
    """Successive non-overlapping matches as Go's regexp finds them: an empty match right where the previous
    match ended is skipped."""
    pos, previous_end = 0, -1
    while pos <= len(text):
        m = rx.search(text, pos)
        if m is None:
            return
        start, end = m.span()
        if end == start:
            accept = start != previous_end
            pos = end + 1
        else:
            accept = True
            pos = end
        previous_end = end
        if accept:
            yield m


def _name_at(template: str, i: int) -> tuple[str, int]:
    """The group name after a `$` at i-1 (`name` or `{name}`), and where the text goes on; ("", i) if none."""
    if i < len(template) and template[i] == "{":
        close = template.find("}", i)
        name = template[i + 1:close] if close > 0 else ""
        if name and all(c.isalnum() or c == "_" for c in name):
            return name, close + 1
        return "", i
    j = i
    while j < len(template) and (template[j].isalnum() or template[j] == "_"):
        j += 1
    return template[i:j], j


def expand(m: Any, template: str) -> str:
    """Go's Regexp.Expand: `$1`, `$name`, `${name}` become the group's text ("" when there is no such group),
    `$$` a dollar."""
    out, i = [], 0
    while i < len(template):
        c = template[i]
        if c != "$" or i + 1 == len(template):
            out.append(c)
            i += 1
            continue
        if template[i + 1] == "$":
            out.append("$")
            i += 2
            continue
        name, after = _name_at(template, i + 1)
        if not name:
            out.append("$")
            i += 1
            continue
        try:
            group = m.group(int(name)) if name.isdigit() else m.group(name)
        except (IndexError, KeyError, re2.error):
            group = None
        out.append(group or "")
        i = after
    return "".join(out)


def replace_all(rx: Any, text: str, replace: Any) -> str:
    """Every match replaced by `replace(match)`, Go's way."""
    out, last = [], 0
    for m in matches(rx, text):
        out.append(text[last:m.start()])
        out.append(replace(m))
        last = m.end()
    out.append(text[last:])
    return "".join(out)
