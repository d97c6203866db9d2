"""Field labels as a vertex's arcs hold them: an `int` for a list element, a `str` for a field (`a`, a definition
`#a`, a hidden `_a`), and a `Quoted` for a quoted label whose text starts like a definition or a hidden field
(`"#a"`, `"_a"`): a regular field all the same, never the same field as `#a` or `_a`."""

from __future__ import annotations

from typing import Any


class Quoted(str):
    """A quoted label that reads like a definition or a hidden one. Its text is the label's (`str(q)`, f-strings
    and JSON give `#a`); it equals only a Quoted of the same text, so `"#a"` and `#a` are two arcs. Only these
    rare labels are of this type: a plain `str` label keeps the dictionaries' fast path."""
    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is Quoted and str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not (type(other) is Quoted and str.__eq__(self, other))

    # the text's own hash, computed in C: a plain "#a" beside a Quoted("#a") in one dict costs a comparison more
    __hash__ = str.__hash__

    def __repr__(self) -> str:
        return f"Quoted({str.__repr__(self)})"


def key_of(name: str) -> str:
    """The arc key of a quoted or dynamic label, or of a data key: a Quoted where the text reads like a definition
    or a hidden field, else the text itself (the empty label is a Quoted too: one field however it is written)."""
    return Quoted(name) if name[:1] in "#_" else name


def is_regular(key: Any) -> bool:
    """A field of exported data: not a definition (#x), not hidden (_x); a quoted label always is one."""
    c = key[:1]
    return (c != "#" and c != "_") or type(key) is Quoted


def label_text(key: Any) -> str:
    """A label as text, as users write it in a path: `a`, `#a`, `_a`, `"#a"` all without quotes, `0` for an index."""
    return key if type(key) is str else str(key)
