"""The caches of the resources apps manage, selected by this process's shard label.

Kinds the built-in definitions render are watched from the start; any other kind an app applies (from
k8s-objects, a custom definition or ref-objects) gets an informer on demand, stopped again once no app
this process holds applies it. Every change of a cached resource (status, drift, deletion) wakes its app.

Only kinds this process may list and watch itself are cached: apps act as their authors, and the controller's
own role deliberately leaves out kinds such as Secrets (their reads go to the API as the author instead).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any, Callable

from velashard.kube import errors
from velashard.kube.access import AccessReviews
from velashard.kube.informer import Informer
from velashard.kube.manager import Manager
from velashard.kube.resources import DEPLOYMENTS, JOBS, SERVICES, STATEFULSETS, Resource
from velashard.kube.transforms import for_managed_resources
from velashard.observability import fields

log = logging.getLogger("velashard.core.managed")

BUILTIN_KINDS = (DEPLOYMENTS, STATEFULSETS, JOBS, SERVICES)
SYNC_WAIT = 10.0  # seconds a reconcile waits for a new kind's cache before reading that kind live


class ManagedCaches:
    """Informers of managed kinds by Resource (`get` is what the applier reads through)."""

    def __init__(self, manager: Manager, selector: str, watch: Callable[[Informer], None]):
        self._manager, self._selector, self._watch = manager, selector, watch
        self._lock = threading.Lock()
        self._informers: dict[Resource, Informer] = {}
        self._builtin = set(BUILTIN_KINDS)
        self._used: dict[str, frozenset[Resource]] = {}  # app key -> on-demand kinds it applies
        self._users: Counter[Resource] = Counter()  # on-demand kind -> how many apps apply it
        self._access = AccessReviews(manager.client)
        for res in BUILTIN_KINDS:
            informer = manager.informer(res, label_selector=selector, transform=for_managed_resources, packed=True)
            self._informers[res] = informer
            watch(informer)

    def get(self, res: Resource) -> Informer | None:
        with self._lock:
            return self._informers.get(res)

    def use(self, key: str, kinds: set[Resource]) -> None:
        """Record the kinds an app applies now: start informers for new ones, stop those no app uses any more.
        Returns once the caches of its kinds have synced (or SYNC_WAIT passed): also when another app's reconcile
        started one a moment ago, whose list is on the way (a restarted shard's workers otherwise read thousands
        of objects live meanwhile)."""
        wanted = frozenset(k for k in kinds if k not in self._builtin and (k in self._informers
                                                                            or self._access.may_watch(k)))
        started: list[Informer] = []
        unused: list[Informer] = []
        with self._lock:
            if self._used.get(key, frozenset()) != wanted:
                self._record(key, wanted)
                for res in wanted:
                    if res not in self._informers:
                        informer = self._manager.start_informer(res, self._selector, for_managed_resources,
                                                                packed=True)
                        self._informers[res] = informer
                        started.append(informer)
                unused = self._unused()
            syncing = [self._informers[res] for res in wanted
                       if res in self._informers and not self._informers[res].has_synced()]
        for informer in started:
            self._watch(informer)
        for informer in syncing:
            if not informer.wait_for_sync(SYNC_WAIT):
                log.warning("on-demand cache not synced yet; reading that kind live meanwhile",
                            extra=fields(key=key, informer=informer.name))
        for informer in unused:
            self._manager.stop_informer(informer)

    def forget(self, key: str) -> None:
        """The app is gone from this process (deleted or moved away)."""
        with self._lock:
            if key not in self._used:
                return
            self._record(key, frozenset())
            unused = self._unused()
        for informer in unused:
            self._manager.stop_informer(informer)

    def _record(self, key: str, wanted: frozenset[Resource]) -> None:
        """Under the lock: the app's kinds, and how many apps use each kind (counted, not gathered from every
        app at each change: a restart of 40,000 apps made that quadratic)."""
        before = self._used.get(key, frozenset())
        for res in before - wanted:
            self._users[res] -= 1
            if self._users[res] <= 0:
                del self._users[res]
        for res in wanted - before:
            self._users[res] += 1
        if wanted:
            self._used[key] = wanted
        else:
            self._used.pop(key, None)

    def _unused(self) -> list[Informer]:
        gone = [res for res in self._informers if res not in self._builtin and res not in self._users]
        return [self._informers.pop(res) for res in gone]

def kinds_of(objects: list[dict[str, Any]], resolve: Callable[[dict[str, Any]], Resource]) -> set[Resource]:
    """The resources of rendered objects whose kind the server knows."""
    found = set()
    for obj in objects:
        try:
            found.add(resolve(obj))
        except errors.NotFound:  # an unknown kind fails its workflow step elsewhere, with a message for the user
            continue
    return found
