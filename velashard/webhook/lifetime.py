"""Child processes that die with their parent, however it dies (SIGKILL included).

Linux's PR_SET_PDEATHSIG has the kernel signal a process when its parent ends; a parent that died
before the call is caught by comparing the parent pid, and a watch thread covers systems without prctl
(and re-parenting by a subreaper, which PR_SET_PDEATHSIG also reports).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import threading

log = logging.getLogger("velashard.webhook.lifetime")

PR_SET_PDEATHSIG = 1


def set_parent_death_signal(sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel for `sig` when this process's parent dies; False where prctl is not available."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent(parent_pid: int, sig: int = signal.SIGTERM, poll: float = 1.0) -> None:
    """End this process (with `sig`, then for sure) once `parent_pid` is no longer its parent."""
    set_parent_death_signal(sig)
    if os.getppid() != parent_pid:  # the parent died before the kernel was asked to tell us
        os._exit(1)

    def watch() -> None:
        event = threading.Event()
        while not event.wait(poll):
            if os.getppid() != parent_pid:
                log.error("parent process gone; exiting", extra={"fields": {"parent": parent_pid}})
                os.kill(os.getpid(), sig)
                event.wait(10)
                os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
