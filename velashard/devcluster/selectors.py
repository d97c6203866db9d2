"""Label and field selectors: Kubernetes' syntax, parsing and matching."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from velashard.devcluster.validation import is_qualified_name, is_valid_label_value


class SelectorError(ValueError):
    """A selector kube-apiserver would reject; the message names the bad part."""


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # =, !=, in, notin, exists, !
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "exists":
            return present
        if self.operator == "!":
            return not present
        if self.operator in ("=", "in"):
            return present and labels[self.key] in self.values
        # != and notin also match objects without the key (Kubernetes' rule).
        return not present or labels[self.key] not in self.values

    def __str__(self) -> str:
        if self.operator == "exists":
            return self.key
        if self.operator == "!":
            return "!" + self.key
        if self.operator in ("=", "!="):
            return f"{self.key}{self.operator}{self.values[0]}"
        return f"{self.key} {self.operator} ({','.join(sorted(self.values))})"


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


_TOKEN = re.compile(r"\s*(!=|==|=|\(|\)|,|!|[^\s!=(),]+)")


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m:
            raise SelectorError(f"unable to parse selector {text!r} at position {pos}")
        out.append(m.group(1))
        pos = m.end()
    return out


def _check_key(key: str, text: str) -> None:
    errs = is_qualified_name(key)
    if errs:
        raise SelectorError(f"invalid label key {key!r} in selector {text!r}: {errs[0]}")


def _check_value(value: str, text: str) -> None:
    errs = is_valid_label_value(value)
    if errs:
        raise SelectorError(f"invalid label value {value!r} in selector {text!r}: {errs[0]}")


def parse_label_selector(text: str) -> LabelSelector:
    """Parse `a=b,c!=d,e in (x,y),f notin (z),g,!h`; an empty string matches everything."""
    toks = _tokens(text or "")
    reqs: list[Requirement] = []
    i = 0

    def peek(k: int = 0) -> str | None:
        return toks[i + k] if i + k < len(toks) else None

    while i < len(toks):
        tok = toks[i]
        if tok == "!":
            key = peek(1)
            if key is None or key in ("!", "=", "==", "!=", "(", ")", ","):
                raise SelectorError(f"expected a label key after '!' in selector {text!r}")
            _check_key(key, text)
            reqs.append(Requirement(key, "!"))
            i += 2
        elif tok in ("=", "==", "!=", "(", ")", ","):
            raise SelectorError(f"found {tok!r}, expected a label key in selector {text!r}")
        else:
            key = tok
            _check_key(key, text)
            op = peek(1)
            if op in ("=", "==", "!="):
                value = peek(2)
                if value is None or value == ",":
                    value, step = "", 2
                elif value in ("=", "==", "!=", "(", ")", "!"):
                    raise SelectorError(f"found {value!r}, expected a value for {key!r} in selector {text!r}")
                else:
                    step = 3
                _check_value(value, text)
                reqs.append(Requirement(key, "!=" if op == "!=" else "=", (value,)))
                i += step
            elif op in ("in", "notin"):
                if peek(2) != "(":
                    raise SelectorError(f"expected '(' after {op!r} for {key!r} in selector {text!r}")
                j = i + 3
                values: list[str] = []
                expect_value = True
                while True:
                    t = toks[j] if j < len(toks) else None
                    if t is None:
                        raise SelectorError(f"missing ')' for {key!r} in selector {text!r}")
                    if t == ")":
                        if expect_value and values:
                            raise SelectorError(f"missing value after ',' for {key!r} in selector {text!r}")
                        break
                    if t == ",":
                        if expect_value:
                            raise SelectorError(f"unexpected ',' for {key!r} in selector {text!r}")
                        expect_value = True
                    elif t in ("(", "=", "==", "!=", "!"):
                        raise SelectorError(f"unexpected {t!r} in the values of {key!r} in selector {text!r}")
                    else:
                        if not expect_value:
                            raise SelectorError(f"expected ',' or ')' for {key!r} in selector {text!r}")
                        _check_value(t, text)
                        values.append(t)
                        expect_value = False
                    j += 1
                if not values:
                    raise SelectorError(f"for 'in', 'notin' operators, values set can't be empty ({key!r} in "
                                        f"selector {text!r})")
                reqs.append(Requirement(key, op, tuple(sorted(set(values)))))
                i = j + 1
            elif op is None or op == ",":
                reqs.append(Requirement(key, "exists"))
                i += 1
            else:
                raise SelectorError(f"found {op!r}, expected an operator after {key!r} in selector {text!r}")
        if i < len(toks):
            if toks[i] != ",":
                raise SelectorError(f"found {toks[i]!r}, expected ',' in selector {text!r}")
            i += 1
            if i == len(toks):
                raise SelectorError(f"trailing ',' in selector {text!r}")
    return LabelSelector(tuple(reqs))


def label_selector_from_dict(sel: dict[str, Any] | None) -> LabelSelector:
    """A metav1.LabelSelector (matchLabels, matchExpressions); None and {} match everything."""
    if sel is None:
        return LabelSelector()
    if not isinstance(sel, dict):
        raise SelectorError("a label selector must be an object")
    reqs: list[Requirement] = []
    match_labels = sel.get("matchLabels") or {}
    if not isinstance(match_labels, dict):
        raise SelectorError("matchLabels must be a map of strings")
    for key, value in sorted(match_labels.items()):
        _check_key(str(key), "matchLabels")
        if not isinstance(value, str):
            raise SelectorError(f"matchLabels[{key}] must be a string")
        _check_value(value, "matchLabels")
        reqs.append(Requirement(key, "=", (value,)))
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for i, expr in enumerate(sel.get("matchExpressions") or []):
        if not isinstance(expr, dict):
            raise SelectorError(f"matchExpressions[{i}] must be an object")
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if not isinstance(key, str):
            raise SelectorError(f"matchExpressions[{i}].key is required")
        _check_key(key, "matchExpressions")
        if op not in ops:
            raise SelectorError(f'matchExpressions[{i}].operator: "{op}" is not a valid label selector operator')
        if op in ("In", "NotIn"):
            if not values:
                raise SelectorError(f"matchExpressions[{i}].values: must be specified when `operator` is 'In' or "
                                    f"'NotIn'")
            for v in values:
                if not isinstance(v, str):
                    raise SelectorError(f"matchExpressions[{i}].values must be strings")
                _check_value(v, "matchExpressions")
        elif values:
            raise SelectorError(f"matchExpressions[{i}].values: may not be specified when `operator` is 'Exists' "
                                f"or 'DoesNotExist'")
        reqs.append(Requirement(key, ops[op], tuple(sorted(set(values)))))
    return LabelSelector(tuple(reqs))


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[tuple[str, str, str], ...] = ()  # (field, "=" or "!=", value)

    def fields(self) -> set[str]:
        return {f for f, _, _ in self.requirements}

    def matches(self, fields: Mapping[str, str]) -> bool:
        for field, op, value in self.requirements:
            actual = fields.get(field, "")
            if (actual == value) != (op == "="):
                return False
        return True


def parse_field_selector(text: str) -> FieldSelector:
    """Parse `f=v,g!=w` (also `==`); backslash escapes a ',' or '=' in a value."""
    reqs = []
    for part in _split_unescaped(text or "", ","):
        if not part.strip():
            if text.strip():
                raise SelectorError(f"invalid field selector {text!r}: empty requirement")
            continue
        for op in ("!=", "==", "="):
            idx = _find_unescaped(part, op)
            if idx >= 0:
                field, value = part[:idx].strip(), part[idx + len(op):].strip()
                if not field:
                    raise SelectorError(f"invalid field selector {part!r}: missing field name")
                reqs.append((field, "!=" if op == "!=" else "=", value.replace("\\,", ",").replace("\\=", "=")
                             .replace("\\\\", "\\")))
                break
        else:
            raise SelectorError(f"invalid selector: '{part}'; can't understand '{part}'")
    return FieldSelector(tuple(reqs))


def _find_unescaped(text: str, token: str) -> int:
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(token, i):
            return i
        i += 1
    return -1


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, current, i = [], "", 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            current += text[i:i + 2]
            i += 2
            continue
        if text[i] == sep:
            parts.append(current)
            current = ""
        else:
            current += text[i]
        i += 1
    parts.append(current)
    return parts
