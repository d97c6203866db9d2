"""Kubernetes' rules for names and label values, with apimachinery's messages: pure checks that the
controller, the CLI and the embedded API server share."""

from __future__ import annotations

import re

# Go's regexp `^...$` never matches before a trailing newline, so these are used with fullmatch.
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"
_DNS1123_LABEL = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN = re.compile(_DNS1123_SUBDOMAIN_FMT)
_QUALIFIED_NAME = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE = re.compile(_LABEL_VALUE_FMT)

def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    # apimachinery's RegexError: examples joined by ",  or " (two spaces, as Kubernetes prints them).
    text = msg
    if examples:
        text += " (e.g. " + ",  or ".join(f"'{e}'" for e in examples) + ", "
    else:
        text += " ("
    return text + f"regex used for validation is '{fmt}')"


def _max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def _byte_len(value: str) -> int:
    # Go measures strings in bytes.
    return len(value.encode("utf-8", "surrogatepass"))


def is_dns1123_label(value: str) -> list[str]:
    """Errors for a DNS-1123 label (namespace names, Service names, ...); empty list when valid."""
    if not isinstance(value, str):
        return ["must be a string"]
    errs = []
    if _byte_len(value) > 63:
        errs.append(_max_len_error(63))
    if not _DNS1123_LABEL.fullmatch(value):
        errs.append(_regex_error("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
                                 "'-', and must start and end with an alphanumeric character",
                                 _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    """Errors for a DNS-1123 subdomain (most object names); empty list when valid."""
    if not isinstance(value, str):
        return ["must be a string"]
    errs = []
    if _byte_len(value) > 253:
        errs.append(_max_len_error(253))
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        errs.append(_regex_error("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                                 "characters, '-' or '.', and must start and end with an alphanumeric character",
                                 _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


_QUALIFIED_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                       "alphanumeric character")


def is_qualified_name(value: str) -> list[str]:
    """Label and annotation keys, finalizers: an optional DNS-subdomain prefix and '/', then a name of <= 63."""
    if not isinstance(value, str):
        return ["must be a string"]
    parts = value.split("/")
    errs: list[str] = []
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += ["prefix part " + e for e in is_dns1123_subdomain(prefix)]
    else:
        return ["a qualified name " + _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name",
                                                   "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif _byte_len(name) > 63:
        errs.append("name part " + _max_len_error(63))
    # Kubernetes reports the regex error even for an empty name part.
    if not _QUALIFIED_NAME.fullmatch(name):
        errs.append("name part " + _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name",
                                                "123-abc"))
    return errs


def is_valid_label_value(value: str) -> list[str]:
    """Errors for a label value: empty, or a qualified-name-like string of at most 63 characters."""
    if not isinstance(value, str):
        return ["must be a string"]
    errs = []
    if _byte_len(value) > 63:
        errs.append(_max_len_error(63))
    if not _LABEL_VALUE.fullmatch(value):
        errs.append(_regex_error("a valid label must be an empty string or consist of alphanumeric characters, "
                                 "'-', '_' or '.', and must start and end with an alphanumeric character",
                                 _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def is_valid_path_segment_name(value: str) -> list[str]:
    """Names that only have to be usable in a URL path (e.g. RBAC roles, which allow ':')."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]
