"""The example corpus of hack/kubevela_workflow_examples.py: which third-party example Applications and
WorkflowRuns (with the Workflow templates they refer to) there are in a folder, which of them velashard is meant to run, what each
needs besides the Kubernetes API, and what its documentation says it ends with.

Pure functions over parsed documents; the folder is read once by `load`. The examples themselves stay outside
the repository: here are only the rules (and, where an example's text says so, the objects it expects to exist
and the outcome it documents).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

import yaml

from velashard.core.deffile import KINDS, DefFileError, parse_def_file
from velashard.durations import go_duration

DEFINITION_KINDS = set(KINDS.values())
_YAML_BLOCK = re.compile(r"```ya?ml\n(.*?)```", re.S)
_CUE_BLOCK = re.compile(r"```cue\n(.*?)```", re.S)
_GO_RAW = re.compile(r"`(\s*(?:apiVersion|kind): [^`]*?)`", re.S)
_PLACEHOLDER = re.compile(r"^<[^>]*>?$")  # `<your cluster name>` (one of KubeVela's lacks the `>`)

HTTP_STEPS = ("notification", "webhook", "request")
# Built-in steps whose examples need more than the Kubernetes API and loopback HTTP/SMTP servers.
NEEDS = {
    "apply-terraform-config": "the Terraform controller",
    "apply-terraform-provider": "the Terraform controller",
    "deploy-cloud-resource": "Terraform cloud resources and remote clusters",
    "share-cloud-resource": "Terraform cloud resources and remote clusters",
    "generate-jdbc-connection": "a cloud database's connection Secret (alibaba-rds)",
    "build-push-image": "a kubelet that runs kaniko, and an image registry",
    "vela-cli": "a kubelet that runs the vela CLI image",
    "check-metrics": "a Prometheus server with the ingress controller's metrics",
    "addon-operation": "a kubelet that runs the vela CLI image (it enables addons)",
    "chat-gpt": "the OpenAI API (its address is written in the definition: no loopback server can stand for it)",
}


@dataclass
class Example:
    source: str  # relative path, and the document's name in it
    app: dict[str, Any]  # the Application or WorkflowRun to create
    copies: list[str] = field(default_factory=list)  # other sources of the same Application
    objects: list[dict[str, Any]] = field(default_factory=list)  # other objects the same YAML file brings
    scope: str = ""  # "kubernetes", "http", "custom-definition", or "" when out of scope
    reason: str = ""  # why it is out of scope
    expect: dict[str, str] = field(default_factory=dict)  # step -> "phase" or "phase:reason"; {} = running

    @property
    def name(self) -> str:
        return self.app["metadata"]["name"]

    @property
    def is_run(self) -> bool:
        return self.app.get("kind") == "WorkflowRun"


@dataclass
class Corpus:
    examples: list[Example]
    # X-Definitions found beside the examples: those named like no built-in one, the last of each name (applied
    # with the examples), and those that replace a built-in one (applied only when asked)
    definitions: list[dict[str, Any]]
    replacing: list[dict[str, Any]]


# --- reading the folder ----------------------------------------------------------------------------------

def _chunks(path: str, text: str) -> Iterator[tuple[str, str]]:
    """(kind of chunk, text) of a file: YAML documents, and vela-def CUE blocks of Markdown."""
    if path.endswith(".md"):
        yield from (("yaml", c) for c in _YAML_BLOCK.findall(text))
        yield from (("cue", c) for c in _CUE_BLOCK.findall(text))
    elif path.endswith(".go"):
        yield from (("yaml", c) for c in _GO_RAW.findall(text))
    else:
        yield "yaml", text


def _documents(root: str) -> Iterator[tuple[str, str, list[Any]]]:
    for base, _dirs, files in sorted(os.walk(root)):
        for name in sorted(files):
            if not name.endswith((".yaml", ".yml", ".md", ".go")):
                continue
            path = os.path.join(base, name)
            rel = os.path.relpath(path, root)
            text = open(path, encoding="utf-8", errors="replace").read()
            for kind, chunk in _chunks(path, text):
                if kind == "cue":
                    try:
                        yield rel, kind, [parse_def_file(chunk, rel)]
                    except DefFileError:
                        pass  # a fragment of a definition, not a whole one
                    continue
                try:
                    docs = [d for d in yaml.safe_load_all(chunk) if isinstance(d, dict)]
                except yaml.YAMLError:
                    continue
                yield rel, kind, docs


def as_runnable(doc: dict[str, Any], templates: dict[str, dict[str, Any]]) -> dict[str, Any] | str:
    """An Application with workflow steps, or a WorkflowRun (with the Workflow it refers to among the examples'
    templates); else why not."""
    if doc.get("kind") == "Application":
        app = copy.deepcopy(doc)
        app.setdefault("spec", {}).setdefault("components", [])
        return app
    ref = (doc.get("spec") or {}).get("workflowRef")
    if ref and not (doc.get("spec") or {}).get("workflowSpec") and ref not in templates:
        return f"a WorkflowRun of the Workflow {ref}, which is not among the examples"
    run = copy.deepcopy(doc)
    run.setdefault("apiVersion", "core.oam.dev/v1alpha1")
    return run


def run_template(app: dict[str, Any], objects: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The Workflow a WorkflowRun refers to, among the objects created with it."""
    ref = (app.get("spec") or {}).get("workflowRef") if app.get("kind") == "WorkflowRun" else None
    return next((o for o in objects if o.get("kind") == "Workflow" and o["metadata"]["name"] == ref), None)


def load(root: str, builtin_names: set[str]) -> Corpus:
    """Every example with workflow steps under `root`, deduplicated by content, with the definitions beside
    them; classified against the built-in definitions' names."""
    examples: list[Example] = []
    definitions: list[tuple[str, dict[str, Any]]] = []
    seen: dict[str, Example] = {}
    documents = list(_documents(root))
    templates = {d["metadata"]["name"]: d for _, _, docs in documents for d in docs
                 if d.get("kind") == "Workflow" and isinstance(d.get("metadata"), dict) and d["metadata"].get("name")}
    for rel, kind, docs in documents:
        apps = [d for d in docs if d.get("kind") in ("Application", "WorkflowRun")
                and isinstance(d.get("metadata"), dict) and d["metadata"].get("name")]
        definitions += [(rel, d) for d in docs
                        if d.get("kind") in DEFINITION_KINDS and (d.get("metadata") or {}).get("name")]
        others = [d for d in docs if kind == "yaml" and not rel.endswith((".md", ".go"))
                  and d.get("kind") not in DEFINITION_KINDS | {"Application", "WorkflowRun", "Workflow"}
                  and d.get("apiVersion") and d.get("kind")]
        for doc in apps:
            spec = doc.get("spec") or {}
            steps = (spec.get("workflow") or {}).get("steps") or (spec.get("workflowSpec") or {}).get("steps")
            if not steps and not spec.get("workflowRef"):
                continue  # not a workflow example
            app = as_runnable(doc, templates)
            source = f'{rel}#{doc["metadata"]["name"]}'
            if isinstance(app, str):
                examples.append(Example(source, {"metadata": dict(doc["metadata"])}, reason=app))
                continue
            key = _fingerprint(app)
            if key in seen:
                seen[key].copies.append(source)
                if others and not [o for o in seen[key].objects if o.get("kind") != "Workflow"]:
                    seen[key].objects += copy.deepcopy(others)  # a copy in a YAML file brings what it needs
                continue
            objects = copy.deepcopy(others)
            if spec.get("workflowRef") and not spec.get("workflowSpec"):
                objects.append(copy.deepcopy(templates[spec["workflowRef"]]))
            seen[key] = Example(source, app, objects=objects)
            examples.append(seen[key])
    # a later definition of a name replaces an earlier one, as applying them in order would (a text that builds
    # a definition up shows the whole one last)
    custom: dict[str, tuple[str, dict[str, Any]]] = {}
    for rel, d in definitions:
        if d["metadata"]["name"] not in builtin_names:
            custom[d["metadata"]["name"]] = (rel, d)
    used = {s.get("type") for ex in examples for s in steps_of(ex.app, ex.objects)}
    for name, (steps, expect) in DEFINITION_APPS.items():
        if name in custom and name not in used:
            rel = custom[name][0]
            # the workflow engine's tests run these in WorkflowRuns (built in Go): one is written here per definition
            app = {"apiVersion": "core.oam.dev/v1alpha1", "kind": "WorkflowRun", "metadata": {"name": f"run-{name}"},
                   "spec": {"workflowSpec": {"steps": copy.deepcopy(steps)}}}
            examples.append(Example(f"{rel}#{name} (a WorkflowRun made here for it)", app, expect=dict(expect)))
    for ex in examples:
        if not ex.reason:
            classify(ex, builtin_names, {n: d for n, (rel, d) in custom.items() if _beside(rel, ex.source)})
    replacing: dict[str, dict[str, Any]] = {}
    for _, d in definitions:
        if d["metadata"]["name"] in builtin_names:
            replacing[d["metadata"]["name"]] = d
    return Corpus(examples, [d for _, d in custom.values()], list(replacing.values()))


def _beside(definition: str, example: str) -> bool:
    """Whether a definition came with an example: from its folder or one above it (a `definition(s)` folder
    counts as the folder it is in)."""
    home = os.path.dirname(definition)
    if os.path.basename(home) in ("definition", "definitions"):
        home = os.path.dirname(home)
    where = os.path.dirname(example.split("#")[0])
    return where == home or where.startswith(home + "/")


def _fingerprint(app: dict[str, Any]) -> str:
    body = {"kind": app.get("kind"), "name": app["metadata"]["name"], "spec": app.get("spec")}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


# --- what an example needs --------------------------------------------------------------------------------

def step_lists(app: dict[str, Any], objects: list[dict[str, Any]] | None = None) -> list[list[Any]]:
    """The lists that hold an example's top-level steps: an Application's, a WorkflowRun's own, or those of the
    Workflow it refers to (among `objects`)."""
    spec = app.get("spec") or {}
    if app.get("kind") != "WorkflowRun":
        found = (spec.get("workflow") or {}).get("steps")
    elif spec.get("workflowSpec") is not None:
        found = (spec.get("workflowSpec") or {}).get("steps")
    else:
        found = (run_template(app, objects or []) or {}).get("steps")
    return [found] if isinstance(found, list) else []


def steps_of(app: dict[str, Any], objects: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Every step, sub-steps included."""
    found = []
    for steps in step_lists(app, objects):
        for step in steps:
            if isinstance(step, dict):
                found.append(step)
                found.extend(s for s in step.get("subSteps") or [] if isinstance(s, dict))
    return found


def _remote(app: dict[str, Any], objects: list[dict[str, Any]]) -> str:
    for policy in (app.get("spec") or {}).get("policies") or []:
        props = policy.get("properties") or {}
        if policy.get("type") == "topology":
            clusters = set(props.get("clusters") or [])
            if clusters - {"local"} or props.get("clusterLabelSelector") or props.get("clusterSelector"):
                return f'policy {policy.get("name")} places components in remote clusters'
        if policy.get("type") == "env-binding":
            for env in props.get("envs") or []:
                cluster = ((env.get("placement") or {}).get("clusterSelector") or {})
                if cluster.get("labels") or cluster.get("name") not in (None, "", "local"):
                    return f'policy {policy.get("name")} places environment {env.get("name")} in another cluster'
    for step in steps_of(app, objects):
        cluster = (step.get("properties") or {}).get("cluster")
        if isinstance(cluster, str) and cluster not in ("", "local") and not _PLACEHOLDER.match(cluster):
            return f'step {step.get("name")} writes to cluster {cluster}'
    return ""


def classify(ex: Example, builtin: set[str], custom: dict[str, dict[str, Any]]) -> None:
    """Sets scope (or reason) and the documented outcome of one example."""
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", ex.name):
        ex.reason = f"its name {ex.name} is not a valid object name: Kubernetes refuses it (under KubeVela too)"
        return
    known = KNOWN.get(ex.name, {}) if _known_source(ex) else {}
    step_defs = {n for n, d in custom.items() if d["kind"] == "WorkflowStepDefinition"}
    kinds = {"ComponentDefinition": "component", "TraitDefinition": "trait", "PolicyDefinition": "policy"}
    spec = ex.app.get("spec") or {}
    used = [("step", s.get("type")) for s in steps_of(ex.app, ex.objects)]
    used += [("component", c.get("type")) for c in spec.get("components") or []]
    used += [("trait", t.get("type")) for c in spec.get("components") or [] for t in c.get("traits") or []]
    used += [("policy", p.get("type")) for p in spec.get("policies") or []]
    available = {(kinds.get(d["kind"], "step"), n) for n, d in custom.items()} | {("step", "step-group")}
    for what, name in used:
        if (what, name) not in available and name not in builtin:
            ex.reason = (f"{what} type {name} is neither one of KubeVela's built-in definitions in velashard's "
                         "catalog nor defined beside the example")
            return
    if any(isinstance(o, dict) and not o.get("valueFrom") for s in steps_of(ex.app, ex.objects)
           for o in s.get("outputs") or []):
        ex.reason = "an output without valueFrom (KubeVela's Application CRD requires it: KubeVela refuses it too)"
        return
    for _, name in used:
        if name in NEEDS and name not in step_defs:
            ex.reason = f"step type {name} needs {NEEDS[name]}"
            return
    ex.reason = known.get("needs", "") or _remote(ex.app, ex.objects)
    if ex.reason:
        return
    types = {s.get("type") for s in steps_of(ex.app, ex.objects)}
    ex.scope = "custom-definition" if types & step_defs else "http" if types & set(HTTP_STEPS) else "kubernetes"
    ex.expect = dict(known.get("expect", ex.expect))


# --- what the examples' texts say ------------------------------------------------------------------------
# Per application name (checked against the folder it comes from): what the documentation says must exist
# before it runs, what it ends with when that is not `running`, and what else it needs.

def _configmap(name: str, namespace: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
            "data": data}


KNOWN: dict[str, dict[str, Any]] = {
    # "If the second step is not resumed in 5s, the suspend step fails with the reason Timeout."
    "app-with-timeout": {"where": "app-with-timeout", "expect": {"apply": "succeeded", "suspend": "failed:Timeout"}},
    "timeout-example": {"where": "timeout.md", "expect": {
        "apply-comp1": "succeeded", "suspend": "failed:Timeout", "apply-comp2": "skipped"}},
    "err-with-no-if": {"where": "if-condition.md", "expect": {"apply-err": "failed", "apply-comp": "skipped"}},
    "err-with-always": {"where": "if-condition.md",
                        "needs": "needs a kubelet that fails to pull the image 'invalid' (the step's documented "
                                 "timeout)"},
    "if-always-with-err": {"where": "app-with-if", "expect": {"apply-err-comp": "failed",
                                                              "notification": "succeeded"}},
    "if-timeout": {"where": "app-with-if", "expect": {"suspend": "failed:Timeout", "suspend2": "failed:Timeout"}},
    "if-input": {"where": "app-with-if", "expect": {"suspend": "failed:Timeout", "notification": "succeeded"}},
    # The request to a repository that does not exist fails; only the step for failures notifies.
    "request-http": {"where": "notfound", "expect": {"request": "failed", "notification": "skipped",
                                                     "failed-notification": "succeeded"}},
    "failed-app": {"where": "e2e-test", "needs": "nothing it can succeed with: KubeVela's e2e test checks that a "
                                                 "step naming a missing component fails"},
    "server-with-pvc": {"where": "apply-object.eg.md", "needs": "names a component express-serve, which it does not "
                                                                "have (a typo: KubeVela refuses it too)"},
}
# Step definitions of the workflow engine's tests that come without an application (its tests build workflow runs
# in Go): one written here per definition, with the outcome those tests check.
_SLEEPER = {"cmd": ["sleep", "1000"], "image": "busybox"}
DEFINITION_APPS: dict[str, tuple[list[dict[str, Any]], dict[str, str]]] = {
    "test-apply": ([{"name": "step1", "type": "test-apply", "properties": _SLEEPER}], {}),
    "suspend-and-deploy": ([{"name": "step1", "type": "suspend-and-deploy", "properties": _SLEEPER}], {}),
    "multi-suspend": ([{"name": "step1", "type": "multi-suspend"}], {}),  # resumed twice
    # a template that does not compile fails its step (after the retries); the next one is skipped
    "failed-render": ([{"name": "step1", "type": "failed-render", "properties": _SLEEPER},
                       {"name": "step2", "type": "test-apply", "properties": _SLEEPER}],
                      {"step1": "failed", "step2": "skipped"}),
    "save-process-context": ([
        {"name": "group1", "type": "step-group", "subSteps": [
            {"name": "step1", "type": "save-process-context", "properties": {"name": "process-context-step1"}},
            {"name": "step2", "type": "save-process-context", "properties": {"name": "process-context-step2"}}]},
        {"name": "step3", "type": "save-process-context", "properties": {"name": "process-context-step3"}}], {}),
}
# Objects the examples' texts take as existing, by application name: (where, objects).
FIXTURES: dict[str, tuple[str, list[dict[str, Any]]]] = {
    # a config (KubeVela's: a labelled Secret of the app's namespace) for the step that only reads it
    "test-config": ("read-config.eg.md", [{
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "test", "labels": {
            "config.oam.dev/catalog": "velacore-config", "config.oam.dev/type": ""}},
        "type": "Opaque", "stringData": {"input-properties": json.dumps({"key1": "value1"})}}]),
    "read-object": ("read-object", [_configmap("my-cm-name", "default", {"cpu": "500m", "memory": "256Mi"})]),
    "input-output": ("inputs-outputs.md", [{
        "apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
        "metadata": {"name": "depends", "namespace": "default"}, "spec": {"components": []}}]),
    "first-vela-workflow": ("depends-on-app", [_configmap("another-app", "default", {"application": yaml.safe_dump({
        "apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
        "metadata": {"name": "another-app", "namespace": "default"}, "spec": {"components": []}})})]),
}


def _from(ex: Example, where: str) -> bool:
    return bool(where) and any(where in s for s in [ex.source, *ex.copies])


def _known_source(ex: Example) -> bool:
    where = KNOWN.get(ex.name, {}).get("where", "")
    return _from(ex, where) or (where == "notfound" and "notfound" in json.dumps(ex.app))


def fixtures(ex: Example) -> list[dict[str, Any]]:
    where, objects = FIXTURES.get(ex.name, ("", []))
    return copy.deepcopy(objects) if _from(ex, where) else []


# --- making an example runnable here ---------------------------------------------------------------------

@dataclass
class Endpoints:
    """Where the loopback servers listen, and the test value for every secret an example leaves to the reader."""
    http: str  # http://127.0.0.1:<port>
    smtp_port: int


def _secret(name: str, namespace: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
            "stringData": data}


def _loopback_url(end: Endpoints, namespace: str, step: str, url: Any) -> str:
    """The loopback address standing for a step's URL: a placeholder becomes /hook/<namespace>/<step>; a real
    address keeps its host and path under the loopback server, which answers as that service would."""
    if isinstance(url, str) and re.match(r"^https?://", url):
        return f'{end.http}/{re.sub(r"^https?://", "", url)}'
    return f"{end.http}/hook/{namespace}/{step}"


def prepare(ex: Example, namespace: str, end: Endpoints) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The Application to create in `namespace`, and the objects to create before it: what its file brings,
    what its text takes as existing, and the Secrets its secretRefs name (holding loopback addresses)."""
    app = copy.deepcopy(ex.app)
    app["metadata"] = {k: v for k, v in app["metadata"].items() if k not in ("resourceVersion", "uid")}
    written = app["metadata"].get("namespace") or "default"
    app["metadata"]["namespace"] = namespace
    brought = copy.deepcopy(ex.objects)
    for obj in brought:
        meta = obj.setdefault("metadata", {})
        # a WorkflowRun's objects (and any run's template) go where it goes when they were beside it
        if obj.get("kind") == "Workflow" or (ex.is_run and meta.get("namespace", written) == written):
            meta["namespace"] = namespace
    objects = [*brought, *fixtures(ex)]
    for obj in objects:
        obj.setdefault("metadata", {}).setdefault("namespace", namespace)
    for step in steps_of(app, objects):
        props = step.get("properties")
        if not isinstance(props, dict):
            continue
        name = step.get("name") or step.get("type", "step")
        if isinstance(props.get("cluster"), str) and _PLACEHOLDER.match(props["cluster"]):
            props["cluster"] = ""
        if step.get("type") == "request":
            props["url"] = _loopback_url(end, namespace, name, props.get("url"))
            for ref in props.get("headersFromSecret") or []:
                objects.append(_secret(ref["secret"], namespace, {ref["key"]: "Bearer test-token"}))
        channels = [props.get(c) for c in ("dingding", "lark", "slack")] if step.get("type") == "notification" \
            else [props] if step.get("type") == "webhook" else []
        for channel in [c for c in channels if isinstance(c, dict) and isinstance(c.get("url"), dict)]:
            url = _loopback_url(end, namespace, name, None)
            ref = channel["url"].get("secretRef")
            if isinstance(ref, dict):
                objects.append(_secret(ref["name"], namespace, {ref["key"]: url}))
            else:
                channel["url"] = {"value": url}
        mail = props.get("email") if step.get("type") == "notification" else None
        if isinstance(mail, dict):
            sender = mail.setdefault("from", {})
            sender.update({"host": "127.0.0.1", "port": end.smtp_port})
            for key, value in (("address", "workflow@example.com"), ("alias", "workflow")):
                if _PLACEHOLDER.match(str(sender.get(key, "<>"))):
                    sender[key] = value
            ref = (sender.get("password") or {}).get("secretRef")
            if isinstance(ref, dict):
                objects.append(_secret(ref["name"], namespace, {ref["key"]: "test-password"}))
            else:
                sender["password"] = {"value": "test-password"}
    return app, objects


def workflow_status(ex: Example, status: dict[str, Any]) -> dict[str, Any]:
    """The workflow's status: an Application's status.workflow, a WorkflowRun's status itself."""
    return status if ex.is_run else status.get("workflow") or {}


def _short(timeout: Any) -> bool:
    """A timeout an example means to reach (seconds, minutes), not one that bounds a person's wait (a day)."""
    if not timeout:
        return False
    try:
        return go_duration(timeout) < 600
    except ValueError:
        return True


def resumable(ex: Example, status: dict[str, Any]) -> bool:
    """Whether the workflow waits for a person to resume it: suspended on a step with neither a duration (it
    resumes by itself) nor a short timeout (the examples with one document that it times out)."""
    workflow = workflow_status(ex, status)
    if not workflow.get("suspend"):
        return False
    specs = {s.get("name"): s for s in steps_of(ex.app, ex.objects)}
    for step in workflow.get("steps") or []:
        for s in [step, *(step.get("subSteps") or [])]:
            if s.get("phase") != "suspending":
                continue
            spec = specs.get(s.get("name")) or {}
            if (spec.get("properties") or {}).get("duration") or _short(spec.get("timeout")):
                return False
            return True
    return False


def outcome(ex: Example, status: dict[str, Any]) -> tuple[bool, str]:
    """(done, why not as expected): done once the workflow has finished; as expected when it ends as its text
    says (the listed steps' phases and reasons), or, with nothing listed, when the application runs (a WorkflowRun:
    when it succeeded)."""
    workflow = workflow_status(ex, status)
    phases = {}
    for step in workflow.get("steps") or []:
        for s in [step, *(step.get("subSteps") or [])]:
            phases[s.get("name")] = s.get("phase", "") + (f':{s["reason"]}' if s.get("reason") else "")
    what = "workflow run" if ex.is_run else "application"
    if not workflow.get("finished"):
        return False, f'workflow not finished ({what} {status.get("status") or "not reconciled"})'
    if not ex.expect:
        ok = status.get("status") == ("succeeded" if ex.is_run else "running")
        return True, "" if ok else f'{what} {status.get("status")}'
    wrong = [f"{step}: {phases.get(step, 'absent')} (documented: {want})" for step, want in ex.expect.items()
             if not (phases.get(step) == want or phases.get(step, "").split(":")[0] == want)]
    return True, "; ".join(wrong)
