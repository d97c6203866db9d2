"""Run KubeVela example Applications on velashard and report which reach `running`, printing one JSON object.

Starts `velashard apiserver --simulate-workloads` and a `velashard` controller as processes (hack/benchlib),
installs the built-in definitions, optionally applies other definitions over them (e.g. KubeVela's own
vela-templates/definitions/internal/{component,trait,policy}/*.cue, verbatim), then creates every Application
found in the example files (YAML files, and ```yaml blocks of Markdown files), each in its own namespace, and
waits for them.

    python hack/kubevela_examples.py --examples DIR [--defs DIR] [--timeout 90] [--show-failures]

The examples and KubeVela's definitions are third-party texts: keep them outside the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

import yaml

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hack.benchlib import Cluster  # noqa: E402
from velashard.apis.oam import APPLICATIONS, DEFINITION_RESOURCES  # noqa: E402
from velashard.cli.definitions import read_definition_files  # noqa: E402
from velashard.kube.apply import upsert  # noqa: E402
from velashard.kube.resources import NAMESPACES  # noqa: E402

_BLOCK = re.compile(r"```ya?ml\n(.*?)```", re.S)


def applications(root: str) -> list[tuple[str, dict]]:
    """(file, Application) for every Application document under `root`."""
    found = []
    for base, _dirs, files in sorted(os.walk(root)):
        for name in sorted(files):
            path = os.path.join(base, name)
            if not name.endswith((".yaml", ".yml", ".md")):
                continue
            text = open(path, encoding="utf-8", errors="replace").read()
            chunks = _BLOCK.findall(text) if name.endswith(".md") else [text]
            for chunk in chunks:
                try:
                    docs = list(yaml.safe_load_all(chunk))
                except yaml.YAMLError:
                    continue
                for doc in docs:
                    if isinstance(doc, dict) and doc.get("kind") == "Application" and isinstance(
                            doc.get("metadata"), dict) and doc["metadata"].get("name"):
                        found.append((os.path.relpath(path, root), doc))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", required=True, help="folder of example files")
    parser.add_argument("--defs", action="append", default=[], help="definition files or folders applied over "
                                                                     "the built-ins (repeat for several)")
    parser.add_argument("--timeout", type=float, default=90)
    parser.add_argument("--show-failures", action="store_true")
    args = parser.parse_args()
    apps = applications(args.examples)
    with Cluster() as cluster:
        kube = cluster.client
        applied = []
        for definition in read_definition_files(args.defs) if args.defs else []:
            definition["metadata"]["namespace"] = "vela-system"
            upsert(kube, DEFINITION_RESOURCES[definition["kind"]], definition)
            applied.append(definition["metadata"]["name"])
        cluster.start("controller")
        placed = []
        for i, (path, app) in enumerate(apps):
            ns = f"ex-{i}"
            kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            app = dict(app, metadata={**app["metadata"], "namespace": ns})
            app["metadata"].pop("resourceVersion", None)
            try:
                kube.create(APPLICATIONS, app)
                placed.append((path, ns, app["metadata"]["name"]))
            except Exception as err:  # a malformed example: counted as failing with the server's answer
                placed.append((path, ns, f"!{err}"))
        deadline = time.monotonic() + args.timeout
        statuses: dict = {}
        while time.monotonic() < deadline:
            statuses = {(ns, name): (kube.get(APPLICATIONS, name, ns).get("status") or {}) if not name.startswith("!")
                        else {"status": name} for _, ns, name in placed}
            if all(s.get("status") == "running" for s in statuses.values()):
                break
            time.sleep(1)
    failures = []
    for path, ns, name in placed:
        status = statuses.get((ns, name)) or {}
        if status.get("status") != "running":
            bad = [c for c in status.get("conditions") or [] if c.get("status") == "False"]
            failures.append({"file": path, "app": name, "phase": status.get("status"),
                             "why": "; ".join(f'{c["type"]}: {c.get("message", "")}' for c in bad)[:400]})
    print(json.dumps({"examples": len(placed), "running": len(placed) - len(failures), "definitions_applied":
                      len(applied), **({"failures": failures} if args.show_failures else {})}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
