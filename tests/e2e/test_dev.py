"""`velashard dev`: the chart and the addon installed by real Helm, their processes run by the local kubelet under
their ServiceAccounts; every process's log in DIR/logs/, and on a pipe one line per change and the problems that
need the user, each once."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import socket
import signal
import stat
import subprocess
import sys
import threading
import time
from collections import Counter

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.kube.client import KubeClient
from velashard.kube.resources import PODS
from tests.integration.helpers import eventually, token_codes


ROOT = pathlib.Path(__file__).resolve().parents[2]


def pod_processes(directory) -> list[dict]:
    """The pods' processes that DIR/processes.json lists (it lists the API server from the start)."""
    return [p for p in json.loads((directory / "processes.json").read_text()) if p["name"] != "apiserver"]


def cache_dir(pid: int) -> str | None:
    """The --cache-dir a process was started with (the kubelet rewrote the chart's into the pod's emptyDir)."""
    args = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    return next((a.split("=", 1)[1] for a in args if a.startswith("--cache-dir=")), None)


def shard_id(pod: str) -> str:
    """velashard-shard-0-<template>-<n> is shard-0's, velashard-<template>-<n> the master's."""
    return "-".join(pod.split("-")[1:3]) if pod.startswith("velashard-shard-") else "master"


def read_lines(stream, lines: list[str]) -> None:
    for line in iter(stream.readline, ""):
        lines.append(line)


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
    output: list[str] = []
    reader = threading.Thread(target=read_lines, args=(proc.stdout, output), daemon=True)
    reader.start()
    pids: list[int] = []
    try:
        eventually(lambda: any("velashard dev: API server" in line for line in output), timeout=120, interval=0.1)
        # Dev announces itself once its processes are ready; processes.json lists them (from the kubelet's thread,
        # as soon as it knows of a change).
        eventually(lambda: sum(p["ready"] for p in pod_processes(directory)) == 3, timeout=30, interval=0.1)
        kube = KubeClient.from_kubeconfig(str(directory / "kubeconfig"), shard_id="test")
        # Its API server accepts no guessable token, and every kubeconfig (the user's, the pods') is private.
        api_port = json.loads((directory / "processes.json").read_text())[0]["ports"]["api"]
        assert set(token_codes(f"http://127.0.0.1:{api_port}").values()) == {401}
        modes = {f.name: stat.S_IMODE(f.stat().st_mode) for f in directory.glob("kubeconfig*")}
        assert modes == {"kubeconfig": 0o600, "kubeconfig-velashard": 0o600, "kubeconfig-velashard-shard": 0o600}

        def served() -> Counter:
            apps = kube.list(APPLICATIONS, "default")["items"]
            shards = Counter((a["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID) for a in apps
                             if (a.get("status") or {}).get("status") == "running")
            return shards if sum(shards.values()) == 20 else Counter()

        shards = eventually(served, timeout=90, interval=0.5)
        assert set(shards) == {"shard-0", "shard-1"}  # the addon's shards, cloned from the chart's master
        # Each process keeps its caches in its pod's emptyDir (the chart's cacheDir, which the addon's shards
        # inherit); the files themselves are looked for in test_day2, whose fleet has long settled.
        volumes = directory / "volumes"
        dirs = {p["name"]: cache_dir(p["pid"]) for p in pod_processes(directory)}
        assert dirs == {name: str(volumes / name / "cache") for name in dirs} and len(dirs) == 3, dirs
        assert {shard_id(name) for name in dirs} == {"master", "shard-0", "shard-1"}
        # A shard that does not answer its readiness probe for a moment is not NotReady: the kubelet waits for the
        # probe's failureThreshold (3) failures in a row, each allowed its timeoutSeconds (1 s).
        stalled = next(p for p in pod_processes(directory) if p["name"].startswith("velashard-shard-1-"))
        os.kill(stalled["pid"], signal.SIGSTOP)
        try:
            time.sleep(1.0)
        finally:
            os.kill(stalled["pid"], signal.SIGCONT)
        # No controller process runs as admin: each uses a token of its pod's ServiceAccount.
        audit = kube.request("get", "GET", "/debug/audit", query={"since": "0"})["items"]
        users = {r["user"] for r in audit if "velashard/" in r["userAgent"] and "shard=" in r["userAgent"]
                 and "shard=test" not in r["userAgent"] and "shard=dev" not in r["userAgent"]}
        assert users == {"system:serviceaccount:vela-system:velashard",
                         "system:serviceaccount:vela-system:velashard-shard"}, users
        # The mutating webhook was reached through the chart's Service: apps were placed at admission.
        assert not [r for r in audit if r["resource"] == "applications" and r["verb"] == "patch"
                    and "shard=master" in r["userAgent"] and r["namespace"] == "default"]
        if shutil.which("kubectl"):
            table = subprocess.run(["kubectl", "--kubeconfig", str(directory / "kubeconfig"), "--cache-dir",
                                    str(tmp_path / "cache"), "get", "app", "-n", "default", "-L",
                                    labels.SCHEDULED_SHARD_ID], capture_output=True, text=True, timeout=60).stdout
            assert "SCHEDULED-SHARD-ID" in table and table.count("shard-") == 20
        processes = pod_processes(directory)
        pids = [p["pid"] for p in processes if p.get("pid")]
        assert len(pids) == 3
        victim = next(p for p in processes if p["name"].startswith("velashard-shard-0-"))
        os.kill(victim["pid"], signal.SIGKILL)

        def not_ready() -> bool:
            pod = kube.get(PODS, victim["name"], "vela-system")
            return any(c["type"] == "Ready" and c["status"] == "False" for c in pod["status"]["conditions"]) and \
                "terminated" in pod["status"]["containerStatuses"][0]["state"]

        # NotReady because the process died (its container terminated), as the kubelet sees a dead container at
        # once, not after its readiness probe failed three times in a row.
        eventually(not_ready, timeout=30, interval=0.1)
        # Down longer than dev's orphan grace period (3 s): its apps move to the other shard.
        eventually(lambda: served() == Counter({"shard-1": 20}), timeout=60, interval=0.5)
        restarted = eventually(lambda: next((p for p in pod_processes(directory)
                                            if p["name"] == victim["name"] and p["restarts"] >= 1 and p["ready"]), None),
                               timeout=60, interval=0.5)
        pids.append(restarted["pid"])
        # The container restarted in the same pod, with the same emptyDir.
        assert cache_dir(restarted["pid"]) == str(volumes / victim["name"] / "cache") == dirs[victim["name"]]
        # The view says so on its next refresh (a second; far more when the machine is busy).
        eventually(lambda: sum(line.endswith(" shard shard-0 ready\n") for line in output) == 2, timeout=45,
                   interval=0.2)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        reader.join(timeout=10)
    out = "".join(output)
    assert proc.returncode == 0, out
    assert "velashard dev: stopped" in out and "Traceback" not in out
    eventually(lambda: not any(pid_alive(pid) for pid in pids), timeout=15)
    # Piped, dev prints one line per change, never its table, and no log line: those are in DIR/logs/.
    assert "velashard dev —" not in out and not re.search(r"\b(WARNING|ERROR|INFO)\b", out), out
    changes = [line.split(" ", 1)[1] for line in output if re.match(r"\d\d:\d\d:\d\d ", line)]
    # and the lines that say it started (with the dashboard's URL) and stopped
    assert len(changes) == len(output) - 3, out
    assert any(re.fullmatch(r"velashard dev: dashboard http://127\.0\.0\.1:\d+/\n", line) for line in output), out
    for i in range(20):
        app = f"default/sample-{i}"
        assert sum(line.startswith(f"app {app} placed on shard-") for line in changes) == 1, out
        assert f"app {app} healthy\n" in changes, out
    moved = [line for line in changes if line.startswith("app default/sample-") and " moved shard-0 -> shard-1" in line]
    assert len(moved) == shards["shard-0"], out
    assert changes.index("shard shard-0 gone\n") < changes.index(moved[0]), out
    assert {"shard master ready\n", "shard shard-1 ready\n"} <= set(changes), out
    assert "shard shard-1 gone\n" not in changes, out  # the stalled second was not a failure
    logs = directory / "logs"
    listed = json.loads((directory / "processes.json").read_text())
    assert listed[0]["log"] == str(logs / "apiserver.log") and (logs / "apiserver.log").exists()
    assert all(pathlib.Path(p["log"]).parent == logs and pathlib.Path(p["log"]).stat().st_size for p in listed[1:])


def available(table: str) -> set[str]:
    """The shards `velashard shards` lists as available."""
    return {line.split()[0] for line in table.splitlines()[1:] if line.split() and line.split()[-1] == "yes"}


def broken_copy(tmp_path, path: str, text: str) -> str:
    """A copy of velashard and its chart with one file replaced, for `PYTHONPATH`: a broken release."""
    tree = tmp_path / "tree"
    for part in ("velashard", "helm"):
        shutil.copytree(ROOT / part, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
    (tree / path).write_text(text)
    return str(tree)


def dev(directory, pythonpath: str | None = None, *flags: str) -> subprocess.Popen:
    """`velashard dev`, from the tree on `pythonpath` if given (run elsewhere than here: `-m` puts the working
    directory first on the path)."""
    env = dict(os.environ, PYTHONPATH=pythonpath) if pythonpath else None
    return subprocess.Popen([sys.executable, "-m", "velashard.cli.main", "dev", "--dir", str(directory), *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=pythonpath)


def test_a_chart_that_does_not_install_is_said_once_with_the_log_to_read(tmp_path):
    tree = broken_copy(tmp_path, "helm/velashard/templates/broken.yaml", '{{ fail "broken on purpose" }}\n')
    proc = dev(tmp_path / "dev", tree, "--shards", "1")
    out, err = proc.communicate(timeout=120)
    log = tmp_path / "dev" / "logs" / "apiserver.log"
    assert proc.returncode == 1, (out, err)
    said = err.splitlines()
    assert len(said) == 2 and said[0].startswith("velashard dev: the chart did not install: "), err
    assert "broken on purpose" in said[0] and said[1] == f"  the log: {log}", err
    assert "Traceback" in log.read_text()


def test_a_shard_that_keeps_crashing_is_said_once_with_its_log(tmp_path):
    # the controller manager of this copy fails at import: every pod's process exits at once
    tree = broken_copy(tmp_path, "velashard/cli/manager.py", 'raise SystemExit("broken on purpose")\n')
    directory = tmp_path / "dev"
    proc = dev(directory, tree, "--shards", "0")
    errors: list[str] = []
    reader = threading.Thread(target=read_lines, args=(proc.stderr, errors), daemon=True)
    reader.start()
    try:
        eventually(lambda: errors, timeout=90, interval=0.5)
        time.sleep(3)  # dev looks at its processes every 0.2 s meanwhile: it says nothing new
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
        reader.join(timeout=10)
    [master] = pod_processes(directory)
    assert errors == [f"velashard dev: {master['name']} keeps crashing (3 restarts); its log: {master['log']}\n"]
    assert "broken on purpose" in pathlib.Path(master["log"]).read_text()


def test_a_port_in_use_is_said_with_what_to_do(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = dev(tmp_path / "dev", None, "--port", str(port))
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and out == ""
    assert err == f"velashard dev: --port {port}: the port is in use (another velashard dev?); choose another, " \
                  "or leave --port out for a free one\n"


def test_the_addon_scales_shards_in_dev_and_a_removed_shards_apps_move(tmp_path):
    directory = tmp_path / "dev"
    proc = subprocess.Popen([sys.executable, "-m", "velashard.cli.main", "dev", "--shards", "1", "--apps", "6",
                             "--dir", str(directory)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "velashard.cli.main", *args, "--kubeconfig",
                               str(directory / "kubeconfig")], capture_output=True, text=True, timeout=60)

    def placement(count: int) -> Counter:
        apps = kube.list(APPLICATIONS, "default")["items"]
        running = Counter((a["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID) for a in apps
                          if (a.get("status") or {}).get("status") == "running")
        return running if sum(running.values()) == count else Counter()

    try:
        # Pod processes are listed once the chart is installed, so the CRDs exist by then.
        eventually(lambda: (directory / "processes.json").exists() and pod_processes(directory), timeout=90,
                   interval=0.2)
        kube = KubeClient.from_kubeconfig(str(directory / "kubeconfig"), shard_id="test")
        eventually(lambda: placement(6), timeout=90, interval=0.5)
        addon = ("addon", "enable", "vela-core-shard-manager", "deploymentName=velashard", "instanceName=velashard",
                 "serviceAccountName=velashard-shard")  # as the README tells users
        enabled = cli(*addon, "nShards=2")
        assert enabled.returncode == 0, enabled.stderr
        ready_shards = lambda: {p["name"].rsplit("-", 2)[0] for p in json.loads(
            (directory / "processes.json").read_text()) if p.get("ready") and p["name"].startswith("velashard-shard-")}
        eventually(lambda: ready_shards() == {"velashard-shard-0", "velashard-shard-1"}, timeout=90, interval=0.5)
        # The new shard takes apps once the master counts it available (its pod Ready, its Lease held).
        eventually(lambda: available(cli("shards").stdout) >= {"shard-0", "shard-1"}, timeout=60, interval=0.5)
        time.sleep(1)  # the master's webhook hears of it from its informers
        for i in range(6, 12):
            kube.create(APPLICATIONS, {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
                                       "metadata": {"name": f"extra-{i}", "namespace": "default"},
                                       "spec": {"components": [{"name": f"extra-{i}", "type": "worker",
                                                                "properties": {"image": "busybox"}}]}})
        spread = eventually(lambda: placement(12), timeout=90, interval=0.5)
        assert spread["shard-0"] > 0 and spread["shard-1"] > 0  # the new shards receive apps
        pods = {shard: p["name"] for p in pod_processes(directory) for shard in [shard_id(p["name"])]}
        assert all((directory / "volumes" / pod / "cache").is_dir() for pod in pods.values()), pods
        scaled_down = cli(*addon, "nShards=1")
        assert scaled_down.returncode == 0, scaled_down.stderr
        back = eventually(lambda: (lambda p: p if set(p) == {"shard-0"} else None)(placement(12)), timeout=120,
                          interval=1.0)
        assert back["shard-0"] == 12
        # The removed shard's pod is gone, and its emptyDir with it; the others keep theirs.
        eventually(lambda: not (directory / "volumes" / pods["shard-1"]).exists(), timeout=60, interval=0.5)
        assert (directory / "volumes" / pods["shard-0"] / "cache").is_dir()
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
