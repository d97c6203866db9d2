"""The CUE scanner: source text to tokens, with CUE's automatic commas, comments and interpolations."""

from __future__ import annotations

import bisect
import re
from decimal import Decimal

from velashard.cue.errors import CueSyntaxError, Pos

# Token kinds besides operator strings, which are their own kind.
IDENT, INT, FLOAT, STRING, BOTTOM, ATTR, COMMA, EOF = "IDENT", "INT", "FLOAT", "STRING", "_|_", "ATTR", ",", "EOF"

OPERATORS = ("...", "_|_", "&&", "||", "==", "!=", "<=", ">=", "=~", "!~",
             "+", "-", "*", "/", "&", "|", "<", ">", "=", "!", "?", ":", ".", "(", ")", "[", "]", "{", "}", ",")

_MULTIPLIERS = {"K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
                "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
_NUMBER = re.compile(r"""
    0[xX][0-9a-fA-F_]+ | 0[oO][0-7_]+ | 0[bB][01_]+
  | (?:[0-9][0-9_]*(?:\.[0-9_]*)? | \.[0-9][0-9_]*)(?:[eE][+-]?[0-9_]+)?(?:[KMGTP]i?)?
""", re.X)
_IDENT = re.compile(r"[#_$]*[A-Za-z_$0-9]*")
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
            "\\": "\\", "/": "/", '"': '"', "'": "'"}
# After these tokens a newline ends the element, as Go's scanner does.
_COMMA_AFTER = {IDENT, INT, FLOAT, STRING, BOTTOM, ")", "]", "}", "...", ATTR}


class Token:
    __slots__ = ("kind", "value", "pos", "comments", "newline_before", "parts", "end")

    def __init__(self, kind: str, value: object, pos: Pos, comments: list[str] | None = None) -> None:
        self.kind = kind
        self.value = value
        self.pos = pos
        self.comments = comments or []
        self.newline_before = False
        self.parts: list | None = None  # strings with interpolations: str segments and token lists
        self.end = 0  # the offset just past a scanned token (not an inserted comma or EOF), to quote the source

    def __repr__(self) -> str:
        return f"Token({self.kind}, {self.value!r}, {self.pos})"


class Lexer:
    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.file = filename
        self.i = 0
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def pos(self, i: int | None = None) -> Pos:
        i = self.i if i is None else i
        line = bisect.bisect_right(self.line_starts, i)
        return Pos(self.file, line, i - self.line_starts[line - 1] + 1)

    def error(self, message: str, i: int | None = None) -> CueSyntaxError:
        return CueSyntaxError(message, self.pos(i))

    def tokens(self, stop_at_paren: bool = False) -> list[Token]:
        """All tokens to the end, or (inside an interpolation) up to the `)` that closes it."""
        out: list[Token] = []
        comments: list[str] = []
        newline = False
        depth = 0
        text = self.text
        n = len(text)
        while True:
            # whitespace and comments; a newline may insert a comma
            while self.i < n:
                c = text[self.i]
                if c == "\n":
                    if out and out[-1].kind in _COMMA_AFTER and not stop_at_paren:
                        out.append(Token(COMMA, "\n", self.pos()))
                    newline = True
                    self.i += 1
                elif c in " \t\r\ufeff":
                    self.i += 1
                elif text.startswith("//", self.i):
                    end = text.find("\n", self.i)
                    end = n if end < 0 else end
                    if not (out and not newline and out[-1].kind != COMMA):
                        comments.append(text[self.i + 2:end])  # a trailing comment documents nothing after it
                    self.i = end
                else:
                    break
            if self.i >= n:
                if stop_at_paren:
                    raise self.error("unterminated interpolation")
                if out and out[-1].kind in _COMMA_AFTER:
                    out.append(Token(COMMA, "EOF", self.pos()))
                out.append(Token(EOF, None, self.pos(), comments))
                return out
            start = self.i
            tok = self._next()
            tok.end = self.i
            tok.comments = comments
            tok.newline_before = newline
            comments = []
            newline = False
            if stop_at_paren:
                if tok.kind in ("(", "[", "{"):
                    depth += 1
                elif tok.kind in (")", "]", "}"):
                    if depth == 0:
                        if tok.kind != ")":
                            raise self.error(f"unexpected {tok.kind} in interpolation", start)
                        return out
                    depth -= 1
            out.append(tok)

    def _next(self) -> Token:
        text, i = self.text, self.i
        c = text[i]
        pos = self.pos(i)
        if c == "#" or c == '"' or c == "'":
            j = i
            while j < len(text) and text[j] == "#":
                j += 1
            if j < len(text) and text[j] in "\"'":
                return self._string(j - i)
        if c.isalpha() or c in "_$#":
            if text.startswith("_|_", i):
                self.i = i + 3
                return Token(BOTTOM, "_|_", pos)
            m = _IDENT.match(text, i)
            word = m.group(0)
            self.i = m.end()
            return Token(IDENT, word, pos)
        if c.isdigit() or (c == "." and i + 1 < len(text) and text[i + 1].isdigit()):
            return self._number(pos)
        if c == "@":
            return self._attribute(pos)
        for op in OPERATORS:
            if text.startswith(op, i):
                self.i = i + len(op)
                return Token(op, op, pos)
        raise self.error(f"illegal character {c!r}")

    def _number(self, pos: Pos) -> Token:
        m = _NUMBER.match(self.text, self.i)
        raw = m.group(0)
        self.i = m.end()
        if self.i < len(self.text) and (self.text[self.i].isalnum() or self.text[self.i] == "_"):
            raise self.error(f"invalid number literal {raw + self.text[self.i]!r}", self.i)
        if raw.endswith("_") or "__" in raw:
            raise self.error(f"'_' must separate successive digits in {raw!r}")
        digits = raw.replace("_", "")
        low = digits[:2].lower()
        if low in ("0x", "0o", "0b"):
            return Token(INT, int(digits, {"0x": 16, "0o": 8, "0b": 2}[low]), pos)
        mult = 1
        for suffix in ("Ki", "Mi", "Gi", "Ti", "Pi", "K", "M", "G", "T", "P"):
            if digits.endswith(suffix):
                mult = _MULTIPLIERS[suffix]
                digits = digits[:-len(suffix)]
                break
        is_float = "." in digits or "e" in digits.lower()
        if mult != 1:
            value = Decimal(digits) * mult
            if value != value.to_integral_value():
                raise self.error(f"number {raw} with multiplier is not an integer")
            return Token(INT, int(value), pos)
        if not is_float:
            if len(digits) > 1 and digits[0] == "0":
                raise self.error(f"illegal integer number {raw!r}: leading zero (use 0o for octal)")
            return Token(INT, int(digits), pos)
        return Token(FLOAT, Decimal(digits), pos)

    def _attribute(self, pos: Pos) -> Token:
        text = self.text
        m = _IDENT.match(text, self.i + 1)
        j = m.end()
        if j >= len(text) or text[j] != "(":
            raise self.error("invalid attribute: expected '('")
        depth = 0
        while j < len(text):
            if text[j] == "(":
                depth += 1
            elif text[j] == ")":
                depth -= 1
                if depth == 0:
                    break
            elif text[j] == "\n":
                raise self.error("attribute not terminated")
            j += 1
        raw = text[self.i:j + 1]
        self.i = j + 1
        return Token(ATTR, raw, pos)

    def _string(self, hashes: int) -> Token:
        text = self.text
        start = self.i
        pos = self.pos(start)
        i = start + hashes
        quote = text[i]
        multi = text.startswith(quote * 3, i)
        delim = quote * 3 if multi else quote
        i += len(delim)
        if multi:
            nl = i
            while nl < len(text) and text[nl] in " \t\r":
                nl += 1
            if nl >= len(text) or text[nl] != "\n":
                raise self.error("expected newline after multiline quote", i)
            i = nl + 1
        close = delim + "#" * hashes
        escape = "\\" + "#" * hashes
        parts: list = []  # raw text segments (escapes not yet resolved) and token lists
        seg_start = i
        while True:
            if i >= len(text):
                raise self.error("string literal not terminated", start)
            if text.startswith(close, i):
                break
            if not multi and text[i] == "\n":
                raise self.error("string literal not terminated", start)
            if text.startswith(escape, i):
                k = i + len(escape)
                if k < len(text) and text[k] == "(":
                    parts.append(text[seg_start:i])
                    self.i = k + 1
                    inner = self.tokens(stop_at_paren=True)
                    parts.append(inner)
                    i = self.i
                    seg_start = i
                    continue
                i = k + 1
                continue
            i += 1
        parts.append(text[seg_start:i])
        self.i = i + len(close)
        if multi:
            parts = self._dedent(parts, start)
        is_bytes = quote == "'"
        cooked = [self._unescape(p, escape, is_bytes, start) if isinstance(p, str) else p for p in parts]
        tok = (BytesToken if is_bytes else Token)(STRING, cooked[0] if len(cooked) == 1 else None, pos)
        if len(cooked) > 1:
            tok.parts = cooked
        return tok

    def _dedent(self, parts: list, start: int) -> list:
        last = parts[-1] if isinstance(parts[-1], str) else ""
        nl = last.rfind("\n")
        indent = last[nl + 1:] if nl >= 0 else last
        if indent.strip(" \t") or not isinstance(parts[-1], str) or (nl < 0 and len(parts) > 1):
            return parts  # closing quotes after text on their line: nothing is stripped (as cue v0.4 reads it)
        parts = parts[:-1] + [last[:nl] if nl >= 0 else ""]
        out: list = []
        for k, p in enumerate(parts):
            if not isinstance(p, str):
                out.append(p)
                continue
            lines = p.split("\n")
            for m in range(len(lines)):
                if m == 0 and k > 0:
                    continue  # continues the line of the interpolation before it
                line = lines[m]
                if line.startswith(indent):
                    lines[m] = line[len(indent):]
                elif line.strip(" \t") == "":
                    lines[m] = ""
                else:
                    raise self.error("invalid whitespace in multiline string: must be prefixed with the closing "
                                     "quote's indentation", start)
            out.append("\n".join(lines))
        return out

    def _unescape(self, raw: str, escape: str, is_bytes: bool, start: int) -> str | bytes:
        if escape not in raw:
            return raw.encode() if is_bytes else raw
        data = bytearray()
        i = 0
        n = len(raw)
        while i < n:
            if raw.startswith(escape, i):
                i += len(escape)
                c = raw[i] if i < n else ""
                if c in _ESCAPES:
                    data += _ESCAPES[c].encode()
                    i += 1
                elif c in "uU":
                    width = 4 if c == "u" else 8
                    hexa = raw[i + 1:i + 1 + width]
                    if len(hexa) != width or not all(h in "0123456789abcdefABCDEF" for h in hexa):
                        raise self.error(f"invalid escape \\{c}{hexa}", start)
                    data += chr(int(hexa, 16)).encode()
                    i += 1 + width
                elif c == "x" and is_bytes:
                    data.append(int(raw[i + 1:i + 3], 16))
                    i += 3
                elif c.isdigit() and is_bytes:
                    data.append(int(raw[i:i + 3], 8))
                    i += 3
                else:
                    raise self.error(f"unknown escape sequence \\{c}", start)
            else:
                j = raw.find(escape, i)
                j = n if j < 0 else j
                data += raw[i:j].encode()
                i = j
        return bytes(data) if is_bytes else data.decode("utf-8", errors="replace")


class BytesToken(Token):
    """A bytes literal ('...'): its value (or its parts) are bytes."""
    __slots__ = ()


def tokenize(text: str, filename: str = "-") -> list[Token]:
    return Lexer(text, filename).tokens()
