"""Identifiers of objects and admission requests."""

from __future__ import annotations

import os
import uuid

from velashard.apiserver.ids import new_uid


def test_uids_are_random_version_4_uuids_and_do_not_repeat():
    uids = [new_uid() for _ in range(2000)]  # several refills of the pool
    assert len(set(uids)) == len(uids)
    for text in uids[:300]:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_a_forked_child_does_not_repeat_its_parent_s_uids():
    new_uid()  # the pool is filled
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, new_uid().encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, 64).decode()
    assert child != new_uid()
