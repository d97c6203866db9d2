"""`velashard apiserver` as a process: first line, kubeconfig for the official client, clean stop, bad flags."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys

import pytest
from kubernetes import client, config

from tests.integration.helpers import token_codes
from velashard.kube.kubeconfig import bearer_token


def start(*args: str) -> tuple[subprocess.Popen, str]:
    """`velashard apiserver ARGS` and the URL its first line announces."""
    proc = subprocess.Popen([sys.executable, "-m", "velashard.cli.main", "apiserver", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline().strip()
    assert first.startswith("velashard apiserver listening on http://"), first + proc.stderr.read()
    return proc, first.rsplit(" ", 1)[1]


def stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0 and "Traceback" not in err, err
    return err


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


def test_guessable_tokens_get_401_and_the_kubeconfig_is_private(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    proc, url = start("--kubeconfig-out", str(kubeconfig))
    try:
        assert set(token_codes(url).values()) == {401}
        assert stat.S_IMODE(os.stat(kubeconfig).st_mode) == 0o600
        token = bearer_token(str(kubeconfig))
        assert token_codes(url, (token,)) == {token: 200}
    finally:
        stop(proc)


def test_token_auth_file_injects_a_known_token(tmp_path):
    known = "known-token-for-this-test-0123456789"
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(f'{known},ops,ops-uid,"system:masters"\n')
    proc, url = start("--token-auth-file", str(tokens))
    try:
        assert token_codes(url, (known, "ops")) == {known: 200, "ops": 401}
    finally:
        stop(proc)
    tokens.write_text("admin,admin,1\n")  # a guessable token is refused, with the line that has it
    refused = subprocess.run([sys.executable, "-m", "velashard.cli.main", "apiserver", "--token-auth-file",
                              str(tokens)], capture_output=True, text=True, timeout=30)
    assert refused.returncode == 2 and f"{tokens}:1: the token has fewer than 16 characters" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_listening_beyond_loopback_is_refused_unless_allowed_and_then_warned_about():
    refused = subprocess.run([sys.executable, "-m", "velashard.cli.main", "apiserver", "--host", "0.0.0.0"],
                             capture_output=True, text=True, timeout=30)
    assert refused.returncode == 2 and "--allow-remote" in refused.stderr and "Traceback" not in refused.stderr
    proc, url = start("--host", "0.0.0.0", "--allow-remote")
    try:
        assert url.startswith("http://0.0.0.0:")
        assert set(token_codes(url.replace("0.0.0.0", "127.0.0.1"), ("admin",)).values()) == {401}
    finally:
        err = stop(proc)
    assert "WARNING" in err and "listening beyond loopback" in err


@pytest.mark.parametrize("args,fragment", [
    (["--port", "70000"], "--port"),
    (["--service-endpoint", "nonsense"], "NS/NAME=HOST:PORT"),
    (["--watch-history", "0"], "--watch-history"),
    (["--nodes", "-1"], "--nodes"),
    (["--bogus"], "unrecognized arguments"),
    (["--host", "10.0.0.1"], "--allow-remote"),
    (["--token-auth-file", "/nonexistent/tokens.csv"], "--token-auth-file /nonexistent/tokens.csv"),
])
def test_bad_flags_exit_2(args, fragment):
    proc = subprocess.run([sys.executable, "-m", "velashard.cli.main", "apiserver", *args], capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 2 and fragment in proc.stderr and "Traceback" not in proc.stderr


def test_unknown_subcommand_exit_2():
    proc = subprocess.run([sys.executable, "-m", "velashard.cli.main", "frobnicate"], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 2 and "unknown subcommand" in proc.stderr
