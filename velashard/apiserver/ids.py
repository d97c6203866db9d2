"""Random identifiers for objects and admission requests (version 4 UUIDs, as uuid.uuid4 makes them).

uuid.uuid4 reads 16 bytes with os.urandom, which gives up the GIL for its system call; on a busy API server each
take of it back waits behind other threads, on every create and every admission review. Here the random bytes
come from a pool refilled 256 identifiers at a time.
"""

from __future__ import annotations

import os
import threading
import uuid

_POOL_BYTES = 16 * 256
_lock = threading.Lock()
_pool = b""
_at = 0


def _forget_pool() -> None:
    global _pool, _at
    _pool, _at = b"", 0


os.register_at_fork(after_in_child=_forget_pool)  # a forked child must not hand out its parent's identifiers


def new_uid() -> str:
    global _pool, _at
    with _lock:
        if _at >= len(_pool):
            _pool, _at = os.urandom(_POOL_BYTES), 0
        chunk = _pool[_at:_at + 16]
        _at += 16
    return str(uuid.UUID(bytes=chunk, version=4))
