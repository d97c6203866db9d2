"""Strategic merge patch for built-in kinds: lists merged by their Kubernetes merge keys, and directives."""

from __future__ import annotations

import copy
from typing import Any

from velashard.patch.errors import PatchError

# Merge keys by field name, as the Kubernetes API types declare them (patchMergeKey).
_MERGE_KEYS: dict[str, str] = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "env": "name",
    "volumes": "name", "imagePullSecrets": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath",
    "ownerReferences": "uid", "conditions": "type", "hostAliases": "ip", "topologySpreadConstraints":
    "topologyKey", "resourceClaims": "name", "readinessGates": "conditionType", "subsets": "",
}
# Lists of scalars merged as sets (patchStrategy merge on primitive lists).
_MERGED_SCALAR_LISTS = {"finalizers"}


def _merge_key(path: tuple[str, ...], kind: str | None) -> str | None:
    field = path[-1] if path else ""
    if field == "ports":
        # Service ports merge by port; container ports by containerPort.
        if kind == "Service" and path == ("spec", "ports"):
            return "port"
        return "containerPort"
    key = _MERGE_KEYS.get(field)
    return key or None


def strategic_merge_patch(target: dict[str, Any], patch: dict[str, Any], kind: str | None = None) -> dict[str, Any]:
    """Apply a strategic merge patch to a copy of `target`."""
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be a JSON object")
    return _merge_map(copy.deepcopy(target) if isinstance(target, dict) else {}, patch, (), kind)


def _merge_map(target: dict[str, Any], patch: dict[str, Any], path: tuple[str, ...], kind: str | None) -> dict[str, Any]:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return {}
    if directive not in (None, "merge"):
        raise PatchError(f"unknown patch directive {directive!r} at {'.'.join(path) or 'the root'}")
    retain = patch.get("$retainKeys")
    result = dict(target)
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys"):
            continue
        if key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list) and isinstance(value, list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
            continue
        current = result.get(key)
        if isinstance(value, dict):
            result[key] = _merge_map(current if isinstance(current, dict) else {}, value, path + (key,), kind)
            if result[key] == {} and value.get("$patch") == "delete":
                result.pop(key)
        elif isinstance(value, list):
            result[key] = _merge_list(current if isinstance(current, list) else [], value, path + (key,), kind)
        else:
            result[key] = copy.deepcopy(value)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/"):
            field = key.split("/", 1)[1]
            result[field] = _reorder(result.get(field), value, _merge_key(path + (field,), kind))
    return result


def _reorder(items: Any, order: Any, merge_key: str | None) -> Any:
    if not isinstance(items, list) or not isinstance(order, list):
        return items

    def ident(item: Any) -> Any:
        return item.get(merge_key) if merge_key and isinstance(item, dict) else item

    wanted = [ident(o) for o in order]
    ranked = sorted(range(len(items)), key=lambda i: (wanted.index(ident(items[i])) if ident(items[i]) in wanted
                                                      else len(wanted) + i))
    return [items[i] for i in ranked]


def _merge_list(target: list[Any], patch: list[Any], path: tuple[str, ...], kind: str | None) -> list[Any]:
    field = path[-1]
    if field in _MERGED_SCALAR_LISTS and all(not isinstance(v, (dict, list)) for v in patch):
        return list(dict.fromkeys(list(target) + list(patch)))
    key = _merge_key(path, kind)
    if key is None or not all(isinstance(v, dict) for v in patch):
        for item in patch:
            if isinstance(item, dict) and item.get("$patch") == "replace":
                return [copy.deepcopy({k: v for k, v in i.items() if k != "$patch"}) for i in patch
                        if not (isinstance(i, dict) and i.get("$patch") == "replace")]
        return copy.deepcopy(patch)
    if any(item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(i) for i in patch if i.get("$patch") != "replace"]
    result = [copy.deepcopy(i) for i in target]
    for item in patch:
        directive = item.get("$patch")
        if directive not in (None, "merge", "delete"):
            raise PatchError(f"unknown patch directive {directive!r} in list {'.'.join(path)}")
        if key not in item:
            raise PatchError(f"map in list {'.'.join(path)} is missing its merge key {key!r}")
        idx = next((i for i, cur in enumerate(result) if isinstance(cur, dict) and cur.get(key) == item[key]), None)
        if directive == "delete":
            if idx is not None:
                result.pop(idx)
            continue
        clean = {k: v for k, v in item.items() if k != "$patch"}
        if idx is None:
            result.append(_merge_map({}, clean, path, kind))
        else:
            result[idx] = _merge_map(result[idx], clean, path, kind)
    return result
