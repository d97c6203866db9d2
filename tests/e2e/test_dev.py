"""`velashard dev`: the embedded cluster, a master and shards as processes run by the local kubelet."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.kube.client import KubeClient
from velashard.kube.resources import PODS
from tests.integration.helpers import eventually


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_dev_runs_shards_as_processes_and_serves_apps(tmp_path):
    directory = tmp_path / "dev"
    proc = subprocess.Popen([sys.executable, "-m", "velashard.cli.main", "dev", "--shards", "2", "--apps", "20",
                             "--dir", str(directory)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    pids: list[int] = []
    try:
        eventually(lambda: (directory / "processes.json").exists(), timeout=60, interval=0.2)
        kube = KubeClient.from_kubeconfig(str(directory / "kubeconfig"), shard_id="test")

        def served() -> Counter:
            apps = kube.list(APPLICATIONS, "default")["items"]
            shards = Counter((a["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID) for a in apps
                             if (a.get("status") or {}).get("status") == "running")
            return shards if sum(shards.values()) == 20 else Counter()

        shards = eventually(served, timeout=90, interval=0.5)
        assert set(shards) == {"shard-0", "shard-1"}
        if shutil.which("kubectl"):
            table = subprocess.run(["kubectl", "--kubeconfig", str(directory / "kubeconfig"), "--cache-dir",
                                    str(tmp_path / "cache"), "get", "app", "-n", "default", "-L",
                                    labels.SCHEDULED_SHARD_ID], capture_output=True, text=True, timeout=60).stdout
            assert "SCHEDULED-SHARD-ID" in table and table.count("shard-") == 20
        processes = json.loads((directory / "processes.json").read_text())
        pids = [p["pid"] for p in processes if p.get("pid") and p["name"] != "apiserver"]
        assert len(pids) == 3
        victim = next(p for p in processes if "shard-0" in p["name"])
        os.kill(victim["pid"], signal.SIGKILL)
        killed = time.monotonic()

        def not_ready() -> bool:
            pod = kube.get(PODS, victim["name"], "vela-system")
            return any(c["type"] == "Ready" and c["status"] == "False" for c in pod["status"]["conditions"])

        eventually(not_ready, timeout=10, interval=0.1)
        assert time.monotonic() - killed <= 2.5  # NotReady within about 2 s of the process dying
        restarted = eventually(lambda: next((p for p in json.loads((directory / "processes.json").read_text())
                                            if p["name"] == victim["name"] and p["restarts"] >= 1 and p["ready"]), None),
                               timeout=60, interval=0.5)
        pids.append(restarted["pid"])
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert "velashard dev: stopped" in out and "Traceback" not in out
    eventually(lambda: not any(pid_alive(pid) for pid in pids), timeout=15)
