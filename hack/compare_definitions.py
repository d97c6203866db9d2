"""Compare the parameters of velashard's built-in definitions with another set of definitions (KubeVela's own
`vela def` files, kept outside the repository), as `velashard def show` reads them: for every definition both
have, every parameter table (the top level and each nested struct) and every parameter in it, by name, type,
whether it is required and its default. Descriptions are left out: ours are written in our own words.

    python hack/compare_definitions.py --theirs DIR [--type workflow-step] [--ours DIR]

Prints one JSON object: the counts, and each difference (definition, table, parameter, ours, theirs).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from velashard.cli.definitions import read_definition_files  # noqa: E402
from velashard.core.builtins import DEFINITIONS_DIR, builtin_definitions  # noqa: E402
from velashard.core.deffile import TYPES  # noqa: E402
from velashard.core.describe import Table, parameter_tables  # noqa: E402
from velashard.cue.errors import CueError  # noqa: E402

Rows = dict[str, tuple[str, bool, str]]


def tables_of(definition: dict[str, Any]) -> dict[str, Rows] | str:
    """{table path: {parameter: (type, required, default)}}, or why the parameters cannot be read."""
    try:
        tables: list[Table] = parameter_tables(definition)
    except CueError as err:
        return f"parameters unreadable: {err}"
    return {t.path: {r.name: (r.type, r.required, r.default) for r in t.rows} for t in tables}


def compare(ours: dict[str, Any], theirs: dict[str, Any]) -> tuple[int, int, int, int, list[dict[str, Any]]]:
    """(tables, identical tables, parameters, identical parameters, differences) of one definition."""
    mine, other = tables_of(ours), tables_of(theirs)
    name = ours["metadata"]["name"]
    if isinstance(mine, str) or isinstance(other, str):
        return 1, 0, 0, 0, [{"definition": name, "ours": mine if isinstance(mine, str) else "readable",
                             "theirs": other if isinstance(other, str) else "readable"}]
    diffs = []
    same_tables = same_rows = rows = 0
    for path in sorted(set(mine) | set(other), key=lambda p: (p.count("."), p)):
        a, b = mine.get(path), other.get(path)
        if a is None or b is None:
            diffs.append({"definition": name, "table": path or "(top)", "ours": "present" if a else "absent",
                          "theirs": "present" if b else "absent"})
            rows += len(a or b or {})
            continue
        identical = True
        for param in sorted(set(a) | set(b)):
            rows += 1
            if a.get(param) == b.get(param):
                same_rows += 1
                continue
            identical = False
            diffs.append({"definition": name, "table": path or "(top)", "parameter": param,
                          "ours": _shown(a.get(param)), "theirs": _shown(b.get(param))})
        same_tables += identical
    return len(set(mine) | set(other)), same_tables, rows, same_rows, diffs


def _shown(row: tuple[str, bool, str] | None) -> str:
    if row is None:
        return "absent"
    kind, required, default = row
    return f"{kind}, {'required' if required else 'optional'}" + (f", default {default}" if default else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--theirs", required=True, help="folder of the definitions to compare with (.cue or .yaml)")
    parser.add_argument("--ours", default=DEFINITIONS_DIR, help="folder of our definitions (the built-in catalog)")
    parser.add_argument("--type", choices=tuple(TYPES.values()), help="only this kind of definition")
    args = parser.parse_args()
    ours = {d["metadata"]["name"]: d for d in builtin_definitions(os.path.abspath(args.ours))
            if args.type in (None, TYPES[d["kind"]])}
    theirs = {d["metadata"]["name"]: d for d in read_definition_files([args.theirs])
              if args.type in (None, TYPES[d["kind"]])}
    totals = [0, 0, 0, 0]
    differences: list[dict[str, Any]] = []
    for name in sorted(set(ours) & set(theirs)):
        *counts, diffs = compare(ours[name], theirs[name])
        totals = [t + c for t, c in zip(totals, counts)]
        differences.extend(diffs)
    print(json.dumps({
        "definitions_compared": len(set(ours) & set(theirs)), "only_ours": sorted(set(ours) - set(theirs)),
        "only_theirs": sorted(set(theirs) - set(ours)),
        "tables_identical": f"{totals[1]}/{totals[0]}", "parameters_identical": f"{totals[3]}/{totals[2]}",
        "differences": differences}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
