"""Applying an app's rendered objects (never adopting another app's, nor one no app manages unless a take-over
policy says so; three-way merged onto what is live), reading them live, and deleting one it manages (what to
delete, and when, is the ResourceKeeper's: core/keeper.py).

Every write, every delete and every read past the shard's caches goes through the reconcile's author client
(`ctx.author`, see core/authors.py): the app can do only what the user who wrote it may do."""

from __future__ import annotations

import copy
import logging
from typing import Any

from velashard.apis import labels
from velashard.apis.oam import SCHEDULED_RESOURCES
from velashard.core import ownership
from velashard.core.context import ReconcileContext
from velashard.core.echoes import OwnWrites
from velashard.core.events import record_event
from velashard.core.managed import ManagedCaches, kinds_of
from velashard.core.rendered import RenderedComponent
from velashard.core.resourcepolicies import (ResourceInfo, apply_once, info_of, is_read_only, is_shared,
                                             keep_live_paths, may_take_over, update_op)
from velashard.core.tracker import DependentCheck, Ref
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.controller import Retry, Terminal
from velashard.kube.discovery import Discovery
from velashard.kube.resources import Resource
from velashard.observability import fields

_SCHEDULED = {(r.group, r.plural) for r in SCHEDULED_RESOURCES}

log = logging.getLogger("velashard.core.apply")


class Applier:
    def __init__(self, client: KubeClient, discovery: Discovery, managed: ManagedCaches | None,
                 check_dependent: DependentCheck | None = None, own_writes: OwnWrites | None = None):
        self.client, self.discovery = client, discovery
        self.managed = managed  # informers of managed kinds, when this process caches them
        self.check_dependent = check_dependent  # sharded: stop when a resource read live is already moving away
        self.own_writes = own_writes  # what this process wrote, so that the echo of a write wakes no one

    def use_kinds(self, ctx: ReconcileContext, objects: list[dict[str, Any]]) -> None:
        """Make sure the kinds the app applies are cached (on demand), before it applies or reads them."""
        if self.managed is not None:
            self.managed.use(ctx.key, kinds_of(objects, self.resource))

    def use_kinds_of(self, key: str, kinds: set[Resource]) -> None:
        """`use_kinds` for a pass that did not run (core/settled.py): the kinds its app applies stay cached."""
        if self.managed is not None:
            self.managed.use(key, kinds)

    def kind(self, api_version: str, kind: str) -> Resource:
        return self.discovery.for_kind(api_version, kind)

    def cached(self, api_version: str, kind: str) -> Any:
        """The synced cache of a kind, or None (not cached here, not synced yet, or not served)."""
        try:
            return self._cache(self.kind(api_version, kind))
        except errors.NotFound:
            return None

    def _cache(self, res: Resource) -> Any:
        informer = self.managed.get(res) if self.managed is not None else None
        return informer if informer is not None and informer.has_synced() else None

    def resource(self, obj: dict[str, Any]) -> Resource:
        return self.discovery.for_kind(obj["apiVersion"], obj["kind"])

    def live(self, ctx: ReconcileContext, res: Resource, name: str, namespace: str | None) -> dict[str, Any] | None:
        """The live object: what this reconcile wrote, else from the cache for managed kinds we watch (absent
        there means absent or not ours: a create then finds out), else from the API."""
        seen = ctx.recall(res, name, namespace)
        if seen is not None:
            return seen
        informer = self._cache(res)
        if informer is not None:
            cached = informer.store.get_by(namespace, name)  # decoded once per reconcile: apply, health, status
            if cached is not None:
                ctx.saw(res, cached)
            else:
                ctx.missed(res, name, namespace)
            return cached
        try:
            live = self._get(ctx, res, name, namespace)
        except errors.NotFound:
            return None
        ctx.saw(res, live)
        return live

    def _get(self, ctx: ReconcileContext, res: Resource, name: str, namespace: str | None) -> dict[str, Any]:
        """A read past the shard's cache, as the author: a resource of this app labelled for another shard means
        the master is moving the app (its resources go first), so this shard must not write it back."""
        live = ctx.author.get(res, name, namespace)
        # Unlabelled (applied before sharding, or by hand) is not moving: this apply labels it.
        if self.check_dependent is not None and ownership.owner_of(live) == (ctx.namespace, ctx.name) and \
                labels.SCHEDULED_SHARD_ID in (live["metadata"].get("labels") or {}):
            self.check_dependent(ctx.app, live)
        return live

    def live_of(self, ctx: ReconcileContext, obj: dict[str, Any]) -> dict[str, Any] | None:
        """The live counterpart of a rendered object; None when it or its kind does not exist, or when the author
        may not read it (the refusal is on ctx.forbidden, so the app's status says so)."""
        try:
            res = self.resource(obj)
            name, namespace = obj["metadata"]["name"], obj["metadata"].get("namespace") if res.namespaced else None
            live = self.live(ctx, res, name, namespace)
            if namespace != ctx.namespace and self._cache(res) is not None and \
                    (live is None or ownership.owner_of(live) != (ctx.namespace, ctx.name)) and \
                    not ctx.read_as_author(res, name, namespace):
                # The shard's cache holds every app's objects: outside its namespace an app learns only what its
                # author may read, never another's object (that it exists, that it is healthy) from the cache.
                said = len(ctx.forbidden)
                try:
                    live = self._get(ctx, res, name, namespace)
                except errors.Forbidden:  # not the app's to see: for its status, absent (no refusal of its own)
                    del ctx.forbidden[said:]
                    return None
                ctx.saw(res, live, as_author=True)
            return live
        except (errors.NotFound, errors.Forbidden):
            return None

    def apply_component(self, ctx: ReconcileContext, comp: RenderedComponent, what: str = "component") -> None:
        """Apply a component's objects. Raises Terminal with a message for the user when one cannot be applied
        as it is (the workflow step fails), Retry when a write lost a race. `what` names it in messages."""
        for desired in comp.objects:
            try:
                self._apply(ctx, comp, desired, what)
            except (errors.Conflict, errors.AlreadyExists) as err:
                raise Retry(f'{what} "{comp.name}": {err.message}') from err
            except errors.Forbidden as err:  # the author may not: the step fails saying so (and ctx.forbidden has it)
                raise Terminal(f'{what} "{comp.name}": {err.message}') from err

    def apply_policy_objects(self, ctx: ReconcileContext, objects: list[dict[str, Any]]) -> None:
        """What policies render, each applied under the policy's name (its component label)."""
        for desired in objects:
            name = (desired["metadata"].get("labels") or {}).get(labels.APP_COMPONENT, "")
            self.apply_component(ctx, RenderedComponent(name, "", desired, [], [], []), "policy")

    def _apply(self, ctx: ReconcileContext, comp: RenderedComponent, desired: dict[str, Any],
               what: str = "component") -> None:
        try:
            res = self.resource(desired)
        except errors.NotFound:
            raise Terminal(f'{what} "{comp.name}": the server has no resource for {desired["apiVersion"]} '
                           f'{desired["kind"]}') from None
        meta = desired["metadata"]
        namespace = meta.get("namespace") if res.namespaced else None
        if not res.namespaced:
            meta.pop("namespace", None)
        shard = (ctx.app["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID)
        # from the moment it exists, the resource is in its shard's cache (and moves with the app); an Application
        # or WorkflowRun a step applies is placed by the scheduler on a shard of its own, never named by its author
        if shard and (res.group, res.plural) not in _SCHEDULED:
            meta["labels"] = {**(meta.get("labels") or {}), labels.SCHEDULED_SHARD_ID: shard}
        live = self.live(ctx, res, meta["name"], namespace)
        spec = ctx.app.get("spec") or {}
        info = info_of(ctx.app, {"component": comp.name, "kind": desired["kind"], "name": meta["name"],
                                      "trait": (meta.get("labels") or {}).get(labels.TRAIT_TYPE, "")})
        if is_read_only(spec, info):
            if live is None:
                raise Terminal(f'{what} "{comp.name}": read-only {desired["kind"]} {meta["name"]} does not exist')
            return  # read-only: observed, never written
        other = ownership.conflicting_owner(live, ctx.namespace, ctx.name)
        if other is not None and is_shared(spec, info):
            return  # shared-resource: another app applied it first; this one uses it as it is
        if other is not None:
            self._refuse_owned(ctx, comp, desired, res, other, what)
        if live is not None and ownership.owner_of(live) is None:
            self._may_adopt(ctx, comp, desired, info, what)
        if live is not None:
            state_keep = (ctx.app.get("status") or {}).get("observedGeneration") == ctx.app["metadata"].get(
                "generation")
            paths = apply_once(spec, info, state_keep)
            if paths == ["*"]:
                return  # apply-once: left as it is live
            if paths:
                desired = keep_live_paths(desired, live, paths)
        try:
            if live is None:
                try:
                    self._wrote(ctx, res, ctx.author.create(res, ownership.with_last_applied(desired)))
                    return
                except errors.AlreadyExists:
                    live = self._get(ctx, res, meta["name"], namespace)  # the cache lagged, or no app manages it
                    other = ownership.conflicting_owner(live, ctx.namespace, ctx.name)
                    if other is not None:
                        self._refuse_owned(ctx, comp, desired, res, other, what)
                    if ownership.owner_of(live) is None:
                        self._may_adopt(ctx, comp, desired, info, what)
            if update_op(spec, info) == "replace":
                merged = ownership.with_last_applied(copy.deepcopy(desired))
                merged["metadata"] = {**live["metadata"], **merged["metadata"]}  # identity and version stay
                changed = merged if ownership.needs_update(merged, live) else None
            else:
                changed = ownership.merged_if_drifted(desired, live, ctx.key)
            if changed is not None:
                self._wrote(ctx, res, ctx.author.update(res, changed))
        except errors.Invalid as err:
            raise Terminal(f'{what} "{comp.name}": {desired["kind"]} {meta["name"]} is invalid: '
                           f"{err.message}") from err
        except (errors.Conflict, errors.AlreadyExists, errors.Forbidden):
            raise
        except errors.BadRequest as err:
            raise Terminal(f'{what} "{comp.name}": {desired["kind"]} {meta["name"]}: {err.message}') from err

    def _wrote(self, ctx: ReconcileContext, res: Resource, written: dict[str, Any]) -> None:
        ctx.saw(res, written)
        if self.own_writes is not None:
            self.own_writes.wrote(written)

    @staticmethod
    def _where(desired: dict[str, Any]) -> str:
        meta = desired["metadata"]
        return f'{desired["kind"]} {meta.get("namespace", "")}/{meta["name"]}'

    def _refuse_owned(self, ctx: ReconcileContext, comp: RenderedComponent, desired: dict[str, Any], res: Resource,
                      other: tuple[str, str], what: str) -> None:
        """Another app owns it: never adopted. The cache that told us is the shard's own, so first ask the API
        as the author (one read, only here): an author who may not read it learns nothing of who owns it."""
        meta = desired["metadata"]
        self._get(ctx, res, meta["name"], meta.get("namespace") if res.namespaced else None)
        message = (f'{what} "{comp.name}": {self._where(desired)} is owned by application {other[0]}/{other[1]}; '
                   "not adopting it")
        record_event(self.client, ctx.app, "Warning", "ResourceConflict", message)
        raise Terminal(message)

    @staticmethod
    def _may_adopt(ctx: ReconcileContext, comp: RenderedComponent, desired: dict[str, Any], info: ResourceInfo,
                   what: str) -> None:
        """An object that exists but that no app manages is adopted only under a take-over or shared-resource
        policy (KubeVela's rule); read-only ones never reach here."""
        spec = ctx.app.get("spec") or {}
        if not (may_take_over(spec, info) or is_shared(spec, info)):
            raise Terminal(f'{what} "{comp.name}": {Applier._where(desired)} exists but is not managed by any '
                           "application; a take-over policy adopts it, a read-only policy uses it as it is")

    def delete_managed(self, app: dict[str, Any], ref: Ref, author: KubeClient) -> None:
        """Delete what we recorded, as the app's author, only while the app owns it: never another app's
        resource, nor one no app manages (recorded but never adopted, or read-only)."""
        try:
            res = self.discovery.for_kind(ref["apiVersion"], ref["kind"])
            informer = self._cache(res)
            live = informer.store.get_by(ref.get("namespace"), ref["name"]) if informer is not None else None
            if live is None:  # not cached: gone, or not (yet) labelled for this shard
                live = author.get(res, ref["name"], ref.get("namespace"))
        except errors.NotFound:
            return
        if ownership.owner_of(live) != (app["metadata"]["namespace"], app["metadata"]["name"]):
            return
        try:
            author.delete(res, ref["name"], ref.get("namespace"), propagation_policy="Background",
                          preconditions={"uid": live["metadata"]["uid"]})
            log.info("garbage-collected resource", extra=fields(
                key=f'{app["metadata"]["namespace"]}/{app["metadata"]["name"]}',
                resource=f'{ref["kind"]}/{ref.get("namespace", "")}/{ref["name"]}'))
        except (errors.NotFound, errors.Conflict):
            pass

