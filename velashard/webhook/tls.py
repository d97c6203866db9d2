"""The webhook's TLS files: written atomically, and served from whatever they hold when a connection comes.

gunicorn asks its `ssl_context` hook for a context on every new connection; `ReloadingContext` answers with one
built from the certificate and key files, rebuilt only when either file changed (its inode, size or mtime: a
cert-manager Secret volume swaps a symlink, `write_atomically` renames a new file into place). While files are
being replaced one by one (a new certificate beside the old key) or are not readable, the context built last
keeps serving and the files are tried again on the next connection: a rotation never fails a connection.
Connections already open keep the certificate they started with, as Go's GetCertificate does.
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
import threading
from typing import Any, Callable

log = logging.getLogger("velashard.webhook.tls")


def write_atomically(path: str, data: bytes, mode: int = 0o600) -> bool:
    """Replace `path` with `data` in one step (a temporary file beside it, renamed into place), so that a reader
    sees the old file or the new one, never a part; False when it held `data` already (nothing written)."""
    try:
        with open(path, "rb") as fh:
            if fh.read() == data:
                return False
    except FileNotFoundError:
        pass
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return True


def file_signature(*paths: str) -> tuple:
    """What changes when any of `paths` is replaced or rewritten (symlinks followed); None for a missing file."""
    out = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.append(None)
            continue
        out.append((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


class ReloadingContext:
    """gunicorn's `ssl_context` server hook: the context for the files in the config's certfile and keyfile, built
    again when they change; the last good one while they cannot be loaded."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._context: ssl.SSLContext | None = None
        self._signature: tuple | None = None
        self._failed: tuple | None = None  # the signature last failed to load, said once

    def __call__(self, conf: Any, default_factory: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
        signature = file_signature(conf.certfile, conf.keyfile)
        with self._lock:
            if self._context is not None and signature == self._signature:
                return self._context
            previous = self._context
        try:
            context = default_factory()  # gunicorn's own: its ciphers, protocols and client-certificate settings
        except (OSError, ssl.SSLError, ValueError) as err:
            if previous is None:
                raise
            if signature != self._failed:
                self._failed = signature
                log.warning("the webhook's certificate files do not load (yet); serving the previous ones",
                            extra={"fields": {"certfile": conf.certfile, "error": str(err)}})
            return previous
        with self._lock:
            self._context, self._signature = context, signature
        if previous is not None:
            log.info("webhook serving certificate reloaded", extra={"fields": {"certfile": conf.certfile}})
        return context
