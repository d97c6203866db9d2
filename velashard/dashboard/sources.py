"""What the dashboard reads, with the user's own credentials: informers over what the user may list (apps
without their spec, Application Events, and the shard pods and Leases when the user may read them), kept as
compact rows and moves for the pages; membership observed with this process's clock, as the master does.

Reads for one app's page (its tracker, its objects, its revisions) are made when the page is asked for; at steady
state nothing but the watches is sent.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.dashboard.live import Hub
from velashard.dashboard.moves import Move, episodes, is_done, move_of
from velashard.dashboard.rows import AppRow, parse_time, row_of
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.informer import EventHandler, Informer, strip_unread_fields
from velashard.kube.resources import EVENTS, LEASES, PODS, Resource
from velashard.kube.transforms import without
from velashard.sharding.discovery import POD_SELECTOR
from velashard.sharding.loads import LEASE_LABEL, lease_shard
from velashard.sharding.membership import LeaseSeen, Member, membership, observe

log = logging.getLogger("velashard.dashboard")

REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
APP_EVENTS = "involvedObject.kind=Application"


def may(client: KubeClient, verb: str, res: Resource, namespace: str | None) -> bool:
    """A SelfSubjectAccessReview: may the user `verb` `res` in `namespace` (None: in every namespace)?"""
    attributes = {"verb": verb, "group": res.group, "resource": res.plural}
    if namespace:
        attributes["namespace"] = namespace
    try:
        answer = client.request("create", "POST", REVIEWS, body={
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes}})
    except errors.KubeError:
        return False
    return bool(((answer or {}).get("status") or {}).get("allowed"))


def _involved_key(event: dict[str, Any]) -> list[str]:
    involved = event.get("involvedObject") or {}
    return [f'{involved.get("namespace", "")}/{involved.get("name", "")}']


class Sources:
    """`namespaces`: where to read apps and Events (None: every namespace, which the user must be able to list)."""

    def __init__(self, client: KubeClient, namespaces: list[str] | None, controller_namespace: str, hub: Hub,
                 clock: Callable[[], float] = time.monotonic):
        self.client, self.namespaces, self.controller_namespace, self.hub = client, namespaces, controller_namespace, hub
        self.clock = clock
        self._lock = threading.Lock()
        self._rows: dict[str, AppRow] = {}
        self._sorted: tuple[int, list[AppRow]] = (-1, [])  # (version, rows by namespace and name)
        self._version = 0  # counts changes of the rows
        self._moves: dict[str, Move] = {}  # event key -> a placement other than at admission, a move or a drain
        self._seen: dict[str, LeaseSeen] = {}
        self._reconciled: dict[tuple[str, str], str] = {}  # episode -> when every app was seen reconciled
        scopes: list[str | None] = list(namespaces) if namespaces else [None]
        self.apps = [Informer(client, APPLICATIONS, ns, transform=without(("spec",)), packed=True) for ns in scopes]
        self.events = [Informer(client, EVENTS, ns, field_selector=APP_EVENTS, transform=strip_unread_fields, packed=True,
                                indexers={"app": _involved_key}) for ns in scopes]
        self.pods: Informer | None = None
        self.leases: Informer | None = None
        if may(client, "list", PODS, controller_namespace) and may(client, "list", LEASES, controller_namespace):
            self.pods = Informer(client, PODS, controller_namespace, label_selector=POD_SELECTOR)
            self.leases = Informer(client, LEASES, controller_namespace, label_selector=LEASE_LABEL)
        for informer in self.apps:
            informer.add_handler(EventHandler(self._app_changed, lambda _o, n: self._app_changed(n),
                                              self._app_deleted))
        for informer in self.events:
            informer.add_handler(EventHandler(self._event_changed, lambda _o, n: self._event_changed(n),
                                              self._event_deleted))
        if self.pods is not None and self.leases is not None:
            fleet = EventHandler(lambda _o: hub.touch("fleet"), lambda _o, _n: hub.touch("fleet"),
                                 lambda _o: hub.touch("fleet"))
            self.pods.add_handler(fleet)
            self.leases.add_handler(EventHandler(self._lease_changed, lambda _o, n: self._lease_changed(n),
                                                 lambda _o: hub.touch("fleet")))

    def informers(self) -> list[Informer]:
        return self.apps + self.events + [i for i in (self.pods, self.leases) if i is not None]

    def start(self, timeout: float = 60.0) -> bool:
        for informer in self.informers():
            informer.start()
        deadline = time.monotonic() + timeout
        return all(i.wait_for_sync(max(0.0, deadline - time.monotonic())) for i in self.informers())

    def stop(self) -> None:
        for informer in self.informers():
            informer.stop()

    # --- what handlers keep ------------------------------------------------------------------------

    def _app_changed(self, app: dict[str, Any]) -> None:
        row = row_of(app)
        with self._lock:
            before = self._rows.get(row.key)
            self._rows[row.key] = row
            if before != row:
                self._version += 1
        if before != row:
            self.hub.touch("apps", "fleet", f"app:{row.key}")

    def _app_deleted(self, app: dict[str, Any]) -> None:
        key = f'{app["metadata"].get("namespace", "")}/{app["metadata"]["name"]}'
        with self._lock:
            self._rows.pop(key, None)
            self._version += 1
        self.hub.touch("apps", "fleet", f"app:{key}")

    def _event_changed(self, event: dict[str, Any]) -> None:
        key = _involved_key(event)[0]
        move = move_of(event)
        if move is not None and not (move.event == "Scheduled" and move.why == "admission"):
            with self._lock:
                self._moves[f'{event["metadata"].get("namespace")}/{event["metadata"]["name"]}'] = move
            self.hub.touch("moves", "fleet")
        self.hub.touch(f"app:{key}")

    def _event_deleted(self, event: dict[str, Any]) -> None:
        with self._lock:
            self._moves.pop(f'{event["metadata"].get("namespace")}/{event["metadata"]["name"]}', None)
        self.hub.touch("moves", f"app:{_involved_key(event)[0]}")

    def _lease_changed(self, _lease: dict[str, Any]) -> None:
        self.hub.touch("fleet")
        self._check_episodes()

    def _check_episodes(self) -> None:
        """Close the failover episodes whose targets have now reconciled every app they were given."""
        assert self.leases is not None
        reports: dict[str, tuple[datetime, int, int]] = {}
        for lease in self.leases.store.list():
            notes = (lease.get("metadata") or {}).get("annotations") or {}
            renewed = parse_time((lease.get("spec") or {}).get("renewTime"))
            try:
                apps = int(notes.get(labels.APPS_ANNOTATION, ""))
                done = int(notes.get(labels.RECONCILED_ANNOTATION, ""))
            except ValueError:
                continue
            if renewed is not None and lease_shard(lease):
                reports[lease_shard(lease) or ""] = (renewed, apps, done)
        with self._lock:
            moves = list(self._moves.values())
            visible: dict[str, int] = {}
            for row in self._rows.values():
                visible[row.shard] = visible.get(row.shard, 0) + 1
        closed = False
        for episode in episodes(moves, self._reconciled):
            moved = parse_time(episode.moved_at)
            if episode.reconciled_at or moved is None:
                continue
            done_at = is_done(episode.targets, moved, reports, visible)
            if done_at is not None:
                with self._lock:
                    self._reconciled[episode.key] = done_at.strftime("%Y-%m-%dT%H:%M:%SZ")
                closed = True
        if closed:
            self.hub.touch("moves", "fleet")

    # --- what pages read ---------------------------------------------------------------------------

    def rows(self) -> list[AppRow]:
        """Every row, by namespace and name (sorted once per change, not once per page)."""
        with self._lock:
            version, rows = self._sorted
            if version == self._version:
                return rows
            version, unsorted = self._version, list(self._rows.values())
        rows = sorted(unsorted, key=lambda r: (r.namespace, r.name))
        with self._lock:
            self._sorted = (version, rows)
        return rows

    def version(self) -> int:
        with self._lock:
            return self._version

    def moves(self) -> list[Move]:
        with self._lock:
            return list(self._moves.values())

    def reconciled(self) -> dict[tuple[str, str], str]:
        with self._lock:
            return dict(self._reconciled)

    def fleet_data(self) -> tuple[dict[str, Member] | None, list[dict[str, Any]], list[dict[str, Any]]]:
        """(membership by the master's rule, or None when the user may not read it; pods; leases)."""
        if self.pods is None or self.leases is None:
            return None, [], []
        pods, leases = self.pods.store.list(), self.leases.store.list()
        now = self.clock()
        with self._lock:
            self._seen = observe(self._seen, leases, now)
            seen = dict(self._seen)
        return membership(pods, leases, seen, now), pods, leases

    def app(self, namespace: str, name: str) -> dict[str, Any] | None:
        for informer in self.apps:
            if informer.namespace in (None, namespace):
                return informer.store.get_by(namespace, name)
        return None

    def app_events(self, namespace: str, name: str) -> list[dict[str, Any]]:
        return [e for informer in self.events if informer.namespace in (None, namespace)
                for e in informer.store.by_index("app", f"{namespace}/{name}")]

    def synced(self) -> bool:
        return all(i.has_synced() for i in self.informers())

    @staticmethod
    def now() -> datetime:
        return datetime.now(timezone.utc)
