"""Text encodings of plain data byte for byte as the `cue` tool writes them: Go's encoding/json (HTML-safe
escapes, `json.Indent` layout) and yaml.v3 with an indent of two (CUE's internal/encoding/yaml)."""

from __future__ import annotations

import base64
import re
from decimal import Decimal
from typing import Any

_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                 "\u2028": "\\u2028", "\u2029": "\\u2029"}
_HTML = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"}
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f\u2028\u2029<>&]')
_NEEDS_ESCAPE_NO_HTML = re.compile(r'["\\\x00-\x1f\u2028\u2029]')


def json_string(s: str, escape_html: bool = True) -> str:
    rx = _NEEDS_ESCAPE if escape_html else _NEEDS_ESCAPE_NO_HTML
    if not rx.search(s):
        return '"' + s + '"'

    def repl(m: re.Match) -> str:
        c = m.group(0)
        e = _JSON_ESCAPES.get(c) or _HTML.get(c)
        return e if e is not None else f"\\u{ord(c):04x}"
    return '"' + rx.sub(repl, s) + '"'


def number_text(v: Any) -> str:
    if type(v) is int:
        return str(v)
    return str(v)


def go_json(data: Any, indent: str | None = "    ", prefix: str = "", escape_html: bool = True,
            trailing_newline: bool = True) -> str:
    out: list[str] = []
    _json(data, out, indent, "\n" + prefix if indent is not None else "", escape_html)
    text = "".join(out)
    return text + "\n" if trailing_newline else text


def _json(v: Any, out: list, indent: str | None, nl: str, esc: bool) -> None:
    t = type(v)
    if t is dict:
        if not v:
            out.append("{}")
            return
        if indent is None:
            out.append("{")
            first = True
            for k, x in v.items():
                if not first:
                    out.append(",")
                first = False
                out.append(json_string(k, esc))
                out.append(":")
                _json(x, out, None, "", esc)
            out.append("}")
            return
        inner = nl + indent
        out.append("{")
        first = True
        for k, x in v.items():
            out.append(inner if first else "," + inner)
            first = False
            out.append(json_string(k, esc))
            out.append(": ")
            _json(x, out, indent, inner, esc)
        out.append(nl + "}")
        return
    if t is list:
        if not v:
            out.append("[]")
            return
        if indent is None:
            out.append("[")
            for i, x in enumerate(v):
                if i:
                    out.append(",")
                _json(x, out, None, "", esc)
            out.append("]")
            return
        inner = nl + indent
        out.append("[")
        for i, x in enumerate(v):
            out.append(inner if i == 0 else "," + inner)
            _json(x, out, indent, inner, esc)
        out.append(nl + "]")
        return
    if t is str:
        out.append(json_string(v, esc))
    elif t is bool:
        out.append("true" if v else "false")
    elif t is int or t is Decimal:
        out.append(number_text(v))
    elif v is None:
        out.append("null")
    elif t is bytes:
        out.append('"' + base64.b64encode(v).decode() + '"')
    else:
        raise TypeError(f"cannot encode {t.__name__} as JSON")


# ---- YAML (yaml.v3 style, indent 2) ---------------------------------------------------------------
# Plain scalars that YAML 1.2's core schema reads as something other than a string.
_YAML_NOT_STRING = re.compile(
    r"^(?:~|null|Null|NULL|true|True|TRUE|false|False|FALSE"
    r"|[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
    r"|0o[0-7]+|0x[0-9a-fA-F]+)$")
_INDICATORS = set("-?:,[]{}#&*!|>'\"%@`")


def _plain_ok(s: str) -> bool:
    if s != s.strip(" ") or s[0] in _INDICATORS and not (s[0] in "-?:" and len(s) > 1 and s[1] != " "):
        return False
    if ": " in s or " #" in s or s.endswith(":") or "\t" in s:
        return False
    return all(c.isprintable() for c in s)


def _yaml_scalar_string(s: str) -> str:
    if s == "":
        return '""'
    if _YAML_NOT_STRING.match(s):
        return '"' + s + '"'
    if _plain_ok(s):
        return s
    if all(c.isprintable() for c in s):
        return "'" + s.replace("'", "''") + "'"
    return _double_quoted(s)


def _double_quoted(s: str) -> str:
    out = ['"']
    for c in s:
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c == "\r":
            out.append("\\r")
        elif not c.isprintable():
            out.append(f"\\x{ord(c):02X}" if ord(c) < 0x100 else f"\\u{ord(c):04X}")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def go_yaml(data: Any) -> str:
    lines: list[str] = []
    _yaml_block(data, lines, 0)
    return "\n".join(lines) + "\n"


def _yaml_inline(v: Any) -> str | None:
    """The text of a value that fits after `key: ` or `- ` on one line, or None for a block."""
    t = type(v)
    if t is dict:
        return "{}" if not v else None
    if t is list:
        return "[]" if not v else None
    if t is str:
        if "\n" in v and all(c.isprintable() or c == "\n" for c in v):
            return None
        return _yaml_scalar_string(v)
    if t is bool:
        return "true" if v else "false"
    if v is None:
        return "null"
    if t is int or t is Decimal:
        return number_text(v)
    if t is bytes:
        return "!!binary " + base64.b64encode(v).decode()
    raise TypeError(f"cannot encode {t.__name__} as YAML")


def _literal(s: str, indent: int) -> list[str]:
    """A multi-line string as a literal block: `|` keeps one final newline, `|-` none, `|+` more."""
    if s.endswith("\n\n") or s == "\n":
        chomp, body = "+", s[:-1]
    elif s.endswith("\n"):
        chomp, body = "", s[:-1]
    else:
        chomp, body = "-", s
    lead = "2" if s[:1] == " " else ""
    pad = " " * indent
    return ["|" + lead + chomp] + [(pad + line) if line else "" for line in body.split("\n")]


def _yaml_block(v: Any, lines: list[str], indent: int) -> None:
    """v (a non-empty mapping or sequence, or a scalar) as lines at `indent`."""
    pad = " " * indent
    t = type(v)
    if t is dict and v:
        for k, x in v.items():
            _yaml_entry(f"{pad}{_yaml_scalar_string(k)}:", x, lines, indent, in_mapping=True)
        return
    if t is list and v:
        for x in v:
            _yaml_entry(f"{pad}-", x, lines, indent, in_mapping=False)
        return
    inline = _yaml_inline(v)
    if inline is not None:
        lines.append(pad + inline)
    else:
        block = _literal(v, indent)
        lines.append(pad + block[0])
        lines.extend(block[1:])


def _yaml_entry(head: str, x: Any, lines: list[str], indent: int, in_mapping: bool) -> None:
    inline = _yaml_inline(x)
    if inline is not None:
        lines.append(f"{head} {inline}")
    elif type(x) is str:
        block = _literal(x, indent + 2)
        lines.append(f"{head} {block[0]}")
        lines.extend(block[1:])
    elif type(x) is list and in_mapping:
        lines.append(head)
        _yaml_block(x, lines, indent)  # yaml.v3 does not indent a sequence under its key
    elif in_mapping:
        lines.append(head)
        _yaml_block(x, lines, indent + 2)
    else:
        sub: list[str] = []
        _yaml_block(x, sub, indent + 2)
        lines.append(f"{head} {sub[0][indent + 2:]}")
        lines.extend(sub[1:])
