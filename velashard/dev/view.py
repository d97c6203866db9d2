"""What `velashard dev` shows: on a terminal, a live table of shards and applications; elsewhere (a pipe, a file,
a CI log), one line per change. Problems that need the user are shown once each, with where to look; everything
else the processes say is in their logs.

The data is a Snapshot taken from the API server; `changes` and `table` are pure functions of snapshots.
"""

from __future__ import annotations

import re
import sys
import time
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any, TextIO

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS, SYSTEM_NAMESPACE
from velashard.kube.client import KubeClient
from velashard.kube.resources import PODS

UNSCHEDULED = "-"
RUNNING = "running"
# A pod's process restarted this often keeps crashing: said once, with its log (one exit is a killed shard).
CRASH_LOOP_RESTARTS = 3


@dataclass(frozen=True)
class Snapshot:
    """Shards by id with their (ready, total) pods; apps by NAMESPACE/NAME with their shard and status."""

    shards: dict[str, tuple[int, int]]
    apps: dict[str, tuple[str, str]]


def snapshot(pods: list[dict[str, Any]], apps: list[dict[str, Any]]) -> Snapshot:
    shards: dict[str, tuple[int, int]] = {}
    for pod in pods:
        shard = (pod["metadata"].get("labels") or {}).get(labels.SHARD_ID, "?")
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (pod.get("status") or {}).get("conditions") or [])
        was_ready, total = shards.get(shard, (0, 0))
        shards[shard] = (was_ready + ready, total + 1)
    placed = {f'{a["metadata"]["namespace"]}/{a["metadata"]["name"]}':
              ((a["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID, UNSCHEDULED),
               (a.get("status") or {}).get("status") or "") for a in apps}
    return Snapshot(shards, placed)


def _natural(name: str) -> list:
    """sample-2 before sample-10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def changes(before: Snapshot, after: Snapshot, last_shard: dict[str, str]) -> list[str]:
    """One line per change from before to after: a shard ready or gone, an app placed, moved, healthy, no longer
    healthy or deleted. `last_shard` (app -> the shard it was last placed on) is updated: an app that loses its
    label on the way to another shard reads as moved, not as placed anew."""
    lines = []
    for shard in sorted(set(before.shards) | set(after.shards), key=_natural):
        was = before.shards.get(shard, (0, 0))[0] > 0
        now = after.shards.get(shard, (0, 0))[0] > 0
        if now != was:
            lines.append(f"shard {shard} {'ready' if now else 'gone'}")
    for app in sorted(set(before.apps) | set(after.apps), key=_natural):
        if app not in after.apps:
            lines.append(f"app {app} deleted")
            last_shard.pop(app, None)
            continue
        shard, status = after.apps[app]
        old_status = before.apps.get(app, (UNSCHEDULED, ""))[1]
        if shard != UNSCHEDULED and last_shard.get(app) != shard:
            previous = last_shard.get(app)
            lines.append(f"app {app} moved {previous} -> {shard}" if previous else f"app {app} placed on {shard}")
            last_shard[app] = shard
        if status == RUNNING and old_status != RUNNING:
            lines.append(f"app {app} healthy")
        elif status != RUNNING and old_status == RUNNING:
            lines.append(f"app {app} not healthy ({status or 'no status'})")
    return lines


def table(snap: Snapshot, moves: list[str], problems: list[str]) -> str:
    """The live view: shards with ready pods, apps and healthy apps; recent moves; problems that need the user."""
    per_shard = Counter(shard for shard, _ in snap.apps.values())
    healthy = Counter(shard for shard, status in snap.apps.values() if status == RUNNING)
    lines = [f"velashard dev — {len(snap.apps)} applications, {sum(healthy.values())} running",
             "", f"{'SHARD':<14}{'PODS READY':<12}{'APPS':<8}{'HEALTHY':<8}"]
    for shard in sorted(set(snap.shards) | {s for s in per_shard if s != UNSCHEDULED}, key=_natural):
        ready, total = snap.shards.get(shard, (0, 0))
        lines.append(f"{shard:<14}{f'{ready}/{total}':<12}{per_shard.get(shard, 0):<8}{healthy.get(shard, 0):<8}")
    if per_shard.get(UNSCHEDULED):
        lines.append(f"{'(unscheduled)':<14}{'':<12}{per_shard[UNSCHEDULED]:<8}")
    lines += ["", "recent moves:"] + (moves or ["  none"])
    if problems:
        lines += ["", "needs your attention:"] + [f"  {p}" for p in problems]
    return "\n".join(lines)


class DevView:
    """Shows the cluster on `out` (a live table on a terminal, else one line per change) and problems once each
    (in the table on a terminal, else on `err`)."""

    def __init__(self, client: KubeClient, out: TextIO, err: TextIO = sys.stderr):
        self.client = client
        self.out = out
        self.err = err
        self.live = out.isatty()
        self.shown = Snapshot({}, {})
        self.last_shard: dict[str, str] = {}
        self.moves: deque[str] = deque(maxlen=6)
        self.problems: list[str] = []
        self._reported: set[str] = set()

    def refresh(self) -> None:
        pods = self.client.list(PODS, SYSTEM_NAMESPACE, label_selector=f"{labels.POD_NAME_LABEL}="
                                                                       f"{labels.POD_NAME_VALUE}")["items"]
        apps = self.client.list(APPLICATIONS)["items"]  # the dev view may list everything; controllers never do
        snap = snapshot(pods, apps)
        now = time.strftime("%H:%M:%S")
        lines = changes(self.shown, snap, self.last_shard)
        self.shown = snap
        self.moves.extendleft(f"  {now} {line[len('app '):]}" for line in lines if " moved " in line)
        if self.live:
            self.out.write("\x1b[2J\x1b[H" + table(snap, list(self.moves), self.problems) +
                           "\n\nCtrl-C stops everything.\n")
        else:
            self.out.writelines(f"{now} {line}\n" for line in lines)
        self.out.flush()

    def watch_processes(self, processes: list[dict[str, Any]]) -> None:
        """Say once of each pod's process that keeps crashing, with its log."""
        for proc in processes:
            if proc["restarts"] >= CRASH_LOOP_RESTARTS:
                self.problem(f"crash:{proc['name']}", f"{proc['name']} keeps crashing ({proc['restarts']} restarts); "
                                                      f"its log: {proc['log']}")

    def problem(self, key: str, message: str) -> None:
        if key in self._reported:
            return
        self._reported.add(key)
        self.problems.append(message)
        if not self.live:
            print(f"velashard dev: {message}", file=self.err, flush=True)
