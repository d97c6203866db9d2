"""The audit log: one record per request, readable at GET /debug/audit?since=SEQ."""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any


class AuditLog:
    def __init__(self, limit: int = 500_000):
        self._lock = threading.Lock()
        self._records: deque[dict[str, Any]] = deque(maxlen=limit)
        self._seq = 0

    def record(self, **fields: Any) -> None:
        with self._lock:
            self._seq += 1
            fields["seq"] = self._seq
            fields["time"] = time.time()
            self._records.append(fields)

    def since(self, seq: int, limit: int = 0) -> dict[str, Any]:
        with self._lock:
            last = self._seq
            items = [r for r in self._records if r["seq"] > seq]
        if limit and len(items) > limit:
            items = items[:limit]
            last = items[-1]["seq"]
        # A reader continues with since=lastSeq and misses nothing.
        return {"kind": "AuditRecordList", "lastSeq": last, "items": items}
