"""The built-in definitions installed into vela-system by `velashard install`: the `vela def` files in
velashard/definitions/ (data, not code)."""

from __future__ import annotations

import copy
import functools
import os
from typing import Any

from velashard.core.deffile import parse_def_file

DEFINITIONS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "definitions")
_ORDER = {"ComponentDefinition": 0, "TraitDefinition": 1, "PolicyDefinition": 2, "WorkflowStepDefinition": 3}


@functools.lru_cache(maxsize=4)
def _load(directory: str) -> tuple[dict[str, Any], ...]:
    found = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(".cue"):
            with open(os.path.join(directory, name), encoding="utf-8") as fh:
                found.append(parse_def_file(fh.read(), name))
    return tuple(sorted(found, key=lambda d: (_ORDER[d["kind"]], d["metadata"]["name"])))


def builtin_definitions(directory: str = DEFINITIONS_DIR) -> list[dict[str, Any]]:
    """Component definitions first, then traits, then policies; fresh copies (callers may change them)."""
    return copy.deepcopy(list(_load(directory)))
