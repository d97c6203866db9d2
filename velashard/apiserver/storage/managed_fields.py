"""Server-side apply and managedFields, as kube-apiserver's field manager keeps them.

Every write records which manager owns which fields (`metadata.managedFields`, FieldsV1). An
Update (create, update, non-apply patch) gives its manager the fields it changed and takes them
from everyone else. An Apply merges the applied configuration into the live object, answers 409
when it would change fields another manager owns (unless forced, which moves the ownership), makes
the manager own exactly what it applied, and removes fields it no longer applies that nobody else
owns. Decisions are pure functions over plain dicts; time comes in as an argument.
"""

from __future__ import annotations

import copy
import functools
import unicodedata
from dataclasses import dataclass
from typing import Any

from velashard.apiserver import errors
from velashard.apiserver.storage.resources import ResourceType
from velashard.patch import fieldset
from velashard.patch.fieldset import ATOMIC, MAP, SET, FieldSet, Path, Shapes
from velashard.patch.strategic_merge import list_strategy

APPLY = "Apply"
UPDATE = "Update"
FIELD_MANAGER_MAX_LENGTH = 128

# Fields the server owns; they never appear in a field set (kube-apiserver's stripmeta).
_STRIPPED_META = ("name", "namespace", "creationTimestamp", "selfLink", "uid", "generation", "managedFields",
                  "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds")
# List-maps whose key has more fields than the strategic merge key.
_COMPOSITE_KEYS = {"containerPort": ("containerPort", "protocol"), "port": ("port", "protocol")}
_ATOMIC_SELECTOR_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}


class BuiltinShapes(Shapes):
    """Built-in kinds: list-maps by their patch merge keys, merged scalar sets, atomic label selectors."""

    def __init__(self, kind: str):
        self.kind = kind

    @functools.lru_cache(maxsize=512)
    def list_type(self, names: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
        strategy = list_strategy(names, self.kind)
        if strategy is None:
            return ATOMIC, ()
        if strategy == "set":
            return SET, ()
        return MAP, _COMPOSITE_KEYS.get(strategy, (strategy,))

    def atomic_map(self, names: tuple[str, ...]) -> bool:
        return names == ("spec", "selector") and self.kind in _ATOMIC_SELECTOR_KINDS


class SchemaShapes(BuiltinShapes):
    """Custom resources: `x-kubernetes-list-type`, `-list-map-keys` and `-map-type` of their schema."""

    def __init__(self, kind: str, schema: dict[str, Any]):
        super().__init__(kind)
        self.schema = schema

    def _node(self, names: tuple[str, ...]) -> dict[str, Any] | None:
        node: Any = self.schema
        for name in names:
            if not isinstance(node, dict):
                return None
            if node.get("type") == "array" or "items" in node:
                node = node.get("items")  # list items are walked through transparently
                if not isinstance(node, dict):
                    return None
            props = node.get("properties") or {}
            if name in props:
                node = props[name]
            elif isinstance(node.get("additionalProperties"), dict):
                node = node["additionalProperties"]
            else:
                return None
        return node if isinstance(node, dict) else None

    @functools.lru_cache(maxsize=512)
    def list_type(self, names: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
        if names[:1] == ("metadata",):
            return super().list_type(names)
        node = self._node(names) or {}
        kind = node.get("x-kubernetes-list-type")
        if kind == "map":
            return MAP, tuple(node.get("x-kubernetes-list-map-keys") or ())
        if kind == "set":
            return SET, ()
        return ATOMIC, ()

    def atomic_map(self, names: tuple[str, ...]) -> bool:
        if names[:1] == ("metadata",):
            return False
        node = self._node(names) or {}
        return node.get("x-kubernetes-map-type") == "atomic" or node.get("x-kubernetes-preserve-unknown-fields") \
            is True and not node.get("properties")


_SHAPES: dict[tuple[Any, ...], Shapes] = {}


def shapes_for(rt: ResourceType) -> Shapes:
    """The (cached) shapes of a resource type; a CRD's new schema gets new shapes."""
    key = (rt.group, rt.version, rt.plural, rt.kind, id(rt.schema))
    shapes = _SHAPES.get(key)
    if shapes is None:
        if len(_SHAPES) > 1024:
            _SHAPES.clear()
        shapes = SchemaShapes(rt.kind, rt.schema) if rt.is_custom and rt.schema else BuiltinShapes(rt.kind)
        _SHAPES[key] = shapes
    return shapes


def tracked_leaves(rt: ResourceType, obj: dict[str, Any] | None, subresource: str | None) -> dict[Path, Any]:
    """The member paths of `obj` that managers can own, for writes to the main resource or its status."""
    if not obj:
        return {}
    shapes = shapes_for(rt)
    if subresource == "status":
        status = obj.get("status")
        return fieldset.leaves(status, shapes, ("f:status",), ("status",)) if isinstance(status, dict) and status \
            else {}
    view = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    if rt.status_subresource:
        view.pop("status", None)
    meta = view.get("metadata")
    if isinstance(meta, dict):
        meta = {k: v for k, v in meta.items() if k not in _STRIPPED_META}
        if meta:
            view["metadata"] = meta
        else:
            view.pop("metadata")
    return fieldset.leaves(view, shapes)


# --- managers ------------------------------------------------------------------------------------

@dataclass
class Entry:
    manager: str
    operation: str
    api_version: str
    subresource: str
    time: str
    decoded: FieldSet | None  # None until `fields` is first read: decoded from `raw` then
    raw: dict[str, Any] | None = None  # the stored fieldsV1 of `fields`, reused while they do not change

    @property
    def fields(self) -> FieldSet:
        if self.decoded is None:
            self.decoded = fieldset.from_fields_v1(self.raw or {})
        return self.decoded

    def has_fields(self) -> bool:
        return bool(self.decoded) if self.decoded is not None else fieldset.has_fields(self.raw or {})

    def in_scope(self, status_write: bool) -> bool:
        """Whether a write to the status (or to the rest, of a resource with a status subresource) may change what
        this entry owns, judged from the top of its fieldsV1 without decoding it."""
        if self.decoded is not None or not isinstance(self.raw, dict):
            return True
        return "f:status" in self.raw if status_write else set(self.raw) != {"f:status"}

    def identity(self) -> tuple[str, str, str, str]:
        # An applier is one manager whatever version it applied; updaters are per version.
        return (self.manager, self.operation, "" if self.operation == APPLY else self.api_version, self.subresource)

    def encode(self) -> dict[str, Any]:
        out: dict[str, Any] = {"manager": self.manager, "operation": self.operation, "apiVersion": self.api_version,
                               "time": self.time, "fieldsType": "FieldsV1",
                               "fieldsV1": self.raw if self.raw is not None else fieldset.to_fields_v1(self.fields)}
        if self.subresource:
            out["subresource"] = self.subresource
        return out

    def describe(self) -> str:
        """The manager as Kubernetes names it in conflict messages."""
        text = f'"{self.manager}"'
        if self.subresource:
            text += f' with subresource "{self.subresource}"'
        if self.operation == UPDATE:
            text += f" using {self.api_version}" + (f" at {self.time}" if self.time else "")
        return text


def decode(obj: dict[str, Any] | None) -> list[Entry]:
    entries = []
    for raw in ((obj or {}).get("metadata") or {}).get("managedFields") or ():
        if not isinstance(raw, dict) or not raw.get("manager"):
            continue
        entries.append(Entry(str(raw["manager"]), str(raw.get("operation") or UPDATE), str(raw.get("apiVersion") or ""),
                             str(raw.get("subresource") or ""), str(raw.get("time") or ""), None,
                             raw.get("fieldsV1")))
    return entries


def encode(entries: list[Entry]) -> list[dict[str, Any]]:
    kept = [e for e in entries if e.has_fields()]
    kept.sort(key=lambda e: (e.operation, e.time, e.manager, e.api_version, e.subresource))
    return [e.encode() for e in kept]


def manager_name(field_manager: str | None, user_agent: str) -> str:
    """The manager of a write: the fieldManager asked for, else the User-Agent up to its first `/`."""
    if field_manager:
        return field_manager
    return user_agent.split("/", 1)[0][:FIELD_MANAGER_MAX_LENGTH]


def validate_patch_options(field_manager: str | None, force: str | None, apply: bool) -> None:
    """kube-apiserver's PatchOptions validation: 422 Invalid naming the option."""
    causes: list[dict[str, str]] = []
    if not apply and force is not None:
        causes.append({"reason": "FieldValueForbidden", "field": "force",
                       "message": "Forbidden: may not be specified for non-apply patch"})
    if apply and not field_manager:
        causes.append({"reason": "FieldValueRequired", "field": "fieldManager",
                       "message": "Required value: is required for apply patch"})
    causes += _field_manager_causes(field_manager)
    if causes:
        raise _invalid_options("PatchOptions", causes)


def validate_field_manager(field_manager: str | None, options_kind: str) -> None:
    causes = _field_manager_causes(field_manager)
    if causes:
        raise _invalid_options(options_kind, causes)


def _field_manager_causes(field_manager: str | None) -> list[dict[str, str]]:
    if not field_manager:
        return []
    if len(field_manager) > FIELD_MANAGER_MAX_LENGTH:
        return [{"reason": "FieldValueTooLong", "field": "fieldManager",
                 "message": f"Too long: may not be more than {FIELD_MANAGER_MAX_LENGTH} bytes"}]
    if any(unicodedata.category(ch)[0] in "CZ" and ch != " " for ch in field_manager):
        return [{"reason": "FieldValueInvalid", "field": "fieldManager",
                 "message": f'Invalid value: "{field_manager}": must only contain printable characters'}]
    return []


def _invalid_options(kind: str, causes: list[dict[str, str]]) -> errors.APIError:
    parts = [f"{c['field']}: {c['message']}" for c in causes]
    summary = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    return errors.APIError(422, "Invalid", f'{kind}.meta.k8s.io "" is invalid: {summary}',
                           {"group": "meta.k8s.io", "kind": kind, "causes": causes})


# --- writes --------------------------------------------------------------------------------------

@dataclass
class Write:
    """Who writes and how: an Update by `manager`, or an Apply of `applied` (optionally forced)."""

    manager: str
    operation: str = UPDATE
    applied: dict[str, Any] | None = None
    force: bool = False


def apply(rt: ResourceType, live: dict[str, Any] | None, applied: dict[str, Any], write: Write,
          subresource: str | None) -> dict[str, Any]:
    """The object after applying `applied` to `live`: merged, conflicts checked, unapplied fields pruned."""
    shapes = shapes_for(rt)
    base = copy.deepcopy(live) if live else {}
    base.get("metadata", {}).pop("managedFields", None)
    merged = fieldset.merge(base, applied, shapes)
    # Optimistic concurrency applies only when the configuration itself names a resourceVersion.
    merged.setdefault("metadata", {})
    merged["metadata"] = {k: v for k, v in merged["metadata"].items() if k != "resourceVersion"}
    if (applied.get("metadata") or {}).get("resourceVersion"):
        merged["metadata"]["resourceVersion"] = applied["metadata"]["resourceVersion"]
    applied_set = frozenset(tracked_leaves(rt, applied, subresource))
    entries = decode(live)
    me = _apply_identity(write.manager, subresource)
    others = [e for e in entries if e.identity() != me]
    if not write.force:
        _, _, changed = _changes(rt, live, merged, subresource)
        conflicts = [(e, p) for e in others for p in sorted(e.fields & changed & applied_set)]
        if conflicts:
            raise conflict_error(rt, (live or {}).get("metadata", {}).get("name", ""), conflicts)
    previous = next((e.fields for e in entries if e.identity() == me), frozenset())
    owned_by_others = frozenset().union(*(e.fields for e in others)) if others else frozenset()
    gone = [p for p in previous - applied_set
            if p not in owned_by_others and not any(o[:len(p)] == p for o in owned_by_others)]
    if gone:
        merged = fieldset.remove(merged, gone, shapes)
    return merged


def _apply_identity(manager: str, subresource: str | None) -> tuple[str, str, str, str]:
    return (manager, APPLY, "", subresource or "")


def _changes(rt: ResourceType, old: dict[str, Any] | None, new: dict[str, Any],
             subresource: str | None) -> tuple[dict[Path, Any], set[Path], set[Path]]:
    new_leaves = tracked_leaves(rt, new, subresource)
    added, removed, modified = fieldset.compare(tracked_leaves(rt, old, subresource), new_leaves)
    return new_leaves, removed, added | modified


def record(rt: ResourceType, old: dict[str, Any] | None, new: dict[str, Any], write: Write,
           subresource: str | None, now: str) -> list[dict[str, Any]]:
    """The managedFields of `new` after `write` turned `old` into it."""
    new_leaves, removed, changed = _changes(rt, old, new, subresource)
    entries = decode(old)
    if write.operation == APPLY:
        me = _apply_identity(write.manager, subresource)
        mine = frozenset(tracked_leaves(rt, write.applied or {}, subresource))
        taken = changed & mine
    else:
        me = (write.manager, UPDATE, rt.api_version, subresource or "")
        previous = next((e.fields for e in entries if e.identity() == me), frozenset())
        mine = (previous | changed) - removed
        taken = changed
    status_scope = subresource == "status"
    scoped = status_scope or rt.status_subresource  # else every field is within a write's reach

    def present(path: Path) -> bool:
        # Fields outside what this write could change (status vs the rest) stay as they are.
        in_scope = (path[:1] == ("f:status",)) == status_scope or not (status_scope or rt.status_subresource)
        return path in new_leaves if in_scope else True

    out: list[Entry] = []
    found = False
    for entry in entries:
        if entry.identity() == me:
            found = True
            fields = frozenset(p for p in mine if present(p))
            same = fields == entry.fields
            touched = not same or bool(changed or removed)
            out.append(Entry(entry.manager, entry.operation, rt.api_version, entry.subresource,
                             now if touched else entry.time, fields, entry.raw if same else None))
            continue
        if scoped and not entry.in_scope(status_scope):
            out.append(entry)  # it owns nothing this write can change: kept as stored, never decoded
            continue
        fields = frozenset(p for p in entry.fields if present(p) and p not in taken)
        out.append(Entry(entry.manager, entry.operation, entry.api_version, entry.subresource, entry.time, fields,
                         entry.raw if fields == entry.fields else None))
    if not found:
        out.append(Entry(write.manager, write.operation, rt.api_version, subresource or "", now,
                         frozenset(p for p in mine if present(p))))
    return encode(out)


def conflict_error(rt: ResourceType, name: str, conflicts: list[tuple[Entry, Path]]) -> errors.APIError:
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {e.describe()}",
               "field": fieldset.path_string(p)} for e, p in conflicts]
    if len(conflicts) == 1:
        entry, path = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {entry.describe()}: {fieldset.path_string(path)}"
    else:
        by_manager: dict[str, list[str]] = {}
        for entry, path in conflicts:
            by_manager.setdefault(entry.describe(), []).append(fieldset.path_string(path))
        lines = []
        for manager in sorted(by_manager):
            lines.append(f"conflicts with {manager}:")
            lines += [f"- {p}" for p in by_manager[manager]]
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    details: dict[str, Any] = {"name": name, "kind": rt.plural, "causes": causes}
    if rt.group:
        details["group"] = rt.group
    return errors.APIError(409, "Conflict", message, details)
