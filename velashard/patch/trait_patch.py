"""KubeVela's trait patch: a trait's `patch` unified with the workload the way KubeVela's StrategyUnify does it
(kubevela/workflow pkg/cue/model/sets), over plain data.

The patch's fields carry comment tags (`// +patchKey=name`, `// +patchStrategy=...`), given as a tag tree
(velashard.cue.export.TagTree: (tags of a field, {child label or list index: subtree})):
- structs merge field by field; a scalar that differs from the workload's is a conflict;
- a list merges element by element (the workload's list is open, the patch's closed unless it ends in `...`: a
  shorter closed patch list conflicts) unless `+patchKey=K` (inherited by nested fields) names a key: then items with the same key merge
  and new items are appended; `+patchStrategy=replace` replaces a list, `+patchStrategy=retainKeys` replaces a
  field's value (or, with a key, the matched items);
- `+patchStrategy=jsonMergePatch` on the patch itself applies it as RFC 7386, `jsonPatch` applies
  `patch.operations` as RFC 6902.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from velashard.cue import LIST_TAIL, OPEN_LIST
from velashard.patch.copying import copy_json
from velashard.patch.errors import PatchError
from velashard.patch.json_patch import apply_json_patch
from velashard.patch.merge_patch import json_merge_patch

Tags = tuple  # (dict[str, str], dict[str | int, Tags])

_MISSING = object()
_EMPTY = object()  # a placeholder item that leaves the workload's item as it is
_NO_TAGS: Tags = ({}, {})


def apply_trait_patch(base: dict[str, Any], patch: Any, tags: Tags | None = None) -> dict[str, Any]:
    """The workload `base` with a trait's `patch` applied; PatchError names the path of a conflict."""
    tags = tags or _NO_TAGS
    strategy = tags[0].get("patchStrategy")
    if strategy == "jsonMergePatch":
        return json_merge_patch(base, patch)
    if strategy == "jsonPatch":
        operations = patch.get("operations") if isinstance(patch, dict) else None
        return apply_json_patch(base, operations or [])
    # the patch's own tags choose the strategy only; the merge tags are its fields'
    return _unify(copy_json(base), patch, ({}, tags[1]), {}, "")


def _child(tags: Tags | None, key: str | int) -> Tags:
    return (tags[1].get(key) if tags else None) or _NO_TAGS


def _unify(base: Any, patch: Any, tags: Tags, inherited: dict[str, str], path: str) -> Any:
    """One field: `tags` are the field's own, `inherited` its ancestors' (only patchKey is inherited)."""
    own = tags[0]
    effective = {**inherited, **own}
    if base is _MISSING:
        return copy_json(patch)
    if isinstance(patch, list):
        if not isinstance(base, list):
            raise PatchError(f"{path or 'patch'}: conflicting values (a list and {_kind(base)})")
        return _unify_list(base, patch, tags, effective, own.get("patchStrategy"), path)
    if own.get("patchStrategy") == "retainKeys":
        return copy_json(patch)
    if isinstance(patch, dict):
        if not isinstance(base, dict):
            raise PatchError(f"{path or 'patch'}: conflicting values (a struct and {_kind(base)})")
        out = dict(base)
        for key, value in patch.items():
            out[key] = _unify(base.get(key, _MISSING), value, _child(tags, key), effective,
                              f"{path}.{key}" if path else key)
        return out
    if not _same_scalar(base, patch):
        raise PatchError(f"{path or 'patch'}: conflicting values {_show(base)} and {_show(patch)}")
    return patch


def _unify_list(base: list, patch: list, tags: Tags, effective: dict[str, str], strategy: str | None,
                path: str) -> list:
    items = [(p, _child(tags, i)) for i, p in enumerate(patch)]
    base = list(base)
    is_open = tags[0].get(OPEN_LIST) == "true"
    if strategy == "replace":
        base = [copy_json(p) for p in patch]
    elif effective.get("patchKey"):
        merged = _by_key(base, items, effective["patchKey"], strategy == "retainKeys")
        if merged is not None:
            items, is_open = merged, True
    if not is_open and len(items) < len(base):
        raise PatchError(f"{path or 'patch'}: incompatible list lengths ({len(base)} and {len(items)}); "
                         "a list without +patchKey merges element by element")
    tail = tags[0].get(LIST_TAIL)
    out = []
    for i in range(max(len(base), len(items))):
        if i >= len(items):  # `[...T]`: the element type constrains the workload's further elements
            out.append(base[i] if tail is None else _unify(base[i], tail, _NO_TAGS, effective, f"{path}[{i}]"))
            continue
        value, sub = items[i]
        here = base[i] if i < len(base) else _MISSING
        if value is _EMPTY:
            out.append({} if here is _MISSING else here)
        else:
            out.append(_unify(here, value, sub, effective, f"{path}[{i}]"))
    return out


def _by_key(base: list, items: list, keys: str, retain: bool) -> list | None:
    """The patch items aligned with the workload's by key, new ones last; None when the patch items have no
    such key (then the lists merge element by element)."""
    aligned: list = []
    pending: dict = {}
    for key in keys.split(","):
        found = False
        for value, sub in items:
            k = _lookup(value, key)
            if k is _MISSING:
                continue
            found = True
            if isinstance(k, (dict, list)):
                return None
            pending[(key, _token(k))] = (value, sub)
        if not found:
            if not items:
                continue
            return None
        for i, elt in enumerate(base):
            k = _lookup(elt, key)
            if k is _MISSING:
                continue
            if isinstance(k, (dict, list)):
                return None
            match = pending.pop((key, _token(k)), None)
            if match is None:
                aligned.append((_EMPTY, _NO_TAGS))
            else:
                if retain:
                    base[i] = {}
                aligned.append(match)
    left = {id(v[0]) for v in pending.values()}
    aligned.extend((value, sub) for value, sub in items if id(value) in left)
    return aligned


def _lookup(value: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _token(value: Any) -> tuple[str, Any]:
    return (type(value).__name__, value)


def _same_scalar(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b or (type(a) is type(b) and a == b)
    numbers = (int, float, Decimal)
    if isinstance(a, numbers) and isinstance(b, numbers):
        return a == b
    return type(a) is type(b) and a == b


def _kind(value: Any) -> str:
    return "a struct" if isinstance(value, dict) else "a list" if isinstance(value, list) else _show(value)


def _show(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else "null" if value is None else str(value).lower() \
        if isinstance(value, bool) else str(value)
