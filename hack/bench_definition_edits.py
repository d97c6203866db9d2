"""What a definition edit costs a running fleet, printing one JSON object.

A master and 2 slave shards (apps placed by the master's webhook) run `--apps` apps, the first `--users` of them
with the `scaler` trait. Then, as a platform team would, with `velashard def get` and `velashard def apply`:

- unused: the `hpa` trait (no app uses it) gets a new default and a new trait `bench-unused` is added; for
  `--window` seconds, what the controller processes write (API server audit log) and what changed on the apps:
  want 0 new ApplicationRevisions, 0 workflow runs, 0 writes for apps (apps, revisions, trackers, Deployments,
  Services);
- used: `scaler` gets a new default; seconds until every user runs its new revision, and which apps got a new
  revision or a new workflow run (want exactly the users), and the writes to non-users' objects (want 0).

A definition's own status (its TemplateValid condition, written by the master's checker) is reported apart.

    python hack/bench_definition_edits.py [--apps 1000] [--users 250] [--window 30]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hack.bench_api_cost import audit, last_seq  # noqa: E402
from hack.bench_apiserver import _commit  # noqa: E402
from hack.benchlib import APPS_NS, Cluster  # noqa: E402
from velashard.apis.oam import APPLICATION_REVISIONS  # noqa: E402

SHARDS = ("shard-0", "shard-1")
APP_RESOURCES = ("applications", "applicationrevisions", "resourcetrackers", "deployments", "services", "configmaps")
NEW_TRAIT = """\
"bench-unused": {
	type: "trait"
	description: "A trait no app uses."
	attributes: appliesToWorkloads: ["deployments.apps"]
}
template: {
	patch: metadata: annotations: unused: parameter.note
	parameter: note: *"none" | string
}
"""


def cli(cluster: Cluster, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "velashard.cli.main", *args, "--kubeconfig", cluster.kubeconfig],
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"velashard {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def def_apply_edited(cluster: Cluster, directory: str, name: str, old: str, new: str) -> None:
    text = cli(cluster, "def", "get", name)
    if old not in text:
        raise RuntimeError(f"{name}'s definition has no {old!r}")
    path = os.path.join(directory, f"{name}.cue")
    with open(path, "w") as fh:
        fh.write(text.replace(old, new))
    cli(cluster, "def", "apply", path)


def state(cluster: Cluster) -> dict[str, tuple]:
    """Each app's (latest revision, workflow start time, resourceVersion)."""
    return {a["metadata"]["name"]: (((a.get("status") or {}).get("latestRevision") or {}).get("name"),
                                    ((a.get("status") or {}).get("workflow") or {}).get("startTime"),
                                    a["metadata"]["resourceVersion"]) for a in cluster.apps()}


def writes(cluster: Cluster, since: int) -> list[dict]:
    """The controller processes' writes since `since` (not this script's, not the CLI's), lease renewals apart."""
    return [r for r in audit(cluster, since)["items"]
            if "shard=" in r.get("userAgent", "") and not any(f"shard={who})" in r["userAgent"]
                                                              for who in ("bench", "cli"))
            and r["verb"] in ("create", "update", "patch", "delete") and r.get("resource") != "leases"]


def counted(records: list[dict]) -> dict[str, int]:
    kinds = Counter(f'{r["verb"]} {r["resource"]}{"/" + r["subresource"] if r.get("subresource") else ""}'
                    for r in records)
    return dict(kinds.most_common())


def app_of(record: dict) -> str:
    """The app a written object belongs to, by its name (revisions <app>-vN, trackers <app>-<namespace>)."""
    name = record.get("name", "")
    if record["resource"] == "applicationrevisions":
        return name.rsplit("-v", 1)[0]
    if record["resource"] == "resourcetrackers" and name.endswith(f"-{APPS_NS}"):
        return name[:-len(APPS_NS) - 1]
    return name


def changes(before: dict, after: dict) -> dict[str, list[str]]:
    return {"new_revision": sorted(n for n in after if after[n][0] != before.get(n, (None,))[0]),
            "workflow_run": sorted(n for n in after if after[n][1] != before.get(n, (None, None))[1]),
            "app_written": sorted(n for n in after if after[n][2] != before.get(n, (None, None, None))[2])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=1000)
    parser.add_argument("--users", type=int, default=250, help="apps (the first ones) with the scaler trait")
    parser.add_argument("--window", type=float, default=30.0, help="seconds watched after the unused edit")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds to wait once all apps run")
    parser.add_argument("--timeout", type=float, default=1200)
    args = parser.parse_args()
    result: dict = {"benchmark": "definition-edits", "cores": os.cpu_count(), "commit": _commit(),
                    "shards": len(SHARDS), "apps": args.apps, "scaler_users": args.users}
    users = {f"app-{i}" for i in range(args.users)}
    with Cluster() as cluster, tempfile.TemporaryDirectory() as directory:
        cluster.start_master()
        for shard in SHARDS:
            cluster.start(shard, shard=shard)
        cluster.settle(5.0)
        cluster.create_apps(0, args.users, traits=[{"type": "scaler"}])
        cluster.create_apps(args.users, args.apps)
        result["seconds_to_all_running"] = round(cluster.wait_running(args.apps, args.timeout, set(SHARDS)), 1)
        time.sleep(args.settle)
        revisions_before = len(cluster.client.list_all(APPLICATION_REVISIONS, APPS_NS)[0])

        before, since = state(cluster), last_seq(cluster)
        def_apply_edited(cluster, directory, "hpa", "max: *10 | int", "max: *20 | int")
        with open(os.path.join(directory, "bench-unused.cue"), "w") as fh:
            fh.write(NEW_TRAIT)
        cli(cluster, "def", "apply", os.path.join(directory, "bench-unused.cue"))
        time.sleep(args.window)
        records = writes(cluster, since)
        after = state(cluster)
        changed = changes(before, after)
        result["unused"] = {
            "window_seconds": args.window,
            "new_revisions": len(cluster.client.list_all(APPLICATION_REVISIONS, APPS_NS)[0]) - revisions_before,
            "workflow_runs": len(changed["workflow_run"]), "apps_written": len(changed["app_written"]),
            "writes_for_apps": len([r for r in records if r["resource"] in APP_RESOURCES]),
            "other_writes": counted([r for r in records if r["resource"] not in APP_RESOURCES])}

        before, since = after, last_seq(cluster)
        revisions_before = len(cluster.client.list_all(APPLICATION_REVISIONS, APPS_NS)[0])
        began = time.monotonic()
        def_apply_edited(cluster, directory, "scaler", "replicas: *1 | int", "replicas: *2 | int")

        def revised() -> bool:
            now = state(cluster)
            return all(now[n][0] != before[n][0] for n in users)
        cluster.wait_for(revised, args.timeout, "every scaler user's new revision")
        cluster.wait_running(args.apps, args.timeout)
        seconds = time.monotonic() - began
        time.sleep(args.settle)
        records = writes(cluster, since)
        changed = changes(before, state(cluster))
        non_users = [r for r in records if r["resource"] in APP_RESOURCES and app_of(r) not in users]
        result["used"] = {
            "seconds_until_every_user_runs_its_new_revision": round(seconds, 1),
            "new_revisions": len(cluster.client.list_all(APPLICATION_REVISIONS, APPS_NS)[0]) - revisions_before,
            "apps_with_a_new_revision": len(changed["new_revision"]),
            "exactly_the_users": set(changed["new_revision"]) == users == set(changed["workflow_run"]),
            "workflow_runs": len(changed["workflow_run"]),
            "writes_for_apps": counted([r for r in records if r["resource"] in APP_RESOURCES]),
            "writes_for_non_users": len(non_users),
            "other_writes": counted([r for r in records if r["resource"] not in APP_RESOURCES])}
    unused, used = result["unused"], result["used"]
    result["goals"] = {"unused": "0 revisions, 0 workflow runs, 0 writes for apps",
                       "used": "new revisions and runs for exactly the users, 0 writes for non-users"}
    result["meets_goals"] = (unused["new_revisions"] == unused["workflow_runs"] == unused["writes_for_apps"]
                             == unused["apps_written"] == 0 and used["exactly_the_users"]
                             and used["new_revisions"] == args.users and used["writes_for_non_users"] == 0)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
