"""Operating workflows as `vela workflow` does, through `velashard workflow` against the embedded API server:
suspend, resume, terminate, restart (all, or from a failed step), the restart-workflow annotation, logs; and a
run's state surviving a controller restart (another process takes over with nothing in memory)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from velashard.apis.oam import APPLICATIONS
from velashard.apiserver.http.server import APIServer
from velashard.core.controller import ApplicationController, Options
from velashard.core.install import install
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.manager import Manager
from velashard.kube.resources import CONFIGMAPS, NAMESPACES
from velashard.workflow.store import context_name
from tests.integration.helpers import eventually, trust_authorless_apps
from tests.workflowsteps import install_missing


class Controller:
    """The Application controller in a thread; stop() and start() again for a fresh one (empty memory)."""

    def __init__(self, kube: KubeClient):
        self.kube = kube
        self.stop_event: threading.Event | None = None
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        manager = Manager(self.kube, "master")
        ApplicationController(manager, Options(workers=2, state_keep_interval=1.0, waiting_requeue=0.5))
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=manager.run, args=(self.stop_event,), daemon=True)
        self.thread.start()

    def stop(self) -> None:
        assert self.stop_event is not None and self.thread is not None
        self.stop_event.set()
        self.thread.join(15)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    server = APIServer(port=0, simulate_workloads=True).start()
    server.write_kubeconfig(str(tmp_path_factory.mktemp("ops") / "kubeconfig"))
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test", qps=500, burst=500)
    trust_authorless_apps(kube)
    install(kube)
    install_missing(kube)
    controller = Controller(kube)
    controller.start()
    yield server, kube, controller
    controller.stop()
    server.stop()


@pytest.fixture
def ns(cluster, request):
    kube = cluster[1]
    name = "ops-" + request.node.name.replace("_", "-")[5:40].strip("-")
    kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def app(name: str, ns: str, steps: list[dict]) -> dict:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": {"name": name, "namespace": ns},
            "spec": {"components": [], "workflow": {"steps": steps}}}


def cli(server, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "velashard.cli.main", "workflow", *args, "--kubeconfig",
                           server.kubeconfig], capture_output=True, text=True, timeout=60)


def workflow(kube, name, ns) -> dict:
    return (kube.get(APPLICATIONS, name, ns).get("status") or {}).get("workflow") or {}


def phase(kube, name, ns) -> str:
    return (kube.get(APPLICATIONS, name, ns).get("status") or {}).get("status", "")


def config(kube, ns, name, **data) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}
    try:
        live = kube.get(CONFIGMAPS, name, ns)
        kube.update(CONFIGMAPS, dict(live, data=data))
    except Exception:  # absent: make it
        kube.create(CONFIGMAPS, body, ns)


def step(kube, name, ns, step_name) -> dict:
    return next((s for top in workflow(kube, name, ns).get("steps") or []
                 for s in (top, *(top.get("subSteps") or [])) if s["name"] == step_name), {})


def test_suspend_resume_and_terminate_from_the_command_line(cluster, ns):
    server, kube, _ = cluster
    kube.create(APPLICATIONS, app("gated", ns, [{"name": "gate", "type": "wait-for-config",
                                                 "properties": {"name": "go"}}]))
    eventually(lambda: step(kube, "gated", ns, "gate").get("reason") == "Wait", timeout=20)
    out = cli(server, "suspend", "gated", "-n", ns)
    assert out.returncode == 0 and "Successfully suspend workflow: gated" in out.stdout, out.stderr
    eventually(lambda: phase(kube, "gated", ns) == "workflowSuspending", timeout=20)
    assert step(kube, "gated", ns, "gate")["phase"] == "suspending"
    config(kube, ns, "go", ready="true")
    time.sleep(2.5)  # suspended: what it waits for is there, and still it does not run
    assert phase(kube, "gated", ns) == "workflowSuspending"
    out = cli(server, "resume", "gated", "-n", ns)
    assert out.returncode == 0 and "Successfully resume workflow: gated" in out.stdout, out.stderr
    eventually(lambda: phase(kube, "gated", ns) == "running", timeout=20)
    assert cli(server, "resume", "gated", "-n", ns).stdout.strip() == "workflow gated is not suspended."
    kube.create(APPLICATIONS, app("stuck", ns, [{"name": "gate", "type": "wait-for-config",
                                                 "properties": {"name": "never"}}]))
    eventually(lambda: step(kube, "stuck", ns, "gate").get("reason") == "Wait", timeout=20)
    assert cli(server, "terminate", "stuck", "-n", ns).returncode == 0
    eventually(lambda: phase(kube, "stuck", ns) == "workflowTerminated", timeout=20)
    assert (step(kube, "stuck", ns, "gate")["phase"], step(kube, "stuck", ns, "gate")["reason"]) == (
        "failed", "Terminate")
    refused = cli(server, "resume", "stuck", "-n", ns)
    assert refused.returncode == 2 and "can not resume a terminated workflow" in refused.stderr
    missing = cli(server, "suspend", "nope", "-n", ns)
    assert missing.returncode == 2 and "application " + ns + "/nope not found" in missing.stderr


def test_restart_from_a_failed_step_and_from_the_start(cluster, ns):
    server, kube, _ = cluster
    config(kube, ns, "verdict", ok="no")
    kube.create(APPLICATIONS, app("checked", ns, [
        {"name": "record", "type": "export2config", "properties": {"configName": "note", "data": {"n": "1"}}},
        {"name": "check", "type": "check-config", "properties": {"name": "verdict"},
         "outputs": [{"name": "checked", "valueFrom": "parameter.name"}]}]))
    eventually(lambda: phase(kube, "checked", ns) == "workflowFailed", timeout=20)
    assert step(kube, "checked", ns, "check")["message"] == "verdict is not ok"
    refused = cli(server, "restart", "checked", "-n", ns, "--step", "record")
    assert refused.returncode == 2 and "can not restart from a non-failed step" in refused.stderr
    config(kube, ns, "verdict", ok="yes")
    first_start = workflow(kube, "checked", ns)["startTime"]
    out = cli(server, "restart", "checked", "-n", ns, "--step", "check")
    assert out.returncode == 0, out.stderr
    eventually(lambda: phase(kube, "checked", ns) == "running", timeout=20)
    assert workflow(kube, "checked", ns)["startTime"] == first_start  # the same run, from that step
    assert step(kube, "checked", ns, "check")["phase"] == "succeeded"
    time.sleep(1.1)  # a new run has a new start time (seconds)
    assert cli(server, "restart", "checked", "-n", ns).returncode == 0
    eventually(lambda: workflow(kube, "checked", ns).get("startTime", first_start) != first_start
               and phase(kube, "checked", ns) == "running", timeout=20)


def test_the_restart_workflow_annotation_restarts_a_finished_run(cluster, ns):
    _, kube, _ = cluster
    kube.create(APPLICATIONS, app("again", ns, [
        {"name": "record", "type": "export2config", "properties": {"configName": "note", "data": {"n": "1"}}}]))
    eventually(lambda: phase(kube, "again", ns) == "running", timeout=20)
    started = workflow(kube, "again", ns)["startTime"]
    time.sleep(1.1)
    kube.patch(APPLICATIONS, "again", {"metadata": {"annotations": {"app.oam.dev/restart-workflow": "true"}}}, ns)
    eventually(lambda: workflow(kube, "again", ns).get("startTime", started) != started
               and phase(kube, "again", ns) == "running", timeout=20)
    # a one-time request is taken off, by a patch of its own once the restarted run is written
    eventually(lambda: "app.oam.dev/restart-workflow" not in (
        kube.get(APPLICATIONS, "again", ns)["metadata"].get("annotations") or {}), timeout=20)


def test_a_run_goes_on_after_the_controller_restarts(cluster, ns):
    server, kube, controller = cluster
    kube.create(APPLICATIONS, app("durable", ns, [
        {"name": "first", "type": "export2config", "properties": {"configName": "one", "data": {"v": "a"}},
         "outputs": [{"name": "made", "valueFrom": "apply.$returns.value.metadata.name"}]},
        {"name": "hold", "type": "suspend", "properties": {"duration": "4s"}},
        {"name": "last", "type": "export2config", "inputs": [{"from": "made", "parameterKey": "data.from"}],
         "properties": {"configName": "two", "data": {"v": "b"}}}]))
    eventually(lambda: step(kube, "durable", ns, "hold").get("phase") == "suspending", timeout=20)
    controller.stop()
    seq = server.audit.since(1 << 62)["lastSeq"]
    controller.start()  # nothing in memory: the run's context is read back from its ConfigMap
    eventually(lambda: phase(kube, "durable", ns) == "running", timeout=30)
    assert kube.get(CONFIGMAPS, "two", ns)["data"] == {"v": "b", "from": "one"}
    reads = [r for r in server.audit.since(seq)["items"] if r["resource"] == "configmaps"
             and r["name"] == context_name("durable") and r["verb"] == "get"]
    assert len(reads) == 1, reads  # once, then this process knows the version it wrote


def test_a_waiting_step_polls_no_faster_than_kubevelas_backoff(cluster, ns):
    server, kube, _ = cluster
    seq = server.audit.since(1 << 62)["lastSeq"]
    kube.create(APPLICATIONS, app("patient", ns, [{"name": "gate", "type": "wait-for-config",
                                                   "properties": {"name": "absent"}}]))
    eventually(lambda: step(kube, "patient", ns, "gate").get("reason") == "Wait", timeout=20)
    started = time.monotonic()
    for i in range(6):  # meanwhile the app is woken by events of its own: they must not make it poll
        kube.patch(APPLICATIONS, "patient", {"metadata": {"labels": {"poke": str(i)}}}, ns)
        time.sleep(2)
    elapsed = time.monotonic() - started
    records = server.audit.since(seq)["items"]
    polls = [r["time"] for r in records if r["resource"] == "configmaps" and r["name"] == "absent"]
    # KubeVela's backoff: 1 s for the first tries, then 3 s, 6 s, 12 s...: at most one poll per second early on
    gaps = [b - a for a, b in zip(polls, polls[1:])]
    assert len(polls) >= 4 and len(polls) <= elapsed + 2 and all(g > 0.9 for g in gaps), gaps
    writes = [r for r in records if r["resource"] == "applications" and r["subresource"] == "status"
              and r["verb"] in ("update", "patch")]
    assert len(writes) <= 3, writes  # the waiting step's unchanged status is not written again per poll


def test_rollback_to_the_version_published_before(cluster, ns):
    server, kube, _ = cluster
    config(kube, ns, "verdict", ok="yes")
    good = app("pinned", ns, [{"name": "check", "type": "check-config", "properties": {"name": "verdict"}}])
    good["metadata"]["annotations"] = {"app.oam.dev/publishVersion": "alpha"}
    kube.create(APPLICATIONS, good)
    eventually(lambda: phase(kube, "pinned", ns) == "running", timeout=20)
    refused = cli(server, "rollback", "pinned", "-n", ns)
    assert refused.returncode == 2 and "no revision of pinned was published before alpha" in refused.stderr

    def publish_beta(current: dict) -> None:
        current["metadata"]["annotations"]["app.oam.dev/publishVersion"] = "beta"
        current["spec"]["workflow"]["steps"][0]["properties"]["name"] = "missing"
        kube.update(APPLICATIONS, current)
    publish_beta(kube.get(APPLICATIONS, "pinned", ns))
    eventually(lambda: phase(kube, "pinned", ns) == "workflowFailed"
               and workflow(kube, "pinned", ns).get("appRevision") == "beta", timeout=20)
    out = cli(server, "rollback", "pinned", "-n", ns)
    assert out.returncode == 0 and "Successfully rollback workflow to revision pinned-v1" in out.stdout, out.stderr
    eventually(lambda: phase(kube, "pinned", ns) == "running"
               and workflow(kube, "pinned", ns).get("appRevision") == "alpha", timeout=20)
    restored = kube.get(APPLICATIONS, "pinned", ns)
    assert restored["spec"]["workflow"]["steps"][0]["properties"]["name"] == "verdict"


def test_the_application_schema_takes_kubevelas_inputs_and_outputs(cluster, ns):
    """As KubeVela's Application CRD: an output needs name and valueFrom, an input needs from, and other
    fields of theirs (an old `fromKey`) are pruned."""
    _, kube, _ = cluster
    with pytest.raises(errors.Invalid) as refused:
        kube.create(APPLICATIONS, app("no-value", ns, [{"name": "a", "type": "suspend",
                                                         "outputs": [{"name": "x", "fromKey": "y"}]}]))
    assert "valueFrom" in refused.value.message
    with pytest.raises(errors.Invalid) as refused:
        kube.create(APPLICATIONS, app("no-from", ns, [{"name": "a", "type": "suspend",
                                                        "inputs": [{"parameterKey": "y"}]}]))
    assert "from" in refused.value.message
    stored = kube.create(APPLICATIONS, app("pruned", ns, [
        {"name": "a", "type": "suspend", "outputs": [{"name": "x", "valueFrom": "context.stepName", "fromKey": "y"}]},
        {"name": "b", "type": "suspend", "inputs": [{"from": "x", "parameterKey": "p", "other": 1}]}]))
    steps = stored["spec"]["workflow"]["steps"]
    assert steps[0]["outputs"] == [{"name": "x", "valueFrom": "context.stepName"}]
    assert steps[1]["inputs"] == [{"from": "x", "parameterKey": "p"}]
