"""Credentials of the embedded API server: random tokens per server and user, private kubeconfigs, loopback."""

from __future__ import annotations

import os
import stat

import pytest
from kubernetes import client, config

from tests.integration.helpers import token_codes
from velashard.apiserver.auth.authn import read_token_file
from velashard.apiserver.http.server import APIServer, is_loopback
from velashard.kube.kubeconfig import bearer_token, write_private


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_no_guessable_token_is_accepted_and_the_kubeconfigs_token_is(make_apiserver, tmp_path):
    server = make_apiserver()
    alice = server.write_kubeconfig(str(tmp_path / "alice"), user="alice")
    assert set(token_codes(server.url).values()) == {401}  # "admin" and "alice" included
    token = bearer_token(server.kubeconfig)
    assert token == server.admin_token and len(token) >= 40
    assert token_codes(server.url, (token,)) == {token: 200}
    assert bearer_token(alice) not in (token, "alice")
    api = config.new_client_from_config(config_file=alice)
    review = client.AuthenticationV1Api(api).create_self_subject_review({"metadata": {}})
    assert review.status.user_info.username == "alice"
    api.close()


def test_each_server_makes_its_own_tokens(make_apiserver):
    first, second = make_apiserver(), make_apiserver()
    assert first.admin_token != second.admin_token
    assert token_codes(second.url, (first.admin_token,)) == {first.admin_token: 401}


def test_kubeconfigs_are_private_from_creation_and_replace_older_files(make_apiserver, tmp_path):
    server = make_apiserver()
    path = tmp_path / "kubeconfig"
    path.write_text("left over, world-readable")
    path.chmod(0o644)
    server.write_kubeconfig(str(path))
    assert mode(path) == 0o600 and bearer_token(str(path)) == server.admin_token
    assert mode(server.kubeconfig) == 0o600
    assert sorted(os.listdir(tmp_path)) == sorted(["kubeconfig", os.path.basename(server.kubeconfig)])  # no tmp


def test_write_private_keeps_the_mode_under_a_permissive_umask(tmp_path):
    old = os.umask(0)
    try:
        write_private(str(tmp_path / "token"), "secret\n")
    finally:
        os.umask(old)
    assert mode(tmp_path / "token") == 0o600 and (tmp_path / "token").read_text() == "secret\n"


@pytest.mark.parametrize("host,loopback", [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True),
                                           ("localhost", True), ("0.0.0.0", False), ("", False), ("::", False),
                                           ("10.1.2.3", False), ("myhost", False)])
def test_loopback_hosts(host, loopback):
    assert is_loopback(host) is loopback


def test_listening_beyond_loopback_needs_to_be_asked_for():
    with pytest.raises(ValueError, match="allow_remote"):
        APIServer(host="0.0.0.0")


def test_token_file_in_kube_apiserver_format(tmp_path):
    path = tmp_path / "tokens.csv"
    path.write_text('0123456789abcdef0123,ops,u-1,"system:masters,ops"\n\nfedcba9876543210fedc,ci,u-2\n')
    assert read_token_file(str(path)) == [("0123456789abcdef0123", "ops", "u-1", ["system:masters", "ops"]),
                                          ("fedcba9876543210fedc", "ci", "u-2", [])]
    for text, fragment in (("admin,admin,1\n", "fewer than 16 characters"), ("onlytoken\n", "expected token,user"),
                           ('0123456789abcdef0123,ops,u,"unterminated\n', "tokens.csv")):
        path.write_text(text)
        with pytest.raises(ValueError, match=fragment):
            read_token_file(str(path))
