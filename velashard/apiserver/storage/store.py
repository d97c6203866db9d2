"""In-memory object storage with one global resourceVersion counter, event history and watch fan-out.

Objects rest as their JSON, the bytes every response and watch event carries, with what selections read beside
it (labels, the values of field-selectable fields): a decoded object costs several times its JSON in Python
dicts and strings, and a shard's share of KubeVela's 400,000-app tier puts hundreds of thousands of objects in
this store (hack/bench_store_memory.py: the server's RSS grew 17.8 KB per load-test object kept decoded, 6.3 KB
as JSON, watch history included). A read decodes a private copy (tens of microseconds for a few KiB); lists and
watches send the stored bytes as they are. Every write and its fan-out to watchers happen under one lock, which is what gives every
watcher the events in resourceVersion order.
"""

from __future__ import annotations

import bisect
import itertools
import secrets
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Iterable

from velashard.apiserver import errors
from velashard.apiserver.ids import new_uid
from velashard.apiserver.storage.resources import selectable_fields
from velashard.kube import jsoncodec

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
    return jsoncodec.dumps(obj)


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


def _intern(value: Any) -> Any:
    return sys.intern(value) if isinstance(value, str) else value


_NO_LABELS: dict[str, str] = {}  # shared by every object without labels; never changed


def _key_range(keys: list[Key], namespace: str | None, after: Key | None) -> tuple[int, int]:
    """The slice of sorted `keys` in `namespace` (all of them when None) past `after`."""
    lo, hi = 0, len(keys)
    if namespace is not None:
        lo = bisect.bisect_left(keys, (namespace,))
        hi = bisect.bisect_left(keys, (namespace + "\x00",))
    if after is not None:
        lo = max(lo, bisect.bisect_right(keys, after))
    return lo, hi


def _field_value(obj: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)  # type: ignore[assignment]
    return obj


class Stored:
    """An object at rest: its JSON as served, its resourceVersion, its labels (strings shared with the other
    objects that carry them: an app's name labels all its objects), its field-selectable values and the uids of
    its owners."""

    __slots__ = ("raw", "rv", "labels", "fields", "owners")

    def __init__(self, gr: GroupResource, obj: dict[str, Any], raw: bytes):
        meta = obj["metadata"]
        self.raw = raw
        self.rv: str = meta["resourceVersion"]
        labels = meta.get("labels")
        self.labels = {_intern(k): _intern(v) for k, v in labels.items()} if labels else _NO_LABELS
        paths = selectable_fields(gr)
        self.fields = tuple((path, _intern(_field_value(obj, path))) for path in paths) if paths else None
        refs = meta.get("ownerReferences")
        self.owners = tuple(sys.intern(str(r.get("uid", ""))) for r in refs if isinstance(r, dict)) if refs else ()

    def decode(self) -> dict[str, Any]:
        return jsoncodec.loads(self.raw)

    def view(self, key: Key) -> dict[str, Any]:
        """What a label or field selector reads of the object, shaped as the object (for the same matchers)."""
        meta: dict[str, Any] = {"name": key[1], "labels": self.labels}
        if key[0]:
            meta["namespace"] = key[0]
        view: dict[str, Any] = {"metadata": meta}
        for path, value in self.fields or ():
            *parents, last = path.split(".")
            node = view
            for part in parents:
                node = node.setdefault(part, {})
            node[last] = value
        return view


@dataclass(slots=True)
class Event:
    """A committed change. `obj` is the object (a view of it once in the watch history); `old`, for MODIFIED, is
    a view of the previous version (what selectors read) and `old_raw` its JSON, which a watcher it stops matching
    gets as its DELETED event."""

    rv: int
    type: str  # ADDED, MODIFIED or DELETED
    gr: GroupResource
    obj: dict[str, Any]
    old: dict[str, Any] | None
    raw: bytes  # the serialized object, shared by the writer's response, the store and every watcher
    old_raw: bytes | None = None

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
    if was_matching and event.old_raw is not None:
        # The object left the selection: kube-apiserver sends its previous state at the new resourceVersion.
        old = jsoncodec.loads(event.old_raw)
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
        self._objects: dict[GroupResource, dict[Key, Stored]] = {}
        self._uids: dict[str, tuple[GroupResource, Key]] = {}
        self._dependents: dict[str, set[tuple[GroupResource, Key]]] = {}
        self._history: deque[Event] = deque(maxlen=max(1, watch_history))
        self._history_floor = 0  # resourceVersion of the newest event no longer in history
        self._watchers: dict[GroupResource | None, set[Watcher]] = {}
        # Each resource's keys in list order (etcd's): the sorted list is replaced, never changed in place, and
        # catches up with the keys created and removed since when it is next read, in time linear in its length
        # (a sort per change made each page of a paged list of 80,000 Deployments cost a sort of all of them).
        self._keys: dict[GroupResource, list[Key]] = {}
        self._added: dict[GroupResource, list[Key]] = {}
        self._dropped: set[GroupResource] = set()
        # Each resource's objects decoded in list order, kept until one of them changes: admission reads the
        # webhook and policy configurations on every write, and they hardly ever change. Replaced, never changed.
        self._snapshots: dict[GroupResource, tuple[dict[str, Any], ...]] = {}

    # --- reads -----------------------------------------------------------------------------------

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    def current_rv(self) -> int:
        with self._lock:
            return self._rv

    def get(self, gr: GroupResource, key: Key) -> dict[str, Any] | None:
        """The stored object, decoded for the caller (its own copy). Without the lock, the store's most contended
        one, taken on every request for its namespace and object: a dict lookup is atomic, and a commit puts a
        finished object in place at once, so a read that races a write sees it before or after, never half."""
        stored = self._objects.get(gr, {}).get(key)
        return None if stored is None else jsoncodec.loads(stored.raw)

    def stored(self, gr: GroupResource, key: Key) -> Stored | None:
        """The object at rest (its JSON and what selectors read), without decoding it."""
        return self._objects.get(gr, {}).get(key)

    def entries(self, gr: GroupResource, namespace: str | None = None, after: Key | None = None, limit: int = 0,
                select: Callable[[Key, Stored], bool] | None = None) -> tuple[list[tuple[Key, Stored]], int, int]:
        """The resource's objects at rest in list order (of one namespace; past `after`; the first `limit` of
        them), all as they were at the resourceVersion returned with them, and how many objects follow those.
        The lock is held only to look them up: what a list then does with them (encode) needs none, as an object
        at rest never changes.

        With `select` (a selector's predicate, which reads only what the store keeps beside the JSON), only the
        objects it selects, and what follows is 1 when a selected one does, else 0: the scan stops there, so a
        selective list read page by page costs what it returns, not the whole rest of the resource per page
        (a shard's first list of 80,000 Deployments, 160 pages, was quadratic)."""
        with self._lock:
            keys = self._ordered_keys(gr)
            lo, hi = _key_range(keys, namespace, after)
            bucket = self._objects.get(gr, {})
            if select is None:
                end = min(hi, lo + limit) if limit else hi
                return [(key, bucket[key]) for key in keys[lo:end]], hi - end, self._rv
            found: list[tuple[Key, Stored]] = []
            for index in range(lo, hi):
                key = keys[index]
                stored = bucket[key]
                if select(key, stored):
                    if limit and len(found) >= limit:
                        return found, 1, self._rv
                    found.append((key, stored))
            return found, 0, self._rv

    def list(self, gr: GroupResource, namespace: str | None = None) -> tuple[list[dict[str, Any]], int]:
        """Objects sorted by (namespace, name), as etcd orders its keys, decoded; and the list's resourceVersion."""
        found, _, rv = self.entries(gr, namespace)
        return [stored.decode() for _, stored in found], rv

    def snapshot(self, gr: GroupResource) -> tuple[dict[str, Any], ...]:
        """The objects in list order, shared (callers must not change them), for reads on every write such as
        admission's. Without the lock while none of them changed: the store lock is the most contended one, and
        a read that races a change sees the state just before it, as it would a moment earlier."""
        ordered = self._snapshots.get(gr)
        if ordered is None:
            with self._lock:
                bucket = self._objects.get(gr, {})
                ordered = self._snapshots[gr] = tuple(bucket[k].decode() for k in self._ordered_keys(gr))
        return ordered

    def _ordered_keys(self, gr: GroupResource) -> list[Key]:
        """Under the lock: the resource's keys in order, caught up with what was created and removed since."""
        keys = self._keys.get(gr, [])
        added = self._added.pop(gr, None)
        dropped = gr in self._dropped
        if not added and not dropped:
            return keys
        bucket = self._objects.get(gr, {})
        merged = [k for k in keys if k in bucket] if dropped else list(keys)
        if added:
            merged.extend(k for k in added if k in bucket) if dropped else merged.extend(added)
            merged.sort()
            if dropped:  # a key removed and created again since may be there twice
                merged = [k for i, k in enumerate(merged) if i == 0 or merged[i - 1] != k]
        self._dropped.discard(gr)
        self._keys[gr] = merged
        return merged

    def by_uid(self, uid: str) -> tuple[GroupResource, dict[str, Any]] | None:
        with self._lock:
            ref = self._uids.get(uid)
            if ref is None:
                return None
            raw = self._objects[ref[0]][ref[1]].raw
        return ref[0], jsoncodec.loads(raw)

    def dependents_of(self, uid: str) -> list[tuple[GroupResource, dict[str, Any]]]:
        with self._lock:
            found = []
            for gr, key in self._dependents.get(uid, ()):
                stored = self._objects.get(gr, {}).get(key)
                if stored is not None:
                    found.append((gr, stored.raw))
        return [(gr, jsoncodec.loads(raw)) for gr, raw in found]

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
            if old.rv != expected_rv:
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
            if expected_rv is not None and old.rv != expected_rv:
                raise errors.conflict(gr[0], gr[1], key[1], "the object has been modified; please apply your "
                                      "changes to the latest version and try again")
            return self._commit("DELETED", gr, key, dict(final) if final is not None else old.decode(), old)

    def _commit(self, event_type: str, gr: GroupResource, key: Key, obj: dict[str, Any],
                old: Stored | None, marked: bytes | None = None) -> Event:
        self._rv += 1
        rv = str(self._rv)
        obj["metadata"] = dict(obj["metadata"], resourceVersion=rv)
        self._snapshots.pop(gr, None)
        bucket = self._objects.setdefault(gr, {})
        raw = marked.replace(_RV_MARK_FIELD, b'"resourceVersion":"' + rv.encode() + b'"', 1) if marked is not None \
            else dumps(obj)
        stored = Stored(gr, obj, raw)
        if event_type == "DELETED":  # its last state: the stored one, or that with its last finalizer removed
            del bucket[key]
            self._uids.pop(obj["metadata"]["uid"], None)
            self._dropped.add(gr)
        else:
            if key not in bucket:
                self._added.setdefault(gr, []).append(key)
            bucket[key] = stored
            self._uids[obj["metadata"]["uid"]] = (gr, key)
        view = stored.view(key)
        self._index_owners(gr, key, old.owners if old is not None else (),
                           () if event_type == "DELETED" else stored.owners)
        modified = event_type == "MODIFIED" and old is not None
        old_view = old.view(key) if modified else None  # type: ignore[union-attr]
        event = Event(self._rv, event_type, gr, obj, old_view, raw, old.raw if modified else None)  # type: ignore
        if len(self._history) == self._history.maxlen:
            self._history_floor = self._history[0].rv
        # The history keeps what selectors read and the JSON, not the decoded object.
        self._history.append(Event(event.rv, event_type, gr, view, old_view, raw, event.old_raw))
        for watcher in list(self._watchers.get(gr, ())):
            watcher.offer(event)
        for watcher in list(self._watchers.get(None, ())):
            watcher.offer(event)
        return event

    def _index_owners(self, gr: GroupResource, key: Key, owners_before: tuple[str, ...],
                      owners_after: tuple[str, ...]) -> None:
        before, after = set(owners_before), set(owners_after)
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
                bucket = self._objects.get(gr, {})
                for key in self._ordered_keys(gr):
                    stored = bucket[key]
                    if matches(stored.view(key)):
                        watcher._put(b'{"type":"ADDED","object":' + stored.raw + b"}\n")
            else:
                if since_rv < self._history_floor:
                    raise errors.expired(f"too old resource version: {since_rv} ({self._history_floor + 1})")
                # History holds consecutive resourceVersions: skip straight to the first one after since_rv.
                start = max(0, since_rv + 1 - self._history[0].rv) if self._history else 0
                for event in itertools.islice(self._history, start, None):
                    if event.gr == gr:
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
