"""Strategic merge patch for built-in kinds, as apimachinery's strategicpatch applies it on the server.

Maps merge recursively and `null` deletes a key. A list either has a merge key (its items are
matched by that key and merged), is a merged set of scalars (`metadata.finalizers`), or is atomic
(the patch replaces it). Directives: `$patch: replace|delete|merge` in maps and list items,
`$retainKeys`, `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>`; none of them
reaches the result.

Order of a merged list: by default every live item keeps its place and items new to the list are
appended in the patch's order (what KubeVela trait patches and most readers expect).
`kubernetes_order=True` orders exactly as kube-apiserver does: items the patch names keep the
patch's relative order, live-only items keep theirs, and where the two cannot be compared (an item
new to the list) the patch's item goes first, so `{"containers": [{"name": "sidecar"}]}` on a pod
with one container yields `[sidecar, app]`. `$setElementOrder` is honoured in both modes.
"""

from __future__ import annotations

from typing import Any

from velashard.patch.copying import copy_json
from velashard.patch.errors import PatchError

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_DELETE_FROM = "$deleteFromPrimitiveList/"
_SET_ORDER = "$setElementOrder/"

# patchMergeKey of list fields, as the Kubernetes API types declare them.
_POD_SPEC_LISTS = {"containers": "name", "initContainers": "name", "ephemeralContainers": "name", "volumes": "name",
                   "imagePullSecrets": "name", "hostAliases": "ip", "topologySpreadConstraints": "topologyKey",
                   "resourceClaims": "name", "schedulingGates": "name"}
_CONTAINER_LISTS = {"env": "name", "ports": "containerPort", "volumeMounts": "mountPath",
                    "volumeDevices": "devicePath"}
_CONTAINERS = ("containers", "initContainers", "ephemeralContainers")
_SET = "set"  # a list of scalars merged as a set (patchStrategy merge without a merge key)


def list_strategy(path: tuple[str, ...], kind: str | None) -> str | None:
    """How the list at `path` (map keys only, list indices left out) merges.

    Returns its merge key, `"set"` for a merged list of scalars, or None for an atomic list.
    """
    if not path:
        return None
    field = path[-1]
    parent = path[-2] if len(path) > 1 else ""
    if parent == "metadata":
        if field == "finalizers":
            return _SET
        if field == "ownerReferences":
            return "uid"
        return None
    if field == "ports":
        if parent in _CONTAINERS:
            return "containerPort"
        # A Service's ports merge by port; container ports are handled above.
        return "port" if path == ("spec", "ports") and kind in (None, "Service") else None
    if field in _CONTAINER_LISTS:
        return _CONTAINER_LISTS[field] if parent in _CONTAINERS else None
    if field in _POD_SPEC_LISTS:
        return _POD_SPEC_LISTS[field]
    if parent == "status" and (field == "conditions" or (field == "addresses" and kind in (None, "Node"))):
        return "type"
    if path == ("secrets",) and kind == "ServiceAccount":
        return "name"
    if path == ("webhooks",) and kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        return "name"  # listType=map, listMapKey=name: a caBundle one manager sets survives another's apply
    return None


def strategic_merge_patch(target: dict[str, Any], patch: dict[str, Any], kind: str | None = None, *,
                          kubernetes_order: bool = False) -> dict[str, Any]:
    """Apply a strategic merge patch to a copy of `target` (neither input is changed).

    `kind` selects path-aware merge keys (e.g. Service `spec.ports` by `port`); None or an unknown
    kind applies the pod-template rules wherever `containers` and friends appear.
    `kubernetes_order` selects kube-apiserver's exact list order (see the module docstring).
    """
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be a JSON object")
    merger = _Merger(kind, not kubernetes_order)
    return merger.merge_map(copy_json(target) if isinstance(target, dict) else {}, patch, ())


def _where(path: tuple[str, ...]) -> str:
    return ".".join(path) or "the root"


def _same(a: Any, b: Any) -> bool:
    # JSON identity of merge-key values and set members: true is not 1.
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


class _Merger:
    def __init__(self, kind: str | None, append_new: bool) -> None:
        self.kind = kind
        self.append_new = append_new

    def clean(self, value: Any, path: tuple[str, ...]) -> Any:
        """A new value from the patch: nulls dropped and directives applied to nothing, never copied raw."""
        if isinstance(value, dict):
            return self.merge_map({}, value, path)
        if isinstance(value, list):
            return self.merge_list(None, value, path, None)
        return value

    def merge_map(self, original: dict[str, Any], patch: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
        directive = patch.get(_DIRECTIVE)
        if directive == "replace":
            return {k: self.clean(v, path + (k,)) for k, v in patch.items() if k != _DIRECTIVE and v is not None}
        if directive == "delete":
            return {}
        if directive not in (None, "merge"):
            raise PatchError(f"unknown patch directive {directive!r} at {_where(path)}")
        if _RETAIN_KEYS in patch:
            original = self.retain_keys(original, patch, path)
        for key, value in patch.items():
            if key.startswith(_DELETE_FROM):
                self.delete_from_primitive_list(original, key[len(_DELETE_FROM):], value, path)
        for key, value in patch.items():
            if key in (_DIRECTIVE, _RETAIN_KEYS) or key.startswith((_DELETE_FROM, _SET_ORDER)):
                continue
            if value is None:
                original.pop(key, None)
                continue
            sub, current = path + (key,), original.get(key)
            order = patch.get(_SET_ORDER + key)
            if isinstance(value, dict):
                original[key] = self.merge_map(current if isinstance(current, dict) else {}, value, sub)
            elif isinstance(value, list):
                original[key] = self.merge_list(current if isinstance(current, list) else None, value, sub, order)
            else:
                original[key] = value
        for key, value in patch.items():
            field = key[len(_SET_ORDER):]
            # Order lists whose contents the patch left alone (the others were ordered while merging).
            if key.startswith(_SET_ORDER) and field not in patch and isinstance(original.get(field), list):
                original[field] = self.merge_list(original[field], None, path + (field,), value)
        return original

    def retain_keys(self, original: dict[str, Any], patch: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
        retain = patch[_RETAIN_KEYS]
        if not isinstance(retain, list) or not all(isinstance(k, str) for k in retain):
            raise PatchError(f"invalid patch format of retainKeys at {_where(path)}: must be a list of strings")
        for key, value in patch.items():
            if value is None or key in (_DIRECTIVE, _RETAIN_KEYS) or key.startswith((_DELETE_FROM, _SET_ORDER)):
                continue
            if key not in retain:
                raise PatchError(f"invalid patch format of retainKeys at {_where(path)}: {key!r} is set but not "
                                 "listed in $retainKeys")
        return {k: v for k, v in original.items() if k in retain}

    def delete_from_primitive_list(self, original: dict[str, Any], field: str, values: Any,
                                   path: tuple[str, ...]) -> None:
        if not isinstance(values, list):
            raise PatchError(f"{_DELETE_FROM}{field} at {_where(path)} must be a list")
        current = original.get(field)
        if current is None:
            return
        if not isinstance(current, list):
            raise PatchError(f"{_DELETE_FROM}{field} at {_where(path)}: the field is not a list")
        original[field] = [item for item in current if not any(_same(item, v) for v in values)]

    def merge_list(self, original: list[Any] | None, patch: list[Any] | None, path: tuple[str, ...],
                   order: Any) -> list[Any]:
        """Merge `patch` (None: only reorder) into `original` (None: the field is new)."""
        if order is not None and not isinstance(order, list):
            raise PatchError(f"{_SET_ORDER}{path[-1]} at {_where(path[:-1])} must be a list")
        strategy = list_strategy(path, self.kind)
        if strategy is None:
            if patch is None:
                return original or []
            return [self.clean(item, path) for item in patch
                    if not (isinstance(item, dict) and item.get(_DIRECTIVE) == "replace" and len(item) == 1)]
        if strategy == _SET:
            return self.merge_set(original or [], patch, path, order)
        return self.merge_keyed(original, patch, path, strategy, order)

    def merge_set(self, original: list[Any], patch: list[Any] | None, path: tuple[str, ...],
                  order: list[Any] | None) -> list[Any]:
        if patch is None:
            merged = list(original)
        else:
            if any(isinstance(item, (dict, list)) for item in patch):
                raise PatchError(f"{_where(path)} is a list of scalars; the patch has a non-scalar item")
            merged = []
            for item in original + patch:
                if not any(_same(item, seen) for seen in merged):
                    merged.append(item)
        reference = order if order is not None else (patch or [])
        if self.append_new and order is None:
            return merged
        return _arrange(merged, original, reference, lambda item: item)

    def merge_keyed(self, original: list[Any] | None, patch: list[Any] | None, path: tuple[str, ...], key: str,
                    order: list[Any] | None) -> list[Any]:
        merged = list(original or [])  # items are already the caller's own copies
        regular: list[dict[str, Any]] = []
        for item in patch or []:
            if not isinstance(item, dict):
                raise PatchError(f"list {_where(path)} merges by {key!r}; its items must be objects")
            directive = item.get(_DIRECTIVE)
            if directive == "delete":
                if key not in item:
                    raise PatchError(f"$patch: delete in list {_where(path)} needs the merge key {key!r}")
                merged = [m for m in merged if not (isinstance(m, dict) and _same(m.get(key, _ABSENT), item[key]))]
            elif directive == "replace":
                if len(item) == 1:
                    # The whole list becomes the patch's other items, in the patch's order.
                    return [self.clean(i, path) for i in patch if i is not item and
                            not (isinstance(i, dict) and i.get(_DIRECTIVE) in ("replace", "delete"))]
                regular.append(item)  # an item to replace whole: merge_map handles the directive
            elif directive in (None, "merge"):
                if directive is None or len(item) > 1:
                    regular.append(item)
            else:
                raise PatchError(f"unknown patch directive {directive!r} in list {_where(path)}")
        server_order = list(merged)
        for item in regular:
            if key not in item:
                if original:
                    raise PatchError(f"an item of list {_where(path)} is missing its merge key {key!r}")
                merged.append(self.clean(item, path))  # a new list: nothing to match it against
                continue
            idx = next((i for i, m in enumerate(merged) if isinstance(m, dict) and _same(m.get(key, _ABSENT),
                                                                                         item[key])), None)
            if idx is None:
                merged.append(self.merge_map({}, item, path))
            else:
                merged[idx] = self.merge_map(merged[idx], item, path)
        if order is not None:
            _check_order(regular, order, key, path)
        if self.append_new and order is None:
            return merged

        def ident(item: Any) -> Any:
            return item.get(key, _ABSENT) if isinstance(item, dict) else _ABSENT

        return _arrange(merged, server_order, order if order is not None else regular, ident)


_ABSENT = object()


def _position(items: list[Any], value: Any, ident: Any) -> int:
    wanted = ident(value)
    if wanted is _ABSENT:
        return -1
    return next((i for i, item in enumerate(items) if _same(ident(item), wanted)), -1)


def _arrange(merged: list[Any], server_order: list[Any], reference: list[Any], ident: Any) -> list[Any]:
    """Order `merged` as apimachinery's normalizeElementOrder does.

    Items named in `reference` (the patch list or $setElementOrder) take its relative order; the
    others keep the live order; the two sequences are then interleaved by live position, an item the
    live list lacks going before a live-only item.
    """
    named = sorted((m for m in merged if _position(reference, m, ident) >= 0),
                   key=lambda m: _position(reference, m, ident))
    live_only = [m for m in merged if _position(reference, m, ident) < 0]
    result: list[Any] = []
    i = j = 0
    while i < len(live_only) or j < len(named):
        if j >= len(named):
            result.append(live_only[i])
            i += 1
        elif i >= len(live_only):
            result.append(named[j])
            j += 1
        else:
            left, right = _position(server_order, live_only[i], ident), _position(server_order, named[j], ident)
            if left >= 0 and right >= 0 and left < right:
                result.append(live_only[i])
                i += 1
            else:
                result.append(named[j])
                j += 1
    return result


def _check_order(items: list[dict[str, Any]], order: list[Any], key: str, path: tuple[str, ...]) -> None:
    """The patch's items must appear in $setElementOrder, in the same relative order."""
    wanted = [o.get(key, _ABSENT) if isinstance(o, dict) else _ABSENT for o in order]
    pos = 0
    for item in items:
        value = item.get(key, _ABSENT)
        while pos < len(wanted) and not _same(wanted[pos], value):
            pos += 1
        if pos == len(wanted):
            raise PatchError(f"the order of list {_where(path)} in the patch does not match "
                             f"{_SET_ORDER}{path[-1]}")
        pos += 1
