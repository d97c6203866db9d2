"""The Date header of an HTTP answer, formatted once a second: email.utils.formatdate on every answer costs more
than the rest of a small answer's head, for the webhook server and the development API server alike."""

from __future__ import annotations

import time
from email.utils import formatdate

_date: tuple[int, str] = (0, "")


def http_date() -> str:
    """Now, as an HTTP Date (IMF-fixdate)."""
    global _date
    second = int(time.time())
    cached = _date  # one tuple, replaced whole: threads read it without a lock
    if cached[0] != second:
        cached = _date = (second, formatdate(second, usegmt=True))
    return cached[1]
