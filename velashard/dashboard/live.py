"""Live pages: informer events mark topics dirty; at most once per `debounce` seconds every open page hears, as a
server-sent event, which of its topics changed, and htmx reloads those fragments. No page polls."""

from __future__ import annotations

import queue
import threading
from typing import Iterable, Iterator

KEEPALIVE = 15.0  # a comment line this often keeps proxies and the browser from closing an idle stream


class Hub:
    def __init__(self, debounce: float = 0.5):
        self.debounce = debounce
        self._lock = threading.Lock()
        self._dirty: set[str] = set()
        self._clients: set[queue.Queue] = set()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "Hub":
        self._thread = threading.Thread(target=self._run, name="dashboard-live", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        with self._lock:
            for client in self._clients:
                client.put(None)

    def touch(self, *topics: str) -> None:
        with self._lock:
            self._dirty.update(topics)
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            if self._stop.wait(self.debounce):  # gather what else changes meanwhile: one message for a burst
                return
            with self._lock:
                dirty, self._dirty = self._dirty, set()
                clients = list(self._clients)
            if dirty:
                for client in clients:
                    client.put(frozenset(dirty))

    def stream(self, topics: Iterable[str], app: str = "") -> Iterator[str]:
        """The SSE lines of one open page: an event named for each of its topics that changed ("app" for its
        app, whose topic is `app:<namespace>/<name>`)."""
        wanted = set(topics)
        mine = f"app:{app}" if app else ""
        client: queue.Queue = queue.Queue()
        with self._lock:
            self._clients.add(client)
        try:
            yield ": connected\n\n"
            while not self._stop.is_set():
                try:
                    dirty = client.get(timeout=KEEPALIVE)
                except queue.Empty:
                    yield ": keepalive\n\n"
                    continue
                if dirty is None:
                    return
                names = sorted(wanted & dirty) + (["app"] if mine and mine in dirty else [])
                for name in names:
                    yield f"event: {name}\ndata: changed\n\n"
        finally:
            with self._lock:
                self._clients.discard(client)
