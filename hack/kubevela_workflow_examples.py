"""Run KubeVela's example Applications and WorkflowRuns that use workflow steps on velashard, and print one JSON object: how many
there are, which are in scope, how many end as KubeVela documents (running, or a documented failure such as a
timeout), and why each other one does not.

    python hack/kubevela_workflow_examples.py --collect OUT        # copy the examples from the git mirrors
    python hack/kubevela_workflow_examples.py --examples OUT [--defs DIR] [--replacing-defs] [--timeout 360]

The examples are KubeVela's texts (its built-in steps' usage examples, its end-user workflow docs, its e2e test
data, and the workflow engine's examples and test data): keep them outside the repository (e.g. /tmp).
hack/workflow_corpus.py says which are in scope and what each needs. In scope are those that need nothing but
the Kubernetes API, and those that talk to HTTP or SMTP servers: their addresses are pointed at real servers on
the loopback interface (hack/loopback.py). Definitions found beside the examples are applied with them; those
named like a built-in one only with --replacing-defs; `--defs DIR` applies other definitions over the built-in
ones with `velashard def apply`, file by file (e.g. KubeVela's own
vela-templates/definitions/internal/workflowstep/*.cue, verbatim): those it refuses are reported.

Starts `velashard apiserver --simulate-workloads` and a `velashard` controller as processes (hack/benchlib),
or uses a running cluster with --kubeconfig (its controller and definitions as they are). Each example gets
a namespace of its own; a workflow suspended for a person's approval is resumed, as its text says to.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hack.loopback import HTTPRecorder, SMTPRecorder  # noqa: E402
from hack.workflow_corpus import (Endpoints, Example, load, outcome, prepare, resumable,  # noqa: E402
                                  workflow_status)
from velashard.apis.oam import APPLICATIONS, DEFINITION_RESOURCES, WORKFLOW_RUNS  # noqa: E402
from velashard.core.builtins import builtin_definitions  # noqa: E402
from velashard.kube import errors  # noqa: E402
from velashard.kube.apply import upsert  # noqa: E402
from velashard.kube.client import KubeClient  # noqa: E402
from velashard.kube.discovery import Discovery  # noqa: E402
from velashard.kube.resources import NAMESPACES  # noqa: E402

# Where the examples are in the mirrors of KubeVela's repositories (paths only: the texts are copied from there).
SOURCES = {
    "kubevela": ("kubevela+kubevela", ["references/docgen/def-doc/workflowstep", "docs/examples/workflow",
                                       "test/e2e-test/testdata/app", "test/e2e-test/testdata/definition",
                                       "test/e2e-test/config_workflow_test.go"]),
    "docs": ("kubevela+kubevela.github.io", ["docs/end-user/workflow", "docs/platform-engineers/workflow"]),
    "workflow": ("kubevela+workflow", ["examples", "e2e/test-data", "controllers/testdata"]),
}


def collect(out: str, mirrors: str) -> None:
    for folder, (repo, paths) in SOURCES.items():
        git = os.path.join(mirrors, repo, "repo")
        target = os.path.join(out, folder)
        os.makedirs(target, exist_ok=True)
        archive = subprocess.run(["git", "-C", git, "archive", "HEAD", *paths], check=True, capture_output=True)
        subprocess.run(["tar", "x", "-C", target], input=archive.stdout, check=True)


def answer(method: str, path: str, body: bytes) -> tuple[int, Any]:
    """What the services the examples call would answer, as far as the examples read it."""
    if "notfound" in path:
        return 404, {"message": "Not Found"}
    if path.startswith("/api.github.com/repos/"):
        return 200, {"full_name": path.split("/repos/", 1)[1], "stargazers_count": 4242}
    if path.startswith("/api.github.com/users/"):
        return 200, {"login": path.rsplit("/", 1)[1], "public_repos": 8}
    found = re.match(r"^/httpbin\.org/delay/(\d+)", path)
    if found:
        time.sleep(min(int(found.group(1)), 3))
    if path.startswith("/httpbin.org/"):
        return 200, {"url": path, "json": json.loads(body or b"null") if body[:1] in (b"{", b"[") else None}
    return 200, {"ok": True}


class Run:
    """One pass over the corpus against one cluster."""

    def __init__(self, kube: KubeClient, kubeconfig: str, http: HTTPRecorder, smtp_port: int):
        self.kube, self.kubeconfig = kube, kubeconfig
        self.end = Endpoints(http.url("").rstrip("/"), smtp_port)
        self.placed: list[tuple[Example, str, str]] = []  # example, namespace, problem creating it
        self.discovery = Discovery(kube)

    def create(self, obj: dict[str, Any]) -> None:
        api, kind = obj["apiVersion"], obj["kind"]
        res = self.discovery.for_kind(api, kind)
        namespace = obj["metadata"].get("namespace") if res.namespaced else None
        if namespace:
            self.namespace(namespace)
        upsert(self.kube, res, obj)

    def namespace(self, name: str) -> None:
        try:
            self.kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        except (errors.AlreadyExists, errors.Conflict):
            pass

    def place(self, examples: list[Example], settle: float = 90) -> None:
        """The objects every example needs first (Applications among them running, as the texts take them to
        be), then the examples' Applications."""
        prepared = []
        fixtures: list[tuple[str, str]] = []
        for i, ex in enumerate(examples):
            ns = f"wf-ex-{i}"
            self.namespace(ns)
            app, objects = prepare(ex, ns, self.end)
            try:
                for obj in objects:
                    self.create(obj)
                prepared.append((ex, ns, app, ""))
            except Exception as err:  # a malformed example: counted as failing, with the server's answer
                prepared.append((ex, ns, app, f"refused: {err}"))
            fixtures += [(o["metadata"]["name"], o["metadata"]["namespace"]) for o in objects
                         if o["kind"] == "Application"]
        deadline = time.monotonic() + settle
        while fixtures and time.monotonic() < deadline and not all(
                (self.kube.get(APPLICATIONS, n, s).get("status") or {}).get("status") == "running"
                for n, s in fixtures):
            time.sleep(1)
        for ex, ns, app, problem in prepared:
            if not problem:
                try:
                    self.kube.create(WORKFLOW_RUNS if ex.is_run else APPLICATIONS, app)
                except Exception as err:
                    problem = f"refused: {err}"
            self.placed.append((ex, ns, problem))

    def wait(self, timeout: float) -> dict[str, tuple[bool, str]]:
        """Per example: (ended as documented, why not)."""
        deadline = time.monotonic() + timeout
        results: dict[str, tuple[bool, str]] = {}
        while True:
            pending = False
            for ex, ns, problem in self.placed:
                if problem:
                    results[ex.source] = (False, problem)
                    continue
                status = self.kube.get(WORKFLOW_RUNS if ex.is_run else APPLICATIONS, ex.name, ns).get("status") or {}
                if resumable(ex, status):
                    subprocess.run([sys.executable, "-m", "velashard.cli.main", "--kubeconfig", self.kubeconfig,
                                    "workflow", "resume", ex.name, "-n", ns, "--type",
                                    "workflow" if ex.is_run else "app"], capture_output=True, check=False)
                done, why = outcome(ex, status)
                results[ex.source] = (done and not why, "; ".join(filter(None, [why, _conditions(
                    status, workflow_status(ex, status))])))
                pending = pending or not done
            if not pending or time.monotonic() > deadline:
                return results
            time.sleep(2)


def _conditions(status: dict[str, Any], workflow: dict[str, Any]) -> str:
    bad = [c for c in status.get("conditions") or [] if c.get("status") == "False"]
    steps = [f'{s.get("name")}: {s.get("phase")} {s.get("message", "")}'.strip()
             for s in workflow.get("steps") or [] if s.get("phase") not in ("succeeded",)]
    return "; ".join([f'{c["type"]}: {c.get("message", "")}' for c in bad] + steps)[:500]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collect", metavar="OUT", help="copy the examples from the git mirrors into OUT, and stop")
    parser.add_argument("--mirrors", default="/work/.mirror", help="folder of the git mirrors (for --collect)")
    parser.add_argument("--examples", help="folder of example files (what --collect made)")
    parser.add_argument("--defs", action="append", default=[], help="definition files or folders applied over "
                                                                     "the built-ins (repeat for several)")
    parser.add_argument("--replacing-defs", action="store_true",
                        help="also apply the definitions beside the examples that replace built-in ones")
    parser.add_argument("--kubeconfig", help="use this running cluster instead of starting one")
    parser.add_argument("--timeout", type=float, default=360, help="seconds to wait for the examples to end")
    args = parser.parse_args()
    if args.collect:
        collect(args.collect, args.mirrors)
        return 0
    if not args.examples:
        parser.error("--examples or --collect is required")
    corpus = load(args.examples, {d["metadata"]["name"] for d in builtin_definitions()})
    in_scope = [ex for ex in corpus.examples if ex.scope]
    definitions = corpus.definitions + (corpus.replacing if args.replacing_defs else [])
    with HTTPRecorder(answer) as http, SMTPRecorder() as smtp:
        if args.kubeconfig:
            results, refused = run(KubeClient.from_kubeconfig(args.kubeconfig, shard_id="examples"),
                                   args.kubeconfig, None, definitions, args.defs, in_scope, http, smtp.port,
                                   args.timeout)
        else:
            from hack.benchlib import Cluster
            with Cluster() as cluster:
                results, refused = run(cluster.client, cluster.kubeconfig, cluster, definitions, args.defs,
                                       in_scope, http, smtp.port, args.timeout)
    summary = report(corpus.examples, results, len(http.requests), len(smtp.messages))
    summary["definitions"] = {"beside_the_examples": len(definitions), "refused_by_def_apply": refused}
    print(json.dumps(summary, indent=2))
    return 0


def run(kube: KubeClient, kubeconfig: str, cluster: Any, definitions: list[dict[str, Any]], defs: list[str],
        examples: list[Example], http: HTTPRecorder, smtp_port: int, timeout: float) -> tuple[dict, dict[str, str]]:
    """Per example (ended as documented, why not); and the definition files `velashard def apply` refused."""
    for definition in definitions:
        definition["metadata"]["namespace"] = "vela-system"
        upsert(kube, DEFINITION_RESOURCES[definition["kind"]], definition)
    refused = {}
    for path in definition_files(defs):
        done = subprocess.run([sys.executable, "-m", "velashard.cli.main", "def", "apply", "--kubeconfig", kubeconfig,
                               path], capture_output=True, text=True, check=False)
        if done.returncode:
            refused[path] = done.stderr.strip()
    if cluster is not None:  # the loopback servers stand for the outside: the egress policy must allow them
        cluster.start("controller", f"--workflow-http-allow=127.0.0.1:{http.port},127.0.0.1:{smtp_port}")
    runner = Run(kube, kubeconfig, http, smtp_port)
    runner.place(examples)
    return runner.wait(timeout), refused


def definition_files(paths: list[str]) -> list[str]:
    files = []
    for path in paths:
        if os.path.isdir(path):
            files += [os.path.join(path, n) for n in sorted(os.listdir(path)) if n.endswith((".cue", ".yaml", ".yml"))]
        else:
            files.append(path)
    return files


def report(examples: list[Example], results: dict[str, tuple[bool, str]], requests: int,
           mails: int) -> dict[str, Any]:
    counts: dict[str, list[int]] = {}
    failures = []
    for ex in examples:
        if not ex.scope:
            continue
        ok, why = results.get(ex.source, (False, "not run"))
        tally = counts.setdefault(ex.scope, [0, 0])
        tally[0] += ok
        tally[1] += 1
        if not ok:
            failures.append({"example": ex.source, "scope": ex.scope, "why": why})
    return {
        "examples": len(examples), "in_scope": sum(n for _, n in counts.values()),
        "as_documented": sum(k for k, _ in counts.values()),
        "by_scope": {scope: f"{k}/{n}" for scope, (k, n) in sorted(counts.items())},
        "http_requests_received": requests, "mails_received": mails,
        "failures": failures,
        "out_of_scope": [{"example": ex.source, "why": ex.reason} for ex in examples if not ex.scope],
    }


if __name__ == "__main__":
    sys.exit(main())
