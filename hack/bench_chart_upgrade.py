"""A chart upgrade with apps running, printing one JSON object (issue 44, item 7).

`velashard dev` runs the chart as users install it: two master replicas, three shard pods from the addon, the
master scheduling to a static list of two of them (`sharding.schedulableShards`), and `--apps` sample apps
(a webservice with its Service and the scaler trait), all running. Real Helm then upgrades the release
(`--reuse-values`) changing the image tag, a resource limit and the shard list (two shards to three). The
Deployments roll as their RollingUpdate says (the masters, and the shards once the addon's app clones the new
master template), and the new shard takes its share, with the consistent-hash scheduler, through the drain
handshake (round-robin, the chart's default, moves nothing: new apps go to the new shard). Measured from the
API server: new ApplicationRevisions, workflows run again (their start time or revision changed), app
Deployments rolled (their generation or pod template changed), app Deployments written at all among the apps
that did not move (their resourceVersion), the apps moved and whether each move was a drain handshake (the
master's drain request, the old shard letting go, then the master's assignment, in the audit log), writes per
resource and writer while the upgrade settles, and the seconds until it has.

    python hack/bench_chart_upgrade.py [--apps 1000] [--scheduler consistent-hash] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hack.bench_apiserver import _commit  # noqa: E402

CHART = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helm", "velashard")
RELEASE = "velashard"  # as velashard dev installs it
SHARD = "controller.core.oam.dev/scheduled-shard-id"
DRAIN = "controller.core.oam.dev/drain"
UPGRADE = {"image": {"tag": "0.1.1-upgraded"}, "resources": {"limits": {"cpu": "1", "memory": "2Gi"}},
           "sharding": {"schedulableShards": "shard-0,shard-1,shard-2"}}


def writer(record: dict[str, Any]) -> str:
    agent = record.get("userAgent") or ""
    return agent.split("shard=")[1].rstrip(")") if "shard=" in agent else agent.split("/")[0] or "?"


def snapshot(kube: Any) -> dict[str, Any]:
    from velashard.apis.oam import APPLICATION_REVISIONS, APPLICATIONS
    from velashard.kube.resources import DEPLOYMENTS

    apps = {a["metadata"]["name"]: a for a in kube.list_all(APPLICATIONS, "default")[0]}
    revisions = Counter((r["metadata"].get("labels") or {}).get("app.oam.dev/name")
                        for r in kube.list_all(APPLICATION_REVISIONS, "default")[0])
    deployments = {d["metadata"]["name"]: d for d in kube.list_all(DEPLOYMENTS, "default")[0]}
    return {"apps": apps, "revisions": revisions, "deployments": deployments}


def shard_of(app: dict[str, Any]) -> str | None:
    return (app["metadata"].get("labels") or {}).get(SHARD)


def settled(kube: Any, count: int) -> dict[str, Any] | None:
    """The apps once every one runs on a listed shard with no drain pending; else None."""
    from velashard.apis.oam import APPLICATIONS

    apps = kube.list_all(APPLICATIONS, "default")[0]
    if len(apps) != count:
        return None
    if any(DRAIN in (a["metadata"].get("labels") or {}) or shard_of(a) is None
           or (a.get("status") or {}).get("status") != "running" for a in apps):
        return None
    return {a["metadata"]["name"]: a for a in apps}


def wait(check: Any, timeout: float, interval: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    raise SystemExit(f"timed out after {timeout:.0f} s waiting for {getattr(check, '__name__', check)}")


def masters(directory: str) -> list[dict[str, Any]]:
    with open(os.path.join(directory, "processes.json")) as fh:
        return [p for p in json.load(fh)[1:] if not p["name"].startswith("velashard-shard-")]


def handshakes(records: list[dict[str, Any]], moved: dict[str, tuple[str, str]]) -> int:
    """Moved apps whose writes in the window were the master's (drain request), then the old shard's (letting
    go), then the master's (the new assignment)."""
    seen: dict[str, list[str]] = {}
    for record in records:
        if record["resource"] == "applications" and record["name"] in moved and record["verb"] in ("patch", "update") \
                and record.get("subresource", "") == "" and record.get("code", 0) < 300:
            seen.setdefault(record["name"], []).append(writer(record))
    count = 0
    for name, (old, _new) in moved.items():
        order = seen.get(name, [])
        try:
            first = order.index("master")
            let_go = order.index(old, first + 1)
            order.index("master", let_go + 1)
            count += 1
        except ValueError:
            continue
    return count


def run(apps: int, scheduler: str, directory: str, timeout: float) -> dict[str, Any]:
    import helm_python as helm

    from velashard.kube.client import KubeClient

    dev = subprocess.Popen([sys.executable, "-m", "velashard.cli.main", "dev", "--dir", directory, "--shards", "3",
                            "--apps", str(apps), "--set", "replicaCount=2", "--set",
                            "sharding.schedulableShards=shard-0,shard-1", "--set", f"sharding.scheduler={scheduler}",
                            "--set", "sharding.orphanGracePeriod=60"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        kubeconfig = os.path.join(directory, "kubeconfig")
        wait(lambda: os.path.exists(os.path.join(directory, "processes.json")) and os.path.exists(kubeconfig), 120)
        kube = KubeClient.from_kubeconfig(kubeconfig, shard_id="bench", qps=500, burst=500)
        started = time.monotonic()
        wait(lambda: settled(kube, apps), timeout)
        running_seconds = time.monotonic() - started
        time.sleep(5)  # the last status writes land
        before = snapshot(kube)
        old_masters = {p["name"] for p in masters(directory)}
        since = kube.request("get", "GET", "/debug/audit", query={"since": "0"})["lastSeq"]
        release = helm.Config(kubeconfig_path=kubeconfig, namespace="vela-system", storage_driver="secret")
        upgraded = time.monotonic()
        try:
            release.upgrade(CHART, RELEASE, UPGRADE, namespace="vela-system", reuse_values=True, timeout=300)
        finally:
            release.close()
        helm_seconds = time.monotonic() - upgraded

        def rolled() -> bool:
            now = masters(directory)
            return len(now) == 2 and all(p.get("ready") and p["name"] not in old_masters for p in now)

        wait(rolled, timeout)
        rolled_seconds = time.monotonic() - upgraded
        stable: list[Counter] = []

        def rebalanced() -> bool:
            current = settled(kube, apps)
            counts = Counter(shard_of(a) for a in current.values()) if current else None
            stable.append(counts)
            want_third = scheduler != "consistent-hash" or (counts or {}).get("shard-2", 0) > 0
            return bool(counts) and want_third and len(stable) >= 5 and all(c == counts for c in stable[-5:])

        wait(rebalanced, timeout, interval=2.0)
        settled_seconds = time.monotonic() - upgraded - 8.0  # less the four polls that showed it stable
        after = snapshot(kube)
        records = kube.request("get", "GET", "/debug/audit", query={"since": str(since)})["items"]
    finally:
        dev.send_signal(signal.SIGINT)
        try:
            dev.wait(120)
        except subprocess.TimeoutExpired:
            dev.kill()
    names = sorted(before["apps"])
    moved = {n: (shard_of(before["apps"][n]), shard_of(after["apps"][n])) for n in names
             if shard_of(before["apps"][n]) != shard_of(after["apps"][n])}
    workflow = lambda a: ((a.get("status") or {}).get("workflow") or {})  # noqa: E731

    def rolled_deployment(name: str) -> bool:
        old, new = before["deployments"].get(name), after["deployments"].get(name)
        return old is None or new is None or old["metadata"].get("generation") != new["metadata"].get("generation") \
            or old["spec"]["template"] != new["spec"]["template"]

    writes = Counter(f'{r["verb"]} {r["resource"]}{"/" + r["subresource"] if r.get("subresource") else ""} '
                     f'by {writer(r)}{"" if r.get("code", 200) < 300 else " (" + str(r["code"]) + ")"}'
                     for r in records if r["verb"] in ("create", "update", "patch", "delete")
                     and r.get("namespace") == "default")
    return {
        "benchmark": "chart-upgrade", "cores": os.cpu_count(), "commit": _commit(), "apps": apps,
        "scheduler": scheduler, "upgrade": UPGRADE, "apps_running_seconds": round(running_seconds, 1),
        "helm_upgrade_seconds": round(helm_seconds, 1), "masters_rolled_seconds": round(rolled_seconds, 1),
        "settled_seconds": round(settled_seconds, 1),
        "placement_before": dict(sorted(Counter(shard_of(a) for a in before["apps"].values()).items())),
        "placement_after": dict(sorted(Counter(shard_of(a) for a in after["apps"].values()).items())),
        "apps_moved": len(moved), "moves_through_drain_handshake": handshakes(records, moved),
        "new_revisions": sum(after["revisions"][n] - before["revisions"][n] for n in names),
        "workflows_run_again": sum(1 for n in names if workflow(before["apps"][n]).get("startTime") !=
                                   workflow(after["apps"][n]).get("startTime") or
                                   workflow(before["apps"][n]).get("appRevision") !=
                                   workflow(after["apps"][n]).get("appRevision")),
        "deployments_rolled": sum(1 for n in names if rolled_deployment(n)),
        "deployments_written_of_apps_not_moved": sum(
            1 for n in names if n not in moved and before["deployments"][n]["metadata"]["resourceVersion"] !=
            after["deployments"][n]["metadata"]["resourceVersion"]),
        "writes_in_default_namespace": dict(sorted(writes.items())),
        "load_average": os.getloadavg(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=1000)
    parser.add_argument("--scheduler", default="consistent-hash", choices=["consistent-hash", "round-robin"])
    parser.add_argument("--dir", default=None, help="velashard dev's directory (default: a temporary one)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds each phase may take")
    args = parser.parse_args()
    directory = args.dir or tempfile.mkdtemp(prefix="bench-chart-upgrade-")
    print(json.dumps(run(args.apps, args.scheduler, directory, args.timeout), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
