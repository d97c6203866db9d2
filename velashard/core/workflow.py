"""The application workflow, KubeVela's way: which steps run, in what order, and what the app's phase is.

Steps run one after another (StepByStep) or, inside a step-group and between steps with `dependsOn`, as soon
as what they depend on is done (DAG). A step may carry `if` (an expression over earlier steps' status and the
inputs), `timeout` (a Go duration), `inputs` (variables put into its properties) and `outputs` (values taken
from what it produced). Evaluation is a pure function of the steps, the previous workflow status, the
variables, the time and an `Actions` edge that does the step's I/O.
"""

from __future__ import annotations

import copy
import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol

from jinja2 import TemplateError

from velashard.core.expressions import compiled
from velashard.core.workflow_spec import StepSpec, parse_duration

MODE = "StepByStep-DAG"  # KubeVela's default: steps one by one, sub-steps as a DAG
DONE_PHASES = ("succeeded", "failed", "skipped")


class StepError(Exception):
    """A step failed for good (bad input, apply refused); its message goes into the step's status."""

    def __init__(self, message: str, reason: str = "Failed"):
        super().__init__(message)
        self.reason = reason


class Actions(Protocol):
    """The I/O a step needs; the controller provides it, tests give an in-memory one."""

    def apply_components(self, names: list[str]) -> tuple[bool, str]:
        """Apply the components; (all healthy, what is still awaited). Raises StepError."""

    def apply_object(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or update an object in the app's namespace unless it names one; returns it live."""

    def read_object(self, api_version: str, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        """The live object, or None."""

    def app_phase(self, namespace: str, name: str) -> str | None:
        """Another application's status.status, or None when it does not exist."""


@dataclass
class Evaluation:
    """The outcome of one pass: the new workflow status, the variables, and whether to wait for time."""

    status: dict[str, Any]
    variables: dict[str, Any]
    requeue_after: float | None = None
    applied_components: set[str] = field(default_factory=set)


# --- evaluation ------------------------------------------------------------------------------------------

def _ts(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_ts(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


def step_id(name: str, revision: str) -> str:
    """A stable id per step and app revision (KubeVela's are random; stable ones make status idempotent)."""
    return hashlib.sha256(f"{revision}/{name}".encode()).hexdigest()[:10]


def _condition_true(expr: str, statuses: dict[str, dict[str, Any]], variables: dict[str, Any]) -> bool:
    """KubeVela's `if`: `always`, or an expression over status.<step>.{phase,succeeded,failed,skipped,timeout,
    message} and inputs; CUE's &&, || and ! are accepted."""
    if expr.strip() == "always":
        return True
    text = re.sub(r"&&", " and ", expr)
    text = re.sub(r"\|\|", " or ", text)
    text = re.sub(r"!(?!=)", " not ", text)
    view = {n: {**s, "succeeded": s.get("phase") == "succeeded", "failed": s.get("phase") == "failed",
                "skipped": s.get("phase") == "skipped", "timeout": s.get("reason") == "Timeout"}
            for n, s in statuses.items()}
    try:
        return bool(compiled(text)(status=view, inputs=variables, context=variables))
    except (TemplateError, TypeError, ValueError, AttributeError, KeyError) as err:
        raise StepError(f'if "{expr}": {err}', "InvalidIf")


def _set_path(obj: dict[str, Any], path: str, value: Any) -> None:
    keys = path.split(".")
    for key in keys[:-1]:
        obj = obj.setdefault(key, {})
    obj[keys[-1]] = value


def _value_from(expr: str, output: dict[str, Any]) -> Any:
    try:
        value = compiled(expr, undefined_to_none=True)(**output)
    except (TemplateError, TypeError, ValueError, AttributeError, KeyError) as err:
        raise StepError(f'outputs valueFrom "{expr}": {err}', "OutputFailed")
    return value


class _Pass:
    """One evaluation pass over the steps (mutable scratch state; the public entry is `evaluate`)."""

    def __init__(self, previous: dict[str, Any], variables: dict[str, Any], now: datetime, actions: Actions,
                 app: dict[str, Any], revision: str, resumed: bool):
        self.previous = {s["name"]: s for s in previous.get("steps") or []}
        for s in list(self.previous.values()):
            self.previous.update({sub["name"]: sub for sub in s.get("subSteps") or []})
        self.variables = dict(variables)
        self.now = now
        self.actions = actions
        self.app = app
        self.revision = revision
        self.resumed = resumed
        self.statuses: dict[str, dict[str, Any]] = {}
        self.wake: list[float] = []
        self.applied: set[str] = set()
        self.suspended = False
        self.sub_results: dict[str, list[dict[str, Any]]] = {}

    def status_of(self, step: StepSpec, phase: str, message: str = "", reason: str = "",
                  started: str | None = None) -> dict[str, Any]:
        old = self.previous.get(step.name) or {}
        first = old.get("firstExecuteTime") or started
        out = {"id": old.get("id") or step_id(step.name, self.revision), "name": step.name, "type": step.type,
               "phase": phase}
        if message:
            out["message"] = message
        if reason:
            out["reason"] = reason
        if first:
            out["firstExecuteTime"] = first
            # Moves only when the step's state does: a reconcile that finds a running step as it was must not
            # rewrite the app's status for a timestamp (one write per workload event otherwise).
            unchanged = all(old.get(k) == out.get(k) for k in ("phase", "message", "reason"))
            out["lastExecuteTime"] = old["lastExecuteTime"] if unchanged and old.get("lastExecuteTime") \
                else _ts(self.now)
        return out

    def run_list(self, steps: tuple[StepSpec, ...] | list[StepSpec], dag: bool) -> list[dict[str, Any]]:
        order = [s.name for s in steps]
        results: dict[str, dict[str, Any]] = {}
        blocked_by_failure = False
        for i, step in enumerate(steps):
            earlier = [results[n] for n in order[:i]] if not dag else []
            deps = [self.statuses.get(d) for d in step.depends_on]
            waiting = any(s is None or s["phase"] not in DONE_PHASES for s in deps) or any(
                s["phase"] not in DONE_PHASES for s in earlier) or self.suspended
            failed_before = blocked_by_failure or any(s is not None and s["phase"] == "failed" for s in deps)
            if waiting and not (failed_before and step.if_ is None):
                result = self.status_of(step, "pending")
            elif failed_before and step.if_ is None:
                result = self.status_of(step, "skipped", reason="Skip")
            else:
                result = self.run_step(step)
            results[step.name] = result
            self.statuses[step.name] = result
            if result["phase"] == "failed":
                blocked_by_failure = True
        return [results[n] for n in order]

    def run_step(self, step: StepSpec) -> dict[str, Any]:
        old = self.previous.get(step.name) or {}
        if old.get("phase") in ("succeeded", "skipped") and step.type not in ("deploy", "apply-component"):
            return self.status_of(step, old["phase"], old.get("message", ""), old.get("reason", ""))
        started = old.get("firstExecuteTime") or _ts(self.now)
        try:
            if step.if_ is not None and not _condition_true(step.if_, self.statuses, self.variables):
                return self.status_of(step, "skipped", reason="Skip", started=started)
            if step.timeout is not None:
                first = _parse_ts(started) or self.now
                left = step.timeout - (self.now - first).total_seconds()
                if left <= 0:
                    return self.status_of(step, "failed", "step timed out", "Timeout", started)
                self.wake.append(left)
            props = copy.deepcopy(step.properties)
            for item in step.inputs:
                if item["from"] not in self.variables:
                    return self.status_of(step, "pending", f'waiting for input "{item["from"]}"', started=started)
                _set_path(props, item["parameterKey"], copy.deepcopy(self.variables[item["from"]]))
            phase, message, output = self.execute(step, props, started)
            if phase == "succeeded":
                for item in step.outputs:
                    self.variables[item["name"]] = _value_from(item["valueFrom"], output)
            return self.status_of(step, phase, message, "", started)
        except StepError as err:
            return self.status_of(step, "failed", str(err), err.reason, started)

    def execute(self, step: StepSpec, props: dict[str, Any], started: str) -> tuple[str, str, dict[str, Any]]:
        """(phase, message, output) of one step by its type."""
        namespace = self.app["metadata"].get("namespace", "default")
        kind = step.type
        if kind == "suspend":
            return self.suspend(step, props, started)
        if kind == "deploy":
            if props.get("auto") is False and not self.approved(step):
                self.suspended = True
                return "suspending", "waiting for approval (auto: false): resume the app", {}
            names = [c.get("name", "") for c in (self.app.get("spec") or {}).get("components") or []]
            return self.components(names)
        if kind == "apply-component":
            return self.components([str(props.get("component", ""))])
        if kind == "apply-object":
            value = props.get("value")
            if not isinstance(value, dict) or not value.get("kind") or not value.get("apiVersion"):
                raise StepError("properties.value must be an object with apiVersion and kind", "InvalidParameter")
            live = self.actions.apply_object(value)
            return "succeeded", "", {"value": live}
        if kind == "read-object":
            if not props.get("name"):
                raise StepError("properties.name is required", "InvalidParameter")
            obj = self.actions.read_object(props.get("apiVersion", "core.oam.dev/v1beta1"),
                                           props.get("kind", "Application"), props["name"],
                                           props.get("namespace") or namespace)
            if obj is None:
                return "running", f'{props.get("kind", "Application")} {props["name"]} not found yet', {}
            return "succeeded", "", {"value": obj}
        if kind in ("export2config", "export2secret"):
            return "succeeded", "", {"value": self.actions.apply_object(export_object(kind, props, namespace))}
        if kind == "depends-on-app":
            if not props.get("name"):
                raise StepError("properties.name is required", "InvalidParameter")
            phase = self.actions.app_phase(props.get("namespace") or namespace, props["name"])
            if phase == "running":
                return "succeeded", "", {}
            return "running", f'waiting for application {props["name"]} to be running (now: {phase or "absent"})', {}
        if kind == "apply-deployment":
            deployment = step_deployment(step.name, props, self.app)
            live = self.actions.apply_object(deployment)
            ready = (live.get("status") or {}).get("readyReplicas", 0)
            want = deployment["spec"]["replicas"]
            if ready >= want:
                return "succeeded", "", {"value": live}
            return "running", f"Ready:{ready}/{want}", {"value": live}
        # step-group: the sub-steps run as a DAG; the group is done when they all are
        subs = self.run_list(step.sub_steps, dag=True)
        self.sub_results[step.name] = subs
        phases = {s["phase"] for s in subs}
        if "failed" in phases and phases <= set(DONE_PHASES):
            return "failed", "a sub-step failed", {}
        if phases <= {"succeeded", "skipped"}:
            return "succeeded", "", {}
        return ("suspending" if "suspending" in phases else "running"), "", {}

    def approved(self, step: StepSpec) -> bool:
        old = self.previous.get(step.name) or {}
        return self.resumed and old.get("phase") == "suspending"

    def suspend(self, step: StepSpec, props: dict[str, Any], started: str) -> tuple[str, str, dict[str, Any]]:
        if self.approved(step):
            return "succeeded", "", {}
        if props.get("duration") is not None:
            left = parse_duration(props["duration"]) - (self.now - (_parse_ts(started) or self.now)).total_seconds()
            if left <= 0:
                return "succeeded", "", {}
            self.wake.append(left)
        self.suspended = True
        return "suspending", str(props.get("message") or ""), {}

    def components(self, names: list[str]) -> tuple[str, str, dict[str, Any]]:
        healthy, waiting = self.actions.apply_components(names)
        self.applied.update(names)
        return ("succeeded" if healthy else "running"), waiting, {}


def export_object(kind: str, props: dict[str, Any], namespace: str) -> dict[str, Any]:
    """The ConfigMap (export2config) or Secret (export2secret) a step writes."""
    if kind == "export2config":
        if not props.get("configName"):
            raise StepError("properties.configName is required", "InvalidParameter")
        data = {k: v if isinstance(v, str) else str(v) for k, v in (props.get("data") or {}).items()}
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": props["configName"], "namespace": props.get("namespace") or namespace}, "data": data}
    if not props.get("secretName"):
        raise StepError("properties.secretName is required", "InvalidParameter")
    data = {k: v if isinstance(v, str) else str(v) for k, v in (props.get("data") or {}).items()}
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": props["secretName"], "namespace": props.get("namespace") or namespace},
        "type": props.get("type") or "Opaque", "stringData": data}
    if props.get("kind") == "docker-registry":
        import base64
        import json

        registry = props.get("dockerRegistry") or {}
        auth = base64.b64encode(f'{registry.get("username", "")}:{registry.get("password", "")}'.encode()).decode()
        server = registry.get("server", "https://index.docker.io/v1/")
        secret["type"] = "kubernetes.io/dockerconfigjson"
        secret["stringData"] = {".dockerconfigjson": json.dumps({"auths": {server: {
            "username": registry.get("username", ""), "password": registry.get("password", ""), "auth": auth}}})}
    return secret


def step_deployment(step: str, props: dict[str, Any], app: dict[str, Any]) -> dict[str, Any]:
    """The Deployment an apply-deployment step applies (named after the step, as KubeVela's is)."""
    if not props.get("image"):
        raise StepError("properties.image is required", "InvalidParameter")
    container: dict[str, Any] = {"name": step, "image": props["image"]}
    if props.get("cmd"):
        container["command"] = props["cmd"]
    if props.get("env"):
        container["env"] = [{"name": k, "value": str(v)} for k, v in sorted(props["env"].items())]
    amounts = {k: props[k] for k in ("cpu", "memory") if props.get(k)}
    if amounts:
        container["resources"] = {"requests": amounts, "limits": dict(amounts)}
    labels = {"workflow.oam.dev/step-name": f'{app["metadata"]["name"]}-{step}'}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": step},
            "spec": {"replicas": int(props.get("replicas", 1)), "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}}


def evaluate(app: dict[str, Any], steps: list[StepSpec], previous: dict[str, Any], variables: dict[str, Any],
             now: datetime, actions: Actions, revision: str) -> Evaluation:
    """One pass of the workflow; `previous` is the last status.workflow of this revision ({} for a new one)."""
    resumed = previous.get("suspend") is False and any(s.get("phase") == "suspending"
                                                       for s in previous.get("steps") or [])
    run = _Pass(previous, variables, now, actions, app, revision, resumed)
    top = run.run_list(steps, dag=False)
    for entry in top:
        if entry["name"] in run.sub_results:
            entry["subSteps"] = run.sub_results[entry["name"]]
        elif entry["type"] == "step-group":
            old = run.previous.get(entry["name"]) or {}
            spec = next(s for s in steps if s.name == entry["name"])
            entry["subSteps"] = old.get("subSteps") or [run.status_of(s, "pending") for s in spec.sub_steps]
    phases = [s["phase"] for s in top]
    failed = "failed" in phases
    finished = all(p in DONE_PHASES for p in phases)
    suspended = not finished and any(p == "suspending" for p in phases)
    status = {"appRevision": revision, "mode": MODE, "finished": finished, "terminated": failed and finished,
              "suspend": suspended, "message": next((s.get("message", "") for s in top if s["phase"] == "failed"),
                                                     ""),
              "steps": top, "startTime": previous.get("startTime") or _ts(now)}
    if finished:
        status["endTime"] = previous.get("endTime") or _ts(now)
    wake = min(run.wake) if run.wake else None
    return Evaluation(status, run.variables, wake, run.applied)


def workflow_phase(workflow: dict[str, Any], all_healthy: bool) -> str:
    """KubeVela's application phase from status.workflow and the components' health."""
    if any(s.get("phase") == "failed" for s in workflow.get("steps") or []):
        return "workflowFailed"
    if workflow.get("suspend"):
        return "workflowSuspending"
    if not workflow.get("finished"):
        return "runningWorkflow"
    return "running" if all_healthy else "unhealthy"


def now_utc() -> datetime:
    return datetime.now(timezone.utc)

