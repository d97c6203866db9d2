"""Identifiers of objects and admission requests."""

from __future__ import annotations

import uuid

from velashard.apiserver.ids import new_uid


def test_uids_are_random_version_4_uuids_and_do_not_repeat():
    uids = [new_uid() for _ in range(2000)]  # several refills of the pool
    assert len(set(uids)) == len(uids)
    for text in uids[:300]:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122
