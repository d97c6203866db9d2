"""Label and field selectors: Kubernetes' syntax, parsing and matching.

The label-selector grammar follows apimachinery's `labels.Parse` token for token (`in`/`notin` are
valid keys, `>`/`<` compare integers, a NUL byte ends the input, errors use its wording) with one
deliberate difference: an empty entry in a value set (`a in ()`, `a in (x,)`) is rejected, where
kube-apiserver reads it as the empty value `""`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, NamedTuple

from velashard.apiserver.storage.validation import is_qualified_name, is_valid_label_value


class SelectorError(ValueError):
    """A selector kube-apiserver would reject; the message names the bad part."""


_SET_OPS = ("in", "notin")
_UNARY_OPS = ("exists", "!")


@dataclass(frozen=True)
class Requirement:
    """One requirement; operator is one of =, !=, in, notin, exists, !, >, <."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "exists":
            return present
        if self.operator == "!":
            return not present
        if self.operator in ("=", "in"):
            return present and labels[self.key] in self.values
        if self.operator in ("!=", "notin"):
            # != and notin also match objects without the key (Kubernetes' rule).
            return not present or labels[self.key] not in self.values
        # > and <: a missing key or a non-integer label value never matches.
        actual = _as_int(labels.get(self.key))
        if actual is None:
            return False
        wanted = _as_int(self.values[0])
        return actual > wanted if self.operator == ">" else actual < wanted

    def __str__(self) -> str:
        if self.operator == "exists":
            return self.key
        if self.operator == "!":
            return "!" + self.key
        if self.operator in _SET_OPS:
            return f"{self.key} {self.operator} ({','.join(self.values)})"
        return f"{self.key}{self.operator}{self.values[0]}"


def _as_int(text: str | None) -> int | None:
    # Go's strconv.ParseInt(s, 10, 64): optional sign, decimal digits, int64 range.
    if text is None:
        return None
    digits = text[1:] if text[:1] in "+-" else text
    if not digits or not (digits.isascii() and digits.isdigit()):
        return None
    value = int(text)
    return value if -2**63 <= value < 2**63 else None


@dataclass(frozen=True)
class LabelSelector:
    """Requirements ANDed together; no requirements matches everything."""

    requirements: tuple[Requirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def _canonical(reqs: list[Requirement]) -> LabelSelector:
    # Kubernetes sorts requirements by key; operator and values break ties so equal selectors compare equal.
    return LabelSelector(tuple(sorted(reqs, key=lambda r: (r.key, r.operator, r.values))))


def _requirement(key: str, operator: str, values: list[str]) -> Requirement:
    """Validate as labels.NewRequirement does; values are deduplicated and sorted like a sets.String."""
    key_errors = is_qualified_name(key)
    if key_errors:
        raise SelectorError(f'key: Invalid value: "{key}": {"; ".join(key_errors)}')
    unique = sorted(set(values))
    if operator in _SET_OPS and not unique:
        raise SelectorError("values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty")
    if operator in (">", "<"):
        if len(unique) != 1:
            raise SelectorError("values: for 'Gt', 'Lt' operators, exactly one value is required")
        if _as_int(unique[0]) is None:
            raise SelectorError(f'values[0]: Invalid value: "{unique[0]}": for \'Gt\', \'Lt\' operators, the value '
                                "must be an integer")
    for i, value in enumerate(unique):
        value_errors = is_valid_label_value(value)
        if value_errors:
            raise SelectorError(f'values[{i}][{key}]: Invalid value: "{value}": {"; ".join(value_errors)}')
    return Requirement(key, operator, tuple(unique))


# --- lexer and parser (apimachinery's labels/selector.go grammar) ---------------------------------------

_WHITESPACE = " \t\r\n"
_SPECIAL = "=!(),<>"
_ID = "identifier"
_END = "end of string"


def _lex(text: str) -> list[tuple[str, str]]:
    """Tokens as (kind, literal): kind is _ID, _END or the symbol itself."""
    text = text.split("\x00", 1)[0]  # Go's lexer treats a NUL byte as the end of input
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n:
            tokens.append((_END, ""))
            return tokens
        if text[i] in _SPECIAL:
            # Longest match: only '==' and '!=' are two characters long.
            size = 2 if text[i:i + 2] in ("==", "!=") else 1
            tokens.append((text[i:i + size], text[i:i + size]))
            i += size
            continue
        start = i
        while i < n and text[i] not in _SPECIAL and text[i] not in _WHITESPACE:
            i += 1
        tokens.append((_ID, text[start:i]))


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _lex(text)
        self.pos = 0

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.pos]

    def take(self) -> tuple[str, str]:
        token = self.tokens[self.pos]
        if token[0] != _END:
            self.pos += 1
        return token

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            kind, literal = self.peek()
            if kind == _END:
                return reqs
            if kind not in (_ID, "!"):
                raise SelectorError(f"found '{literal}', expected: !, identifier, or 'end of string'")
            reqs.append(self.requirement())
            kind, literal = self.take()
            if kind == _END:
                return reqs
            if kind != ",":
                raise SelectorError(f"found '{literal}', expected: ',' or 'end of string'")
            kind, literal = self.peek()
            if kind not in (_ID, "!"):
                raise SelectorError(f"found '{literal}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        kind, key = self.take()
        negated = kind == "!"
        if negated:
            kind, key = self.take()
        if kind != _ID:
            raise SelectorError(f"found '{key}', expected: identifier")
        if negated:
            return _requirement(key, "!", [])
        if self.peek()[0] in (_END, ","):
            return _requirement(key, "exists", [])
        kind, literal = self.take()
        if kind == _ID and literal in _SET_OPS:
            return _requirement(key, literal, self.set_values())
        if kind in ("=", "==", "!=", ">", "<"):
            # `==` means `=`; the canonical form writes `=`.
            return _requirement(key, "=" if kind == "==" else kind, [self.exact_value()])
        raise SelectorError(f"found '{literal}', expected: in, notin, =, ==, !=, gt, lt")

    def exact_value(self) -> str:
        if self.peek()[0] in (_END, ","):
            return ""
        kind, literal = self.take()
        if kind != _ID:
            raise SelectorError(f"found '{literal}', expected: identifier")
        return literal

    def set_values(self) -> list[str]:
        kind, literal = self.take()
        if kind != "(":
            raise SelectorError(f"found '{literal}' expected: '('")
        values: list[str] = []
        while True:
            kind, literal = self.take()
            if kind == ")" and not values:
                # kube-apiserver would read `()` as `("")`; we reject it, as the project asks.
                raise SelectorError("values: Invalid value: []: for 'in', 'notin' operators, values set can't be "
                                    "empty")
            if kind != _ID:
                raise SelectorError(f"found '{literal}', expected: identifier (empty values are not allowed in a "
                                    "set)" if kind in (",", ")") else f"found '{literal}', expected: identifier")
            values.append(literal)
            kind, literal = self.take()
            if kind == ")":
                return values
            if kind != ",":
                raise SelectorError(f"found '{literal}', expected: ',' or ')'")


def parse_label_selector(text: str) -> LabelSelector:
    """Parse `a=b,c!=d,e in (x,y),f notin (z),g,!h`; an empty string matches everything."""
    if not isinstance(text, str):
        raise SelectorError("a label selector must be a string")
    return _canonical(_Parser(text).parse())


_EXPRESSION_OPS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


_STORED: dict[int, tuple[Any, LabelSelector]] = {}


def stored_label_selector(sel: dict[str, Any] | None) -> LabelSelector:
    """label_selector_from_dict of a selector in a stored object (a webhook's or a policy's, which the store never
    changes in place), parsed once: admission reads them on every write. Remembered by identity, with the dict
    itself kept so that its id cannot be reused while remembered."""
    found = _STORED.get(id(sel))
    if found is not None and found[0] is sel:
        return found[1]
    parsed = label_selector_from_dict(sel)
    if len(_STORED) >= 4096:
        _STORED.clear()
    _STORED[id(sel)] = (sel, parsed)
    return parsed


def label_selector_from_dict(sel: dict[str, Any] | None) -> LabelSelector:
    """A metav1.LabelSelector (matchLabels, matchExpressions).

    None and {} both match everything, as for webhook objectSelector/namespaceSelector (note that
    Kubernetes' LabelSelectorAsSelector turns a nil selector into "match nothing"; callers for which
    a missing selector is an error check for None themselves).
    """
    if sel is None:
        return LabelSelector()
    if not isinstance(sel, dict):
        raise SelectorError("a label selector must be an object")
    reqs: list[Requirement] = []
    match_labels = sel.get("matchLabels") or {}
    if not isinstance(match_labels, dict):
        raise SelectorError("matchLabels: must be a map of strings")
    for key, value in match_labels.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise SelectorError(f"matchLabels: {key!r}: keys and values must be strings")
        reqs.append(_requirement(key, "=", [value]))
    expressions = sel.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise SelectorError("matchExpressions: must be a list")
    for i, expr in enumerate(expressions):
        where = f"matchExpressions[{i}]"
        if not isinstance(expr, dict):
            raise SelectorError(f"{where}: must be an object")
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values")
        if not isinstance(key, str) or not key:
            raise SelectorError(f"{where}.key: Required value")
        if op not in _EXPRESSION_OPS:
            raise SelectorError(f'{where}.operator: "{op}" is not a valid label selector operator')
        if values is not None and (not isinstance(values, list) or not all(isinstance(v, str) for v in values)):
            raise SelectorError(f"{where}.values: must be a list of strings")
        values = values or []
        if op in ("In", "NotIn") and not values:
            raise SelectorError(f"{where}.values: Required value: must be specified when `operator` is 'In' or "
                                "'NotIn'")
        if op in ("Exists", "DoesNotExist") and values:
            raise SelectorError(f"{where}.values: Forbidden: may not be specified when `operator` is 'Exists' or "
                                "'DoesNotExist'")
        try:
            reqs.append(_requirement(key, _EXPRESSION_OPS[op], values))
        except SelectorError as err:
            raise SelectorError(f"{where}: {err}") from None
    return _canonical(reqs)


# --- field selectors (apimachinery's fields/selector.go) ------------------------------------------------

class FieldRequirement(NamedTuple):
    field: str
    operator: str  # "=" or "!="
    value: str


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def fields(self) -> set[str]:
        """The field names used, so the server can reject the ones a resource does not support."""
        return {r.field for r in self.requirements}

    def matches(self, fields: Mapping[str, str]) -> bool:
        """A missing field compares as the empty string, as in Kubernetes."""
        for field, op, value in self.requirements:
            if (fields.get(field, "") == value) != (op == "="):
                return False
        return True

    def __str__(self) -> str:
        return ",".join(f"{f}{op}{_escape_field_value(v)}" for f, op, v in self.requirements)


def _escape_field_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not escaped with a backslash."""
    terms, start, escaped = [], 0, False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _unescape_field_value(value: str) -> str:
    out, escaped = [], False
    for ch in value:
        if escaped:
            if ch not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ",=":
            raise SelectorError(f"invalid field selector: unescaped character in value: {ch}")
        else:
            out.append(ch)
    if escaped:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def parse_field_selector(text: str) -> FieldSelector:
    """Parse `f=v,g!=w` (also `==`); a backslash escapes `\\`, `,` and `=` in a value.

    As in Kubernetes, nothing is trimmed and empty terms are skipped; an unknown or empty field name
    is the server's to reject (fields()), with 400 "field label not supported".
    """
    if not isinstance(text, str):
        raise SelectorError("a field selector must be a string")
    reqs = []
    for term in sorted(_split_terms(text)) if text else []:
        if not term:
            continue
        for i in range(len(term)):
            op = next((o for o in ("!=", "==", "=") if term.startswith(o, i)), None)
            if op:
                value = _unescape_field_value(term[i + len(op):])
                reqs.append(FieldRequirement(term[:i], "!=" if op == "!=" else "=", value))
                break
        else:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
    return FieldSelector(tuple(reqs))
