"""The ResourceKeeper (KubeVela's name for it): one reconcile's hold on what an app manages.

It reads the app's ResourceTracker once per pass and is the only one to write it: what is about to be applied is
recorded before it is (nothing applied is ever untracked), and the tracker is written only when that record
changes, so a settled app's pass writes nothing. It dispatches through the Applier, which acts as the app's author
(the re-apply of a settled app is state-keep: drift goes back, apply-once paths excepted); it collects what a
successful run no longer deploys, and deletes everything when the app goes. What the app manages is read live
through it too (this pass's writes, the shard's caches, else the API as the author), for health and for steps."""

from __future__ import annotations

from typing import Any

from velashard.core.apply import Applier
from velashard.core.context import ReconcileContext
from velashard.core.rendered import RenderedComponent
from velashard.core.resourcepolicies import (delete_in_dependency_order, deletion_order, gc_strategy, info_of,
                                             keep_legacy_resources)
from velashard.core.tracker import Ref, RefKey, Trackers, managed_refs, ref_key, ref_of


def refs_of(objects: list[dict[str, Any]]) -> dict[RefKey, Ref]:
    """How the tracker names these objects, by key."""
    return {ref_key(ref_of(o)): ref_of(o) for o in objects}


class ResourceKeeper:
    def __init__(self, ctx: ReconcileContext, trackers: Trackers, applier: Applier):
        self.ctx, self._trackers, self._applier = ctx, trackers, applier
        self._tracker = trackers.get(ctx.app)
        self.previous: dict[RefKey, Ref] = managed_refs(self._tracker)  # what the app managed when the pass began
        self.recorded: dict[RefKey, Ref] = dict(self.previous)
        # every kind the app renders, applies or managed before: the managed caches take the whole set
        self._kinds: list[dict[str, Any]] = [{"apiVersion": r["apiVersion"], "kind": r["kind"]}
                                             for r in self.previous.values()]

    # --- the record ----------------------------------------------------------------------------------------------

    def keep(self, desired: dict[RefKey, Ref]) -> None:
        """What this pass will apply whatever its workflow does, recorded before anything is; the tracker is
        written if the record (or the shard the app is on) changed. A new app's is created with the first thing
        it records (a workflow with steps records as they apply)."""
        self.recorded.update(desired)
        if self.recorded or "resourceVersion" in self._tracker["metadata"]:
            self._save()

    def record(self, refs: dict[RefKey, Ref]) -> None:
        """What a step is about to apply, recorded first; nothing is written when it is recorded already."""
        new = {k: r for k, r in refs.items() if self.recorded.get(k) != r}
        if new:
            self.recorded.update(new)
            self._save()

    def _save(self) -> None:
        self._tracker = self._trackers.save(self.ctx.app, self._tracker, self.recorded)

    # --- dispatch and reads ------------------------------------------------------------------------------------

    def use_kinds(self, objects: list[dict[str, Any]]) -> None:
        """Make sure the kinds of these objects (and of all the app used before) are cached before they are
        applied or read."""
        self._kinds.extend(objects)
        self._applier.use_kinds(self.ctx, self._kinds)

    def dispatch(self, comp: RenderedComponent, what: str = "component") -> None:
        """Apply a component's objects (recorded already) as the app's author; Terminal or Retry say why not."""
        self._applier.apply_component(self.ctx, comp, what)

    def dispatch_policy_objects(self, objects: list[dict[str, Any]]) -> None:
        self._applier.apply_policy_objects(self.ctx, objects)

    def live(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """The live counterpart of an object the app renders or applies (None when absent or not the author's
        to read)."""
        return self._applier.live_of(self.ctx, obj)

    # --- garbage ---------------------------------------------------------------------------------------------

    def collect_garbage(self, desired: dict[RefKey, Ref]) -> None:
        """A run succeeded deploying `desired`: what the app managed before and no longer deploys is deleted,
        unless garbage-collect policies keep it, and the record becomes what stays."""
        gone = [r for k, r in self.previous.items() if k not in desired]
        if not gone:
            return  # the record is what the run deployed already
        app = self.ctx.app
        spec = app.get("spec") or {}
        legacy = keep_legacy_resources(spec)
        kept = {}
        for ref in self._deletion_order(gone):
            if legacy or gc_strategy(spec, info_of(app, ref)) != "onAppUpdate":
                kept[ref_key(ref)] = ref
            else:
                self._applier.delete_managed(app, ref, self.ctx.author)
        self.recorded = {**kept, **desired}
        self._save()

    def delete_all(self) -> None:
        """The app is being deleted: everything it manages goes (as its author, unless a policy says never),
        then its tracker."""
        app = self.ctx.app
        for ref in self._deletion_order(list(self.previous.values())):
            if gc_strategy(app.get("spec") or {}, info_of(app, ref)) != "never":
                self._applier.delete_managed(app, ref, self.ctx.author)
        self._trackers.delete(self._tracker)

    def _deletion_order(self, refs: list[Ref]) -> list[Ref]:
        """garbage-collect `order: dependency`: dependents' resources go before what they depend on."""
        spec = self.ctx.app.get("spec") or {}
        if not delete_in_dependency_order(spec):
            return refs
        order = deletion_order([(c.get("name", ""), list(c.get("dependsOn") or []))
                                for c in spec.get("components") or []])
        rank = {name: i for i, name in enumerate(order)}
        return sorted(refs, key=lambda r: rank.get(r.get("component", ""), len(rank)))
