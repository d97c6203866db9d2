"""Informers: list, then watch from the list's resourceVersion, keeping a cache and calling handlers.

Like client-go's reflector and shared informer: relists on 410 Expired, re-watches from the last
resourceVersion after a broken stream with capped exponential backoff, periodic resync, and a
transform that drops what controllers never read before objects reach the cache.
"""

from __future__ import annotations

import json
import logging
import random
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from velashard.kube import errors
from velashard.kube.client import KubeClient, WatchStream, gc_paused
from velashard.kube.resources import KUBECTL_LAST_APPLIED, Resource
from velashard.kube.store import IndexFunc, Store, object_key
from velashard.observability import INFORMER_OBJECTS, Heartbeat, fields

log = logging.getLogger("velashard.kube.informer")

Obj = dict[str, Any]
LAST_APPLIED = KUBECTL_LAST_APPLIED


def strip_unread_fields(obj: Obj) -> Obj:
    """The default transform: managedFields and kubectl's last-applied annotation are never read."""
    meta = obj.get("metadata") or {}
    meta.pop("managedFields", None)
    annotations = meta.get("annotations")
    if annotations and LAST_APPLIED in annotations:
        annotations.pop(LAST_APPLIED)
    return obj


_SHARED_VALUES = frozenset(("apiVersion", "kind", "namespace"))


def share_strings(value: Any, key: str = "") -> Any:
    """A copy of a decoded object whose keys, and values that repeat across objects (kinds, namespaces,
    labels), are interned: each watch event is decoded on its own, so without this every cached object
    carries its own copy of every key (about 40% of a small object's memory)."""
    if isinstance(value, dict):
        labels = key == "labels"
        return {sys.intern(k): sys.intern(v) if isinstance(v, str) and (labels or k in _SHARED_VALUES)
                else share_strings(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [share_strings(v, key) for v in value]
    return value


@dataclass
class EventHandler:
    on_add: Callable[[Obj], None] | None = None
    on_update: Callable[[Obj, Obj], None] | None = None
    on_delete: Callable[[Obj], None] | None = None


class Backoff:
    """Capped exponential backoff with jitter for reconnecting; reset after a healthy stream."""

    def __init__(self, initial: float = 0.2, maximum: float = 30.0):
        self.initial = initial
        self.maximum = maximum
        self._next = initial

    def next(self) -> float:
        delay = self._next
        self._next = min(self.maximum, self._next * 2)
        return delay * (0.5 + random.random() / 2)

    def reset(self) -> None:
        self._next = self.initial


class Informer:
    def __init__(self, client: KubeClient, resource: Resource, namespace: str | None = None,
                 label_selector: str | None = None, field_selector: str | None = None,
                 resync_period: float = 0.0, transform: Callable[[Obj], Obj] | None = strip_unread_fields,
                 indexers: dict[str, IndexFunc] | None = None, watch_timeout: int = 300,
                 backoff: Backoff | None = None, stuck_after: float = 300.0, packed: bool = False):
        """`packed`: the cache keeps objects compressed (kube/packing.py), for caches that grow with apps."""
        self.client = client
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.resync_period = resync_period
        self.transform = transform
        self.watch_timeout = watch_timeout
        self.store = Store(indexers, packed=packed)
        self._handlers: list[EventHandler] = []
        # Handlers run one at a time (watch and resync threads both dispatch), in event order.
        self._dispatch_lock = threading.RLock()
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._stream: WatchStream | None = None
        self._threads: list[threading.Thread] = []
        self._backoff = backoff or Backoff()
        self._expired_without_progress = False
        self._rv = ""
        self.relists = 0
        # The API server does not serve the resource (its CRD is not installed); the manager says so once.
        self.resource_missing = False
        self.name = str(resource) + (f"[{label_selector}]" if label_selector else "")
        # Busy while it lists or hands an event to the handlers; waiting on the watch stream is idle.
        self.heartbeat = Heartbeat(f"informer {self.name}", stuck_after)

    def add_handler(self, handler: EventHandler) -> None:
        """Handlers added before start see every object as an add; later ones get the cache replayed (during a
        first list, what it has stored so far)."""
        with self._dispatch_lock:  # no event may slip between the replay and the first live event
            self._handlers.append(handler)
            if handler.on_add:
                for obj in self.store.each():
                    self._call(handler.on_add, obj)

    def has_synced(self) -> bool:
        return self._synced.is_set()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    def start(self) -> "Informer":
        self._threads.append(threading.Thread(target=self._run, name=f"informer-{self.name}", daemon=True))
        if self.resync_period:
            self._threads.append(threading.Thread(target=self._resync_loop, name=f"resync-{self.name}",
                                                  daemon=True))
        self.heartbeat.attach(self._threads[0])
        for thread in self._threads:
            thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop and wait for the threads; closing the stream interrupts a blocked watch at once."""
        self._stop.set()
        self.heartbeat.stop()
        stream = self._stream
        if stream is not None:
            stream.close()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            if thread.ident is not None:  # a stop racing start(): an unstarted thread sees _stop and ends at once
                thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def restart(self, timeout: float = 10.0) -> None:
        """Stop, then list afresh and watch again (a fenced shard must not act on what it saw before)."""
        self.stop(timeout)
        self._stop = threading.Event()
        self._synced.clear()
        self._stream = None
        self._threads = []
        self.start()

    def replay(self) -> None:
        """Hand every cached object to the handlers as an update, so controllers look at all of them again."""
        with self._dispatch_lock:
            for obj in self.store.each():
                self._dispatch("update", obj, obj)

    # --- the loop --------------------------------------------------------------------------------

    def _resync_loop(self) -> None:
        """Periodically replay the cache as updates, so level-based controllers re-check everything."""
        while not self._stop.wait(self.resync_period):
            if self._synced.is_set():
                with self._dispatch_lock:
                    for obj in self.store.each():
                        self._dispatch("update", obj, obj)

    def _run(self) -> None:
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    with self.heartbeat.busy():
                        self._list()
                    need_list = False
                if not self._watch() and not self._stop.is_set():
                    self._stop.wait(self._backoff.next())  # a stream that ends at once must not spin
            except errors.Expired:
                need_list = True
                # Relist at once, unless the last relist made no progress either (history shorter than
                # one list-to-watch gap): then back off rather than hammer the server with lists.
                delay = self._backoff.next() if self._expired_without_progress else 0.0
                self._expired_without_progress = True
                log.info("watch expired, relisting", extra=fields(resource=self.name, rv=self._rv,
                                                                  retry_in=round(delay, 2)))
                self._stop.wait(delay)
            except errors.NotFound as err:
                self.resource_missing = True
                need_list = True
                delay = self._backoff.next()
                log.debug("resource not served, retrying", extra=fields(resource=self.name, error=str(err),
                                                                       retry_in=round(delay, 2)))
                self._stop.wait(delay)
            except Exception as err:  # whatever breaks, the informer retries and says so; it never stops silently
                delay = self._backoff.next()
                log.warning("list/watch failed, retrying", exc_info=not isinstance(err, errors.KubeError),
                            extra=fields(resource=self.name, error=str(err), retry_in=round(delay, 2)))
                if not isinstance(err, errors.TransportError):
                    need_list = True  # a stream cut short resumes from its resourceVersion; anything else relists
                self._stop.wait(delay)

    def _list(self) -> None:
        if not self._synced.is_set() and not len(self.store):
            self._first_list()
            return
        versions: dict[str, str | None] = {}  # key -> resourceVersion of what the list returned
        rv = ""

        def listed() -> Iterator[Obj]:
            nonlocal rv
            for page, rv in self.client.list_pages(self.resource, self.namespace, self.label_selector,
                                                   self.field_selector):
                for obj in page:
                    obj = self._transform(obj)
                    versions[object_key(obj)] = obj["metadata"].get("resourceVersion")
                    yield obj

        # Objects go into the store page by page (a packed store packs each as it comes) and are handed to
        # the handlers from there, one at a time: a list of every app is never held decoded at once.
        previous = self.store.replace(listed())
        self.resource_missing = False
        self._rv = rv
        self.relists += 1
        INFORMER_OBJECTS.labels(resource=self.name).set(len(versions))
        for key in previous:
            if key not in versions:
                self._dispatch("delete", previous[key])
        for key, version in versions.items():
            old = previous.get(key)
            if old is not None and old["metadata"].get("resourceVersion") == version:
                continue
            obj = self.store.get(key)
            if obj is None:  # a watch is not running yet: nothing else writes the store while it lists
                continue
            if old is None:
                self._dispatch("add", obj)
            else:
                self._dispatch("update", obj, old)
        self._synced.set()

    def _first_list(self) -> None:
        """The first list fills the empty cache as its pages come and hands each object to the handlers as it is
        stored, as a watch event's is (client-go's reflector and DeltaFIFO do the same): nothing reads an
        informer's cache before it has synced, and a packed cache then decodes no object a second time for its
        handlers (a shard's restart lists every app and managed object). A list that breaks off leaves a partial
        cache, which the next list replaces like any relist."""
        rv, count = "", 0
        # Each page is decoded, packed and dropped with the collector paused, from its decoding to its last object:
        # a collection in between traversed all of it (500 decoded objects) and promoted it, only for it to be
        # freed a moment later (20-35 µs of an object's 130-150). Dropped before the collector is back, it is
        # never seen.
        with gc_paused():
            for page, rv in self.client.list_pages(self.resource, self.namespace, self.label_selector,
                                                   self.field_selector):
                for obj in page:
                    obj = self._transform(obj)
                    with self._dispatch_lock:  # a handler added meanwhile gets it either replayed or dispatched
                        self.store.upsert(obj)
                        self._dispatch("add", obj)
                count += len(page)
                page = obj = None
        self.resource_missing = False
        self._rv = rv
        self.relists += 1
        INFORMER_OBJECTS.labels(resource=self.name).set(count)
        self._synced.set()

    def _watch(self) -> bool:
        """Follow one watch stream; False if it ended at once without any event."""
        started = time.monotonic()
        received = False
        stream = self.client.watch(self.resource, self.namespace, self.label_selector, self.field_selector,
                                   self._rv, timeout_seconds=self.watch_timeout)
        self._stream = stream
        if self._stop.is_set():
            stream.close()
            return True
        for event in stream:
            with self.heartbeat.busy():
                received = self._handle(event) or received
        return received or time.monotonic() - started > 1.0

    def _handle(self, event: Obj) -> bool:
        """Apply one watch event to the cache and the handlers; True: the stream made progress."""
        etype, obj = event.get("type"), event.get("object") or {}
        if etype == "ERROR":
            raise errors.error_from_response(obj.get("code") or 500, json.dumps(obj).encode())
        self._backoff.reset()
        self._expired_without_progress = False
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if rv:
            self._rv = rv
        if etype in ("ADDED", "MODIFIED"):
            obj = self._transform(obj)
            old = self.store.upsert(obj)
            if old is None:
                self._dispatch("add", obj)
            else:
                self._dispatch("update", obj, old)
        elif etype == "DELETED":
            old = self.store.remove(obj)
            self._dispatch("delete", self._transform(obj) if old is None else obj)
        INFORMER_OBJECTS.labels(resource=self.name).set(len(self.store))
        return True

    def _transform(self, obj: Obj) -> Obj:
        obj = self.transform(obj) if self.transform else obj
        # A packed cache keeps no decoded object past its events: sharing its strings would only cost time.
        return obj if self.store.packed else share_strings(obj)

    def _dispatch(self, kind: str, obj: Obj, old: Obj | None = None) -> None:
        with self._dispatch_lock:
            for handler in self._handlers:
                if kind == "add" and handler.on_add:
                    self._call(handler.on_add, obj)
                elif kind == "update" and handler.on_update:
                    self._call(handler.on_update, old, obj)
                elif kind == "delete" and handler.on_delete:
                    self._call(handler.on_delete, obj)

    def _call(self, func: Callable[..., None], *args: Any) -> None:
        try:
            func(*args)
        except Exception:  # a handler's bug must not stop the informer
            log.exception("event handler failed", extra=fields(resource=self.name))
