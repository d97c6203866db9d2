"""The webhook's TLS files: atomic writes, a context reloaded when they change (the last good one while they do
not load), and the certificates every master replica shares."""

from __future__ import annotations

import datetime
import os
import ssl
import stat
from types import SimpleNamespace

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from velashard.webhook.certificates import make_ca, make_serving_cert
from velashard.webhook.certstore import bundle, covers, needs_renewal
from velashard.webhook.tls import ReloadingContext, file_signature, write_atomically


def pair_files(tmp_path, pair):
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    write_atomically(str(key), pair.key_pem)
    write_atomically(str(cert), pair.cert_pem, 0o644)
    return str(cert), str(key)


def factory_for(conf):
    def factory() -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(conf.certfile, conf.keyfile)
        return context
    return factory


def test_write_atomically_replaces_in_one_step_and_writes_nothing_unchanged(tmp_path):
    path = str(tmp_path / "tls.key")
    assert write_atomically(path, b"one") is True
    inode = os.stat(path).st_ino
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert write_atomically(path, b"one") is False and os.stat(path).st_ino == inode
    assert write_atomically(path, b"two", 0o644) is True
    assert open(path, "rb").read() == b"two" and os.stat(path).st_ino != inode
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["tls.key"]  # no temporary file left behind


def test_the_context_is_built_again_only_when_the_files_change_and_the_last_good_one_serves_meanwhile(tmp_path):
    ca = make_ca()
    first, second = make_serving_cert(ca, ["127.0.0.1"]), make_serving_cert(ca, ["127.0.0.1"])
    cert, key = pair_files(tmp_path, first)
    conf = SimpleNamespace(certfile=cert, keyfile=key)
    hook = ReloadingContext()
    built = []

    def factory() -> ssl.SSLContext:
        built.append(1)
        return factory_for(conf)()

    one = hook(conf, factory)
    assert hook(conf, factory) is one and len(built) == 1  # unchanged files: the same context, nothing read
    # Half way through a rotation (the new certificate beside the old key) the files do not load: the old serves.
    write_atomically(cert, second.cert_pem, 0o644)
    assert hook(conf, factory) is one and hook(conf, factory) is one
    write_atomically(key, second.key_pem)
    two = hook(conf, factory)
    assert two is not one and hook(conf, factory) is two


def test_files_that_never_loaded_are_an_error_at_once(tmp_path):
    conf = SimpleNamespace(certfile=str(tmp_path / "tls.crt"), keyfile=str(tmp_path / "tls.key"))
    with pytest.raises(OSError):
        ReloadingContext()(conf, factory_for(conf))


def test_file_signature_changes_with_a_replaced_file(tmp_path):
    path = str(tmp_path / "f")
    assert file_signature(path) == (None,)
    write_atomically(path, b"a")
    before = file_signature(path)
    write_atomically(path, b"b")
    assert file_signature(path) != before


def test_renewal_is_due_before_expiry_and_when_a_host_is_not_covered():
    now = datetime.datetime.now(datetime.timezone.utc)
    ca = make_ca(now=now)
    serving = make_serving_cert(ca, ["velashard.vela-system.svc", "127.0.0.1"], days=365, now=now)
    assert not needs_renewal(serving, now) and needs_renewal(serving, now + datetime.timedelta(days=340))
    assert serving.hosts == {"velashard.vela-system.svc", "127.0.0.1"}
    assert covers(serving, ["127.0.0.1"]) and not covers(serving, ["other.vela-system.svc"])


def test_a_ca_bundle_holds_the_ca_it_replaced_while_a_rotation_rolls_out():
    old, new = make_ca().cert_pem, make_ca().cert_pem
    assert bundle(new, None) == new and bundle(new, new) == new
    both = bundle(new, old)
    certs = x509.load_pem_x509_certificates(both)
    assert [c.public_bytes(serialization.Encoding.PEM) for c in certs] == [new, old]
