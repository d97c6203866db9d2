"""Sandboxed Jinja expressions (health policies, workflow `if` and outputs), each compiled once.

Compiling is most of an evaluation's cost (parse, optimise, generate and exec Python): every reconcile
evaluates its components' health policies, so a failover that hands a shard hundreds of apps would spend
most of its time compiling the same few expressions again.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from cachetools import LRUCache, cached
from jinja2 import ChainableUndefined
from jinja2.sandbox import SandboxedEnvironment

# Missing fields read as undefined (then `default`), as KubeVela's `*0 | int` does.
_ENV = SandboxedEnvironment(undefined=ChainableUndefined)


# Expressions come from definitions and app specs: few distinct ones; bounded all the same. An invalid
# one raises and is not cached. The lock: an LRU cache reorders itself on reads, and workers share it.
@cached(LRUCache(maxsize=512), lock=threading.Lock())
def compiled(expression: str, undefined_to_none: bool = False) -> Callable[..., Any]:
    """The expression as a callable over keyword variables; raises jinja2's TemplateError when invalid."""
    return _ENV.compile_expression(expression, undefined_to_none=undefined_to_none)
