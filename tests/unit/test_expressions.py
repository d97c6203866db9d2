"""Sandboxed expressions are compiled once and still evaluated in the sandbox."""

from __future__ import annotations

import pytest
from jinja2 import TemplateError
from jinja2.exceptions import SecurityError

from velashard.core.expressions import compiled


def test_an_expression_is_compiled_once_and_evaluated_per_call():
    check = compiled("context.output.status.readyReplicas | default(0) >= 2")
    assert compiled("context.output.status.readyReplicas | default(0) >= 2") is check
    assert check(context={"output": {"status": {"readyReplicas": 2}}}) is True
    assert check(context={"output": {}}) is False  # missing fields read as undefined, then the default
    assert compiled("missing", undefined_to_none=True)() is None


def test_invalid_and_unsafe_expressions_fail():
    with pytest.raises(TemplateError):
        compiled("status.ready ==")
    assert not compiled("x.__class__.__mro__")(x=1)  # the sandbox hides unsafe attributes
    with pytest.raises(SecurityError):
        compiled("x.__init__.__globals__.clear()")(x=compiled)
