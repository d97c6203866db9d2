"""Kubeconfig files and the in-cluster ServiceAccount, read as kubectl reads them (kube/config.py)."""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from velashard.kube import config
from velashard.kube.config import ClientConfig, ConfigError
from velashard.kube.transport import proxy_for


def write(path: Path, doc: dict) -> str:
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def kubeconfig(cluster: dict, user: dict, current: str = "c") -> dict:
    return {"apiVersion": "v1", "kind": "Config", "current-context": current,
            "clusters": [{"name": "k", "cluster": cluster}], "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}


def test_a_token_user_and_a_ca_file_relative_to_the_kubeconfig(tmp_path: Path):
    (tmp_path / "ca.pem").write_bytes(b"PEM")
    path = write(tmp_path / "config", kubeconfig({"server": "https://h:6443/", "certificate-authority": "ca.pem",
                                                  "tls-server-name": "api"}, {"token": "t0k"}))
    loaded = config.load(path)
    assert (loaded.host, loaded.ca_data, loaded.tls_server_name) == ("https://h:6443", b"PEM", "api")
    assert loaded.authorization() == "Bearer t0k"


def test_certificate_data_basic_auth_and_insecure(tmp_path: Path):
    b64 = base64.b64encode
    path = write(tmp_path / "config", kubeconfig(
        {"server": "https://h", "certificate-authority-data": b64(b"CA").decode(), "insecure-skip-tls-verify": True},
        {"client-certificate-data": b64(b"CERT").decode(), "client-key-data": b64(b"KEY").decode(),
         "username": "ann", "password": "pw"}))
    loaded = config.load(path)
    assert (loaded.ca_data, loaded.cert_data, loaded.key_data, loaded.insecure) == (b"CA", b"CERT", b"KEY", True)
    assert loaded.authorization() == "Basic " + b64(b"ann:pw").decode()


def test_kubeconfig_files_merge_the_first_to_name_an_entry_wins(tmp_path: Path, monkeypatch):
    first = write(tmp_path / "a", {"current-context": "c", "users": [{"name": "u", "user": {"token": "first"}}]})
    second = write(tmp_path / "b", kubeconfig({"server": "http://h"}, {"token": "second"}, current="other"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([first, str(tmp_path / "missing"), second]))
    loaded = config.load()
    assert (loaded.host, loaded.authorization()) == ("http://h", "Bearer first")


def test_what_cannot_be_used_is_a_clear_error(tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        config.load(str(tmp_path / "nothing"))
    no_context = write(tmp_path / "a", {"clusters": []})
    with pytest.raises(ConfigError, match="current-context"):
        config.load(no_context)
    provider = write(tmp_path / "b", kubeconfig({"server": "https://h"}, {"auth-provider": {"name": "gcp"}}))
    with pytest.raises(ConfigError, match="auth-provider"):
        config.load(provider)
    unnamed = write(tmp_path / "c", dict(kubeconfig({"server": "https://h"}, {}), clusters=[]))
    with pytest.raises(ConfigError, match='no cluster named "k"'):
        config.load(unnamed)


def test_a_token_file_is_read_again_after_a_minute(tmp_path: Path, monkeypatch):
    token_file = tmp_path / "token"
    token_file.write_text("one\n")
    path = write(tmp_path / "config", kubeconfig({"server": "https://h"}, {"tokenFile": "token"}))
    clock = [1000.0]
    monkeypatch.setattr(config.time, "monotonic", lambda: clock[0])
    loaded = config.load(path)
    assert loaded.authorization() == "Bearer one"
    token_file.write_text("two")
    assert loaded.authorization() == "Bearer one"
    clock[0] += config.TOKEN_REREAD_SECONDS
    assert loaded.authorization() == "Bearer two"


def test_a_401_rereads_the_token_file_at_once_and_once_for_all_requests_that_used_the_old_token(tmp_path: Path):
    token_file = tmp_path / "token"
    token_file.write_text("one\n")
    loaded = config.load(write(tmp_path / "config", kubeconfig({"server": "https://h"}, {"tokenFile": "token"})))
    used = loaded.authorization()
    assert loaded.refreshed(used) is False  # the file says the same: sending again would not help
    token_file.write_text("two")  # rotated in place, well within the minute
    assert loaded.refreshed(used) is True and loaded.authorization() == "Bearer two"
    token_file.write_text("three")
    assert loaded.refreshed(used) is True  # another request that used "one": "two" is tried, not reread
    assert loaded.authorization() == "Bearer two"
    token_file.unlink()
    assert loaded.refreshed("Bearer two") is False  # unreadable: the 401 stands
    static = config.load(write(tmp_path / "static", kubeconfig({"server": "https://h"}, {"token": "t0k"})))
    assert static.refreshed(static.authorization()) is False


def exec_plugin(tmp_path: Path, expires: str) -> tuple[Path, Path]:
    """A credential plugin (the script) that logs each run's KUBERNETES_EXEC_INFO, a line a run (the log), and
    answers the token $PREFIX (else "tok-") followed by its run count, valid until `expires`."""
    script, calls = tmp_path / "plugin.py", tmp_path / "calls"
    script.write_text(
        "import json, os\n"
        f"open({str(calls)!r}, 'a').write(os.environ['KUBERNETES_EXEC_INFO'] + '\\n')\n"
        f"n = sum(1 for _ in open({str(calls)!r}))\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential', 'status': {\n"
        f"    'token': os.environ.get('PREFIX', 'tok-') + str(n), 'expirationTimestamp': {expires!r}}}}}))\n")
    return script, calls


def test_a_401_runs_the_exec_plugin_again_before_the_expiry_it_gave(tmp_path: Path):
    script, calls = exec_plugin(tmp_path, "2999-01-01T00:00:00Z")
    loaded = config.load(write(tmp_path / "config", kubeconfig({"server": "https://h"}, {"exec": {
        "command": sys.executable, "args": [str(script)]}})))
    assert loaded.authorization() == loaded.authorization() == "Bearer tok-1"  # valid: run once
    assert loaded.refreshed("Bearer tok-1") and loaded.authorization() == "Bearer tok-2"
    assert len(calls.read_text().splitlines()) == 2


def test_an_exec_plugin_is_run_with_its_env_and_again_once_its_token_expired(tmp_path: Path):
    script, calls = exec_plugin(tmp_path, "2000-01-01T00:00:00Z")
    path = write(tmp_path / "config", kubeconfig({"server": "https://h"}, {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable, "args": [str(script)],
        "env": [{"name": "PREFIX", "value": "env-"}], "provideClusterInfo": True}}))
    loaded = config.load(path)
    assert loaded.authorization() == "Bearer env-2"  # expired at once: every use runs it again
    info = json.loads(calls.read_text().splitlines()[0])
    assert info["kind"] == "ExecCredential" and info["spec"]["cluster"]["server"] == "https://h"
    failing = write(tmp_path / "bad", kubeconfig({"server": "https://h"}, {"exec": {
        "command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"], "installHint": "install it"}}))
    with pytest.raises(ConfigError, match="exited with 3"):
        config.load(failing)


def test_in_cluster_reads_the_service_account(tmp_path: Path, monkeypatch):
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_bytes(b"CA")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    loaded = config.in_cluster(str(tmp_path))
    assert (loaded.host, loaded.ca_data, loaded.authorization()) == ("https://[fd00::1]:443", b"CA", "Bearer sa-token")


def test_the_proxy_comes_from_the_kubeconfig_or_the_environment_unless_exempted(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    assert proxy_for(ClientConfig("https://api.example:6443")) == "http://proxy:3128"
    assert proxy_for(ClientConfig("https://api.internal.example:6443")) is None
    assert proxy_for(ClientConfig("https://api.example", proxy_url="http://other:1")) == "http://other:1"
