"""WorkflowRuns through a shard's pause and another's crash, printing one JSON object.

A master and two slave shards (`--runs` WorkflowRuns, placed by the master's webhook) run workflows that apply a
ConfigMap, wait at a gate (half of them suspended for a person, half running: a step that waits for a ConfigMap)
and apply a second ConfigMap. With every run at its gate:

- pause: the shard holding runs is frozen (SIGSTOP) and its pod turns NotReady: its runs move once its Lease
  expired as the master sees it; resumed, the shard writes nothing but its own Lease;
- crash: the other shard, which now holds every run, is killed (SIGKILL) with its container reported terminated:
  the runs move back;
- then every gate opens (`velashard workflow resume`'s status change; the ConfigMap the other half waits for) and
  every run must succeed on the shard left, each step having run once: by the API server's audit log, one read
  and one create of each ConfigMap a step applies, and the first step's status as it was before the moves.

Measured: seconds until the paused shard's runs moved, until the crashed shard's runs moved, and from the gates'
opening until every run succeeded.

    python hack/workflowrun_failover.py [--runs 200] [--timeout 900]

tests/e2e/test_workflow_runs_failover.py runs the same scenario (`scenario`) with 60 runs under the chart's RBAC.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, Protocol

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from velashard.apis import labels  # noqa: E402
from velashard.apis.oam import SYSTEM_NAMESPACE, WORKFLOW_RUNS, WORKFLOW_STEP_DEFINITIONS  # noqa: E402
from velashard.kube import errors  # noqa: E402
from velashard.kube.client import KubeClient  # noqa: E402
from velashard.kube.resources import CONFIGMAPS, NAMESPACES  # noqa: E402
from velashard.workflow import operations, runs  # noqa: E402

NAMESPACE = "runs"
SHARDS = ("shard-a", "shard-b")
LEASE = ["--leader-election-lease-duration", "4s", "--leader-election-renew-deadline", "2.5s",
         "--leader-election-retry-period", "0.5s"]
GRACE = "2"  # the master's --orphan-grace-period, seconds
WRITES = ("create", "update", "patch", "delete", "deletecollection")
# A gate that runs: it waits, as a step a user writes, until a ConfigMap of the run's namespace exists.
WAIT_FOR_GO = '''import (
	"vela/builtin"
	"vela/kube"
)
look: kube.#Read & {$params: value: {apiVersion: "v1", kind: "ConfigMap",
	metadata: {name: parameter.name, namespace: context.namespace}}}
wait: builtin.#ConditionalWait & {$params: {continue: look.$returns.err == _|_, message: "no \\(parameter.name) yet"}}
parameter: name: string
'''


class Fleet(Protocol):
    """The processes and the API server the scenario drives."""
    client: KubeClient  # an admin's

    def audit(self, since: int) -> dict[str, Any]: ...

    def signal(self, shard: str, sig: int) -> None: ...

    def shard_pod(self, shard: str, ready: bool, terminated: bool = False) -> None: ...

    def ready(self, shard: str) -> bool: ...


def wait_step_definition() -> dict[str, Any]:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "WorkflowStepDefinition",
            "metadata": {"name": "wait-for-go", "namespace": SYSTEM_NAMESPACE},
            "spec": {"schematic": {"cue": {"template": WAIT_FOR_GO}}}}


def run_body(name: str) -> dict[str, Any]:
    def configmap(suffix: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-{suffix}", "namespace": NAMESPACE},
                "data": {"run": name}}
    gate = {"name": "gate", "type": "suspend"} if int(name.rsplit("-", 1)[1]) % 2 == 0 else \
        {"name": "gate", "type": "wait-for-go", "properties": {"name": f"go-{name}"}}
    return {"apiVersion": "core.oam.dev/v1alpha1", "kind": "WorkflowRun",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"workflowSpec": {"steps": [
                {"name": "first", "type": "apply-object", "properties": {"value": configmap("first")}}, gate,
                {"name": "second", "type": "apply-object", "properties": {"value": configmap("second")}}]}}}


def _steps(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in (run.get("status") or {}).get("steps") or []}


def at_gate(run: dict[str, Any]) -> bool:
    steps = _steps(run)
    gate = steps.get("gate") or {}
    return (steps.get("first") or {}).get("phase") == "succeeded" and (
        gate.get("phase") == "suspending" or (gate.get("phase") == "running" and gate.get("reason") == "Wait"))


def shard_of(run: dict[str, Any]) -> str | None:
    return (run["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID)


def _wait(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.5) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():
            return time.monotonic() - started
        time.sleep(interval)
    raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")


def _each(items: list[Any], fn: Callable[[Any], None], threads: int = 8) -> None:
    """fn over items on a few threads (creating 200 runs one by one would measure this script)."""
    errors_seen: list[BaseException] = []

    def work(part: list[Any]) -> None:
        try:
            for item in part:
                fn(item)
        except BaseException as err:  # reported after the join
            errors_seen.append(err)
    workers = [threading.Thread(target=work, args=(items[i::threads],)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors_seen:
        raise errors_seen[0]


def resume(client: KubeClient, name: str) -> None:
    """What `velashard workflow resume NAME --type workflow` writes: the suspended steps run again."""
    for _ in range(10):
        run = client.get(WORKFLOW_RUNS, name, NAMESPACE)
        status = run.get("status") or {}
        resumed = operations.resume(runs.engine_status(status))
        if resumed is None:
            return
        kept = {k: status[k] for k in ("conditions", "mode") if k in status}
        try:
            client.update_status(WORKFLOW_RUNS, dict(run, status={**runs.EMPTY_STATUS, **kept, **resumed}))
            return
        except errors.Conflict:
            continue
    raise RuntimeError(f"could not resume {name}")


def writes_by(records: list[dict[str, Any]], shard: str) -> list[tuple[str, str, str]]:
    """What `shard`'s process wrote (successfully), its own Lease aside."""
    return [(r["verb"], r["resource"], r.get("name") or "") for r in records
            if r["verb"] in WRITES and r.get("code", 0) < 400 and f"(shard={shard})" in r.get("userAgent", "")
            and "velashard/" in r.get("userAgent", "")
            and not (r["resource"] == "leases" and r.get("name") == f"velashard-{shard}")]


def step_runs(records: list[dict[str, Any]], names: list[str]) -> dict[str, dict[str, int]]:
    """Per ConfigMap a step applies: how often a controller read it (once per run of the step) and created or
    changed it."""
    wanted = {f"{n}-{s}" for n in names for s in ("first", "second")}
    counts = {name: {"reads": 0, "writes": 0} for name in wanted}
    for r in records:
        if r["resource"] != "configmaps" or r.get("name") not in wanted or "velashard/" not in r.get("userAgent", ""):
            continue
        if r["verb"] == "get":
            counts[r["name"]]["reads"] += 1
        elif r["verb"] in WRITES and r.get("code", 0) < 400:
            counts[r["name"]]["writes"] += 1
    return counts


def scenario(fleet: Fleet, count: int, timeout: float = 600) -> dict[str, Any]:
    """Run it; what it measured and what went wrong (empty lists when nothing did)."""
    client = fleet.client
    try:
        client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        client.create(WORKFLOW_STEP_DEFINITIONS, wait_step_definition())
    except errors.AlreadyExists:
        pass
    names = [f"run-{i:03d}" for i in range(count)]
    start = fleet.audit(1 << 62)["lastSeq"]
    created = time.monotonic()
    _each(names, lambda n: client.create(WORKFLOW_RUNS, run_body(n)))

    def listed() -> list[dict[str, Any]]:
        return client.list_all(WORKFLOW_RUNS, NAMESPACE)[0]
    result: dict[str, Any] = {"runs": count, "at_gate_seconds": round(_wait(
        lambda: sum(at_gate(r) for r in listed()) == count, timeout, f"{count} runs at their gates"), 1)}
    placed: dict[str, int] = {}
    for r in listed():
        placed[str(shard_of(r))] = placed.get(str(shard_of(r)), 0) + 1
    result["placed"] = placed
    before = {r["metadata"]["name"]: _steps(r)["first"] for r in listed()}

    # pause the shard holding the most runs: they move once its lease expired; it then writes nothing
    paused, other = sorted(SHARDS, key=lambda s: -placed.get(s, 0))
    fleet.signal(paused, signal.SIGSTOP)
    fleet.shard_pod(paused, False)
    result["pause_moved_seconds"] = round(_wait(lambda: not [r for r in listed() if shard_of(r) == paused],
                                                timeout, f"{paused}'s runs to move"), 1)
    moved = fleet.audit(1 << 62)["lastSeq"]
    fleet.signal(paused, signal.SIGCONT)
    _wait(lambda: fleet.ready(paused), timeout, f"{paused} to be ready again")
    time.sleep(2)  # anything it still meant to send would be sent by now
    result["paused_shard_writes_after_the_move"] = writes_by(fleet.audit(moved)["items"], paused)
    fleet.shard_pod(paused, True)

    # kill the shard that now holds every run: they move back, still at their gates
    fleet.signal(other, signal.SIGKILL)
    fleet.shard_pod(other, False, terminated=True)
    result["crash_moved_seconds"] = round(_wait(lambda: all(shard_of(r) == paused for r in listed()), timeout,
                                                f"{other}'s runs to move"), 1)
    result["not_at_gate_after_moves"] = [r["metadata"]["name"] for r in listed() if not at_gate(r)]

    opened = time.monotonic()
    suspended = [n for n in names if int(n.rsplit("-", 1)[1]) % 2 == 0]
    waiting = [n for n in names if n not in suspended]
    _each(suspended, lambda n: resume(client, n))
    _each(waiting, lambda n: client.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": f"go-{n}", "namespace": NAMESPACE}}))
    result["finish_seconds"] = round(_wait(lambda: sum((r.get("status") or {}).get("status") == "succeeded"
                                                       for r in listed()) == count, timeout,
                                           f"{count} runs to succeed"), 1)
    result["total_seconds"] = round(time.monotonic() - created, 1)
    final = listed()
    result["on_the_shard_left"] = sum(shard_of(r) == paused for r in final)
    result["first_step_changed"] = [r["metadata"]["name"] for r in final
                                    if {k: v for k, v in _steps(r)["first"].items() if k != "lastExecuteTime"} !=
                                    {k: v for k, v in before[r["metadata"]["name"]].items()
                                     if k != "lastExecuteTime"}]
    counts = step_runs(fleet.audit(start)["items"], names)
    result["steps_not_run_once"] = sorted(f'{n}: {c["reads"]} reads, {c["writes"]} writes'
                                          for n, c in counts.items() if c != {"reads": 1, "writes": 1})
    result["seconds_from_open_to_done"] = round(time.monotonic() - opened, 1)
    return result


def problems(result: dict[str, Any]) -> list[str]:
    """What the scenario's checks found wrong."""
    found = []
    for key in ("paused_shard_writes_after_the_move", "not_at_gate_after_moves", "first_step_changed",
                "steps_not_run_once"):
        if result.get(key):
            found.append(f"{key}: {result[key][:10]}")
    if result.get("on_the_shard_left") != result["runs"]:
        found.append(f'{result["runs"] - result.get("on_the_shard_left", 0)} runs not on the shard left')
    return found


class _BenchFleet:
    """hack/benchlib's cluster: the API server and the controllers as processes, as the benchmarks run them."""

    def __init__(self, cluster: Any):
        self.cluster = cluster
        self.client = cluster.client

    def audit(self, since: int) -> dict[str, Any]:
        from hack.bench_api_cost import audit
        return audit(self.cluster, since)

    def signal(self, shard: str, sig: int) -> None:
        self.cluster.controllers[shard].proc.send_signal(sig)

    def shard_pod(self, shard: str, ready: bool, terminated: bool = False) -> None:
        self.cluster.shard_pod(shard, ready, terminated)

    def ready(self, shard: str) -> bool:
        import http.client
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.cluster.controllers[shard].health, timeout=2)
            conn.request("GET", "/readyz")
            return conn.getresponse().status == 200
        except OSError:
            return False


def main() -> int:
    from hack.bench_apiserver import _commit
    from hack.benchlib import Cluster

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()
    with Cluster() as cluster:
        cluster.start_master("--orphan-grace-period", GRACE, "--reschedule-period", "1", *LEASE)
        for shard in SHARDS:
            cluster.start(shard, *LEASE, shard=shard)
        result = {"benchmark": "workflowrun-failover", "cores": os.cpu_count(), "commit": _commit(),
                  **scenario(_BenchFleet(cluster), args.runs, args.timeout)}
    result["problems"] = problems(result)
    print(json.dumps(result, indent=2))
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
