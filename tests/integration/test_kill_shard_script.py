"""hack/kill_shard.py, which the README's tour and the dashboard's browser test use, kills the shard it is asked
for and nothing else: the master's pod name (velashard-<template hash>-<n>) holds "shard-0" whenever its hash
starts with 0, and the script once picked it half the time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_shard_named_is_killed_and_the_master_whose_hash_starts_with_its_digit_is_not(tmp_path):
    names = ["velashard-0910f9b1-0", "velashard-shard-0-246b6658-0", "velashard-shard-10-5d1e0c2a-0"]
    procs = {name: subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for name in names}
    try:
        (tmp_path / "processes.json").write_text(json.dumps([{"name": n, "pid": p.pid} for n, p in procs.items()]))
        for _ in range(3):  # the script picks at random among what matches
            out = subprocess.run([sys.executable, "hack/kill_shard.py", "--dir", str(tmp_path), "--shard", "shard-0"],
                                 capture_output=True, text=True, cwd=ROOT, timeout=30)
            assert out.returncode == 0 and "velashard-shard-0-246b6658-0" in out.stdout, out
        procs["velashard-shard-0-246b6658-0"].wait(10)
        assert procs["velashard-0910f9b1-0"].poll() is None and procs["velashard-shard-10-5d1e0c2a-0"].poll() is None
        missing = subprocess.run([sys.executable, "hack/kill_shard.py", "--dir", str(tmp_path), "--shard", "shard-7"],
                                 capture_output=True, text=True, cwd=ROOT, timeout=30)
        assert missing.returncode == 2 and "no shard process" in missing.stderr
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
