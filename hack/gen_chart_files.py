"""Regenerate the chart's generated files from the code: helm/velashard/crds/ (velashard/apis/oam.py) and
helm/velashard/definitions/ (velashard/definitions/*.cue). tests/unit/test_helm_chart.py checks they match.

    python hack/gen_chart_files.py
"""

from __future__ import annotations

import os
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from velashard.apis.oam import CRDS  # noqa: E402
from velashard.core.builtins import builtin_definitions  # noqa: E402


def write(folder: str, source: str, objects: list[dict]) -> None:
    directory = os.path.join(ROOT, "helm", "velashard", folder)
    os.makedirs(directory, exist_ok=True)
    for name in os.listdir(directory):
        os.remove(os.path.join(directory, name))
    for obj in objects:
        with open(os.path.join(directory, f'{obj["metadata"]["name"]}.yaml'), "w") as fh:
            fh.write(f"# Generated from {source} (tests/unit/test_helm_chart.py checks they match).\n")
            fh.write(yaml.safe_dump(obj, sort_keys=False))


def main() -> int:
    write("crds", "velashard/apis/oam.py", CRDS)
    write("definitions", "velashard/definitions/*.cue", builtin_definitions())
    return 0


if __name__ == "__main__":
    sys.exit(main())
