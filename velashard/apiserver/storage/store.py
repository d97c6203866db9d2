"""In-memory object storage with one global resourceVersion counter, event history and watch fan-out.

Objects are plain dicts that are never mutated once stored (writers store new dicts), so readers
can serialize them without copying. Every write and its fan-out to watchers happen under one lock,
which is what gives every watcher the events in resourceVersion order.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Iterable

from velashard.apiserver import errors
from velashard.apiserver.ids import new_uid

GroupResource = tuple[str, str]
Key = tuple[str, str]  # (namespace or "", name)
Matcher = Callable[[dict[str, Any]], bool]

# A watcher whose client reads slower than this many queued events is closed, as kube-apiserver
# closes watchers whose buffer is full; the client re-watches from its last resourceVersion.
MAX_PENDING_EVENTS = 100_000


_NOW: tuple[int, str] = (0, "")


def now_rfc3339() -> str:
    """The time at second precision, as Kubernetes timestamps are (formatted once per second: every write and
    every simulated status carries one)."""
    global _NOW
    second = int(time.time())
    cached = _NOW
    if cached[0] != second:
        cached = _NOW = (second, datetime.fromtimestamp(second, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return cached[1]


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


# A resourceVersion no client can send: a written object is serialized with it before the store lock is taken,
# and the real one takes its place under the lock (serializing a few KiB under the lock held up every writer).
_RV_MARK = "rv-" + secrets.token_hex(12)
_RV_MARK_FIELD = b'"resourceVersion":"' + _RV_MARK.encode() + b'"'


def _marked(obj: dict[str, Any]) -> bytes | None:
    """`obj` serialized as it will be stored, with the mark for its resourceVersion (None in the unlikely case
    that the mark is not found exactly once)."""
    raw = dumps(dict(obj, metadata=dict(obj["metadata"], resourceVersion=_RV_MARK)))
    return raw if raw.count(_RV_MARK_FIELD) == 1 else None


def object_key(obj: dict[str, Any]) -> Key:
    meta = obj["metadata"]
    return (meta.get("namespace") or "", meta["name"])


@dataclass
class Event:
    rv: int
    type: str  # ADDED, MODIFIED or DELETED
    gr: GroupResource
    obj: dict[str, Any]
    old: dict[str, Any] | None
    raw: bytes  # the serialized object, shared by the writer's response and every watcher

    def line(self, event_type: str) -> bytes:
        """The newline-delimited watch event. Built for each watcher (a copy of a few KiB, microseconds) rather
        than kept: an event stays in the watch history long after its fan-out, and a kept line doubled it."""
        return b'{"type":"' + event_type.encode() + b'","object":' + self.raw + b"}\n"


def watch_line(event: Event, matches: Matcher) -> bytes | None:
    """Kubernetes' transition rule for a filtered watch: what this watcher sees of `event`, if anything."""
    if event.type != "MODIFIED":
        return event.line(event.type) if matches(event.obj) else None
    now_matches = matches(event.obj)
    was_matching = event.old is not None and matches(event.old)
    if now_matches:
        return event.line("MODIFIED" if was_matching else "ADDED")
    if was_matching:
        # The object left the selection: kube-apiserver sends its previous state at the new resourceVersion.
        old = dict(event.old)  # type: ignore[arg-type]
        old["metadata"] = dict(old["metadata"], resourceVersion=str(event.rv))
        return b'{"type":"DELETED","object":' + dumps(old) + b"}\n"
    return None


class Watcher:
    """One client's watch: a queue of ready-to-send lines fed under the store lock."""

    def __init__(self, store: "Store", gr: GroupResource | None, matches: Matcher):
        self._store = store
        self.gr = gr
        self.matches = matches
        self._queue: deque[Any] = deque()
        self._cond = threading.Condition(threading.Lock())
        self.closed = False
        self.overflowed = False

    def offer(self, event: Event) -> None:
        line = watch_line(event, self.matches)
        if line is not None:
            self._put(line)

    def _put(self, item: Any) -> None:
        with self._cond:
            if self.closed:
                return
            if len(self._queue) >= MAX_PENDING_EVENTS:
                self.overflowed = True
                self.closed = True
                self._cond.notify()
                return
            self._queue.append(item)
            # The reader waits only on an empty queue: waking it for every event would cost a thread switch per
            # event and watcher, under the store's lock.
            if len(self._queue) == 1:
                self._cond.notify()

    def get(self, timeout: float) -> Any | None:
        """The next queued item, or None after `timeout` seconds or once closed and drained."""
        with self._cond:
            if not self._queue and not self.closed:
                self._cond.wait(timeout)
            return self._queue.popleft() if self._queue else None

    def take(self, timeout: float) -> list[Any]:
        """Every queued item (waiting up to `timeout` seconds for one): a watch sends what piled up at once."""
        with self._cond:
            if not self._queue and not self.closed:
                self._cond.wait(timeout)
            items = list(self._queue)
            self._queue.clear()
            return items

    def idle(self) -> bool:
        with self._cond:
            return not self._queue

    def close(self) -> None:
        self._store.unwatch(self)
        with self._cond:
            self.closed = True
            self._cond.notify_all()


# An in-process subscriber takes what piled up, then lingers this long: woken once per batch, not per event.
SUBSCRIBER_BATCH_SECONDS = 0.01


class Subscriber(Watcher):
    """An in-process consumer of every event (the built-in controllers); never overflows."""

    def offer(self, event: Event) -> None:
        with self._cond:
            if not self.closed:
                self._queue.append(event)
                if len(self._queue) == 1:
                    self._cond.notify()


class Store:
    def __init__(self, watch_history: int = 10_000):
        self._lock = threading.RLock()
        self._rv = 0
        self._objects: dict[GroupResource, dict[Key, dict[str, Any]]] = {}
        self._uids: dict[str, tuple[GroupResource, Key]] = {}
        self._dependents: dict[str, set[tuple[GroupResource, Key]]] = {}
        self._history: deque[Event] = deque(maxlen=max(1, watch_history))
        self._history_floor = 0  # resourceVersion of the newest event no longer in history
        self._watchers: dict[GroupResource | None, set[Watcher]] = {}
        # Each resource's objects in list order, kept until one of them changes: admission reads the webhook
        # and policy configurations on every write, and they hardly ever change. Replaced, never changed in place.
        self._sorted: dict[GroupResource, tuple[dict[str, Any], ...]] = {}

    # --- reads -----------------------------------------------------------------------------------

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    def current_rv(self) -> int:
        with self._lock:
            return self._rv

    def get(self, gr: GroupResource, key: Key) -> dict[str, Any] | None:
        """The stored object (shared: callers must not change it). Without the lock, the store's most contended
        one, taken on every request for its namespace and object: a dict lookup is atomic, and a commit puts a
        finished object in place at once, so a read that races a write sees it before or after, never half."""
        return self._objects.get(gr, {}).get(key)

    def list(self, gr: GroupResource, namespace: str | None = None) -> tuple[list[dict[str, Any]], int]:
        """Objects sorted by (namespace, name), as etcd orders its keys, and the list's resourceVersion."""
        with self._lock:
            ordered = self._ordered(gr)
            if namespace is None:
                return list(ordered), self._rv
            return [o for o in ordered if (o["metadata"].get("namespace") or "") == namespace], self._rv

    def snapshot(self, gr: GroupResource) -> tuple[dict[str, Any], ...]:
        """The objects in list order, shared (callers must not change them), for reads on every write such as
        admission's. Without the lock while none of them changed: the store lock is the most contended one, and
        a read that races a change sees the state just before it, as it would a moment earlier."""
        ordered = self._sorted.get(gr)
        if ordered is None:
            with self._lock:
                ordered = self._ordered(gr)
        return ordered

    def _ordered(self, gr: GroupResource) -> tuple[dict[str, Any], ...]:
        ordered = self._sorted.get(gr)
        if ordered is None:
            bucket = self._objects.get(gr, {})
            ordered = self._sorted[gr] = tuple(bucket[k] for k in sorted(bucket))
        return ordered

    def count(self, gr: GroupResource, namespace: str) -> int:
        with self._lock:
            return sum(1 for k in self._objects.get(gr, {}) if k[0] == namespace)

    def by_uid(self, uid: str) -> tuple[GroupResource, dict[str, Any]] | None:
        with self._lock:
            ref = self._uids.get(uid)
            if ref is None:
                return None
            return ref[0], self._objects[ref[0]][ref[1]]

    def dependents_of(self, uid: str) -> list[tuple[GroupResource, dict[str, Any]]]:
        with self._lock:
            out = []
            for gr, key in self._dependents.get(uid, ()):
                obj = self._objects.get(gr, {}).get(key)
                if obj is not None:
                    out.append((gr, obj))
            return out

    def namespaced_buckets(self) -> Iterable[GroupResource]:
        with self._lock:
            return list(self._objects)

    # --- writes ----------------------------------------------------------------------------------

    def create(self, gr: GroupResource, obj: dict[str, Any]) -> Event:
        """Store a new object, filling uid, creationTimestamp, resourceVersion and generation."""
        key = object_key(obj)
        meta = obj["metadata"]
        meta.setdefault("uid", new_uid())
        meta.setdefault("creationTimestamp", now_rfc3339())
        meta.setdefault("generation", 1)
        marked = _marked(obj)
        with self._lock:
            bucket = self._objects.setdefault(gr, {})
            if key in bucket:
                raise errors.already_exists(gr[0], gr[1], key[1])
            return self._commit("ADDED", gr, key, obj, None, marked)

    def replace(self, gr: GroupResource, obj: dict[str, Any], expected_rv: str) -> Event:
        """Replace an object if its resourceVersion is still `expected_rv` (optimistic concurrency)."""
        key = object_key(obj)
        marked = _marked(obj)
        with self._lock:
            old = self._objects.get(gr, {}).get(key)
            if old is None:
                raise errors.not_found(gr[0], gr[1], key[1])
            if old["metadata"]["resourceVersion"] != expected_rv:
                raise errors.conflict(gr[0], gr[1], key[1], "the object has been modified; please apply your "
                                      "changes to the latest version and try again")
            return self._commit("MODIFIED", gr, key, obj, old, marked)

    def remove(self, gr: GroupResource, key: Key, expected_rv: str | None = None,
               final: dict[str, Any] | None = None) -> Event:
        """Delete an object; `final` is its last state (e.g. its last finalizer just removed)."""
        with self._lock:
            old = self._objects.get(gr, {}).get(key)
            if old is None:
                raise errors.not_found(gr[0], gr[1], key[1])
            if expected_rv is not None and old["metadata"]["resourceVersion"] != expected_rv:
                raise errors.conflict(gr[0], gr[1], key[1], "the object has been modified; please apply your "
                                      "changes to the latest version and try again")
            return self._commit("DELETED", gr, key, dict(final if final is not None else old), old)

    def _commit(self, event_type: str, gr: GroupResource, key: Key, obj: dict[str, Any],
                old: dict[str, Any] | None, marked: bytes | None = None) -> Event:
        self._rv += 1
        rv = str(self._rv)
        obj["metadata"] = dict(obj["metadata"], resourceVersion=rv)
        self._sorted.pop(gr, None)
        bucket = self._objects.setdefault(gr, {})
        if event_type == "DELETED":
            del bucket[key]
            self._uids.pop(obj["metadata"]["uid"], None)
        else:
            bucket[key] = obj
            self._uids[obj["metadata"]["uid"]] = (gr, key)
        self._index_owners(gr, key, old, None if event_type == "DELETED" else obj)
        raw = marked.replace(_RV_MARK_FIELD, b'"resourceVersion":"' + rv.encode() + b'"', 1) if marked is not None \
            else dumps(obj)
        event = Event(self._rv, event_type, gr, obj, old if event_type == "MODIFIED" else None, raw)
        if len(self._history) == self._history.maxlen:
            self._history_floor = self._history[0].rv
        self._history.append(event)
        for watcher in list(self._watchers.get(gr, ())):
            watcher.offer(event)
        for watcher in list(self._watchers.get(None, ())):
            watcher.offer(event)
        return event

    def _index_owners(self, gr: GroupResource, key: Key, old: dict[str, Any] | None,
                      new: dict[str, Any] | None) -> None:
        def owner_uids(o: dict[str, Any] | None) -> set[str]:
            if o is None:
                return set()
            return {ref.get("uid", "") for ref in o["metadata"].get("ownerReferences") or ()}

        before, after = owner_uids(old), owner_uids(new)
        for uid in before - after:
            deps = self._dependents.get(uid)
            if deps is not None:
                deps.discard((gr, key))
                if not deps:
                    del self._dependents[uid]
        for uid in after - before:
            self._dependents.setdefault(uid, set()).add((gr, key))

    # --- watch -----------------------------------------------------------------------------------

    def watch(self, gr: GroupResource, matches: Matcher, since_rv: int | None) -> Watcher:
        """Start a watch. Without `since_rv`, current objects arrive first as synthetic ADDED events."""
        watcher = Watcher(self, gr, matches)
        with self._lock:
            if since_rv is None:
                for _, obj in sorted(self._objects.get(gr, {}).items()):
                    if matches(obj):
                        watcher._put(b'{"type":"ADDED","object":' + dumps(obj) + b"}\n")
            else:
                if since_rv < self._history_floor:
                    raise errors.expired(f"too old resource version: {since_rv} ({self._history_floor + 1})")
                for event in self._history:
                    if event.rv > since_rv and event.gr == gr:
                        watcher.offer(event)
            self._watchers.setdefault(gr, set()).add(watcher)
        return watcher

    def subscribe(self) -> Subscriber:
        """Every event of every resource, for in-process controllers."""
        sub = Subscriber(self, None, lambda _o: True)
        with self._lock:
            self._watchers.setdefault(None, set()).add(sub)
        return sub

    def unwatch(self, watcher: Watcher) -> None:
        with self._lock:
            self._watchers.get(watcher.gr, set()).discard(watcher)

    def close_watchers(self, gr: GroupResource | None = None) -> None:
        """End watches (all, or those of one resource when its CRD goes away)."""
        with self._lock:
            targets = [w for key, ws in self._watchers.items() if gr is None or key == gr for w in ws]
        for watcher in targets:
            watcher.close()

    def bookmark_rv(self, watcher: Watcher) -> int | None:
        """The resourceVersion a bookmark may carry now: only when nothing is queued for the watcher."""
        with self._lock:
            return self._rv if watcher.idle() else None
