"""The watch event of a version this process wrote wakes no one; any other version does."""

from __future__ import annotations

from velashard.core.echoes import OwnWrites


def deploy(name: str, rv: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "ns",
                                                                       "resourceVersion": rv}}


def test_only_the_version_written_last_is_an_echo_and_only_once():
    writes = OwnWrites()
    writes.wrote(deploy("web", "5"))
    assert not writes.is_echo(deploy("web", "4"))  # an older event, someone else's
    assert not writes.is_echo(deploy("db", "5"))
    assert writes.is_echo(deploy("web", "5"))
    assert not writes.is_echo(deploy("web", "5"))  # a replay later (a relist) is news again


def test_echoes_that_never_arrive_do_not_pile_up():
    writes = OwnWrites(limit=2)
    for i in range(3):
        writes.wrote(deploy(f"d{i}", "1"))
    assert not writes.is_echo(deploy("d0", "1")) and writes.is_echo(deploy("d2", "1"))
