"""Go durations ("500ms", "15s", "1h30m", "1m30.5s"), as KubeVela's flags and workflow steps write them."""

from __future__ import annotations

import re

_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_SEGMENT = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def go_duration(text: str) -> float:
    """Seconds in a Go duration (time.ParseDuration's syntax: signed, unit on every number, "0" alone
    allowed); ValueError if `text` is not one."""
    value = str(text).strip()
    sign, body = (value[0], value[1:]) if value[:1] in ("+", "-") else ("", value)
    if body == "0":
        return 0.0
    segments = _SEGMENT.findall(body)
    if not body or "".join(n + u for n, u in segments) != body:
        raise ValueError(f"{text!r} is not a Go duration")
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in segments) * (-1 if sign == "-" else 1)
