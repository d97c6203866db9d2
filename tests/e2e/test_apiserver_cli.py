"""`velashard apiserver` as a process: first line, kubeconfig for the official client, clean stop, bad flags."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from kubernetes import client, config


def test_foreground_server_with_kubeconfig_and_sigterm(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen([sys.executable, "-m", "velashard.cli.main", "apiserver", "--port", "0",
                             "--kubeconfig-out", str(kubeconfig), "--simulate-workloads"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline().strip()
        assert first.startswith("velashard apiserver listening on http://127.0.0.1:")
        api = config.new_client_from_config(config_file=str(kubeconfig))
        names = {ns.metadata.name for ns in client.CoreV1Api(api).list_namespace().items}
        assert {"default", "kube-system"} <= names
        api.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0 and "Traceback" not in err


@pytest.mark.parametrize("args,fragment", [
    (["--port", "70000"], "--port"),
    (["--service-endpoint", "nonsense"], "NS/NAME=HOST:PORT"),
    (["--watch-history", "0"], "--watch-history"),
    (["--nodes", "-1"], "--nodes"),
    (["--bogus"], "unrecognized arguments"),
])
def test_bad_flags_exit_2(args, fragment):
    proc = subprocess.run([sys.executable, "-m", "velashard.cli.main", "apiserver", *args], capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 2 and fragment in proc.stderr and "Traceback" not in proc.stderr


def test_unknown_subcommand_exit_2():
    proc = subprocess.run([sys.executable, "-m", "velashard.cli.main", "frobnicate"], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 2 and "unknown subcommand" in proc.stderr
