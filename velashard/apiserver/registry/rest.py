"""The API verbs over the store with Kubernetes' semantics: create, get, list, update, patch, delete.

Each write runs as kube-apiserver runs it: decode checks, mutating admission, the kind's strategy
(defaults, status handling), validation, validating admission, then an optimistic-concurrency
commit. Finalizers, graceful deletion and propagation policies are decided here; the garbage
collector and namespace/CRD lifecycles run in `controllers`.
"""

from __future__ import annotations

import base64
import copy
import ipaddress
import json
import random
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from velashard.apiserver import errors
from velashard.apiserver.admission.attributes import Attributes
from velashard.apiserver.admission.webhooks import Admission
from velashard.apiserver.ids import new_uid
from velashard.apiserver.registry import strategies
from velashard.apiserver.storage import conversion, managed_fields
from velashard.apiserver.storage.openapi_schema import apply_schema
from velashard.apiserver.storage.resources import Registry, ResourceType
from velashard.apiserver.storage.selectors import SelectorError, parse_field_selector, parse_label_selector
from velashard.apiserver.storage.store import Event, Store, dumps, now_rfc3339
from velashard.apiserver.storage.validation import Cause, validate_object_meta
from velashard.kube import jsoncodec
from velashard.patch import PatchError, apply_json_patch, json_merge_patch, strategic_merge_patch
from velashard.patch.copying import copy_json

SYSTEM_USER = {"username": "system:apiserver", "uid": "", "groups": ["system:masters"]}
GC_USER = {"username": "system:serviceaccount:kube-system:generic-garbage-collector", "uid": "",
           "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]}

_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_GENERATE_ATTEMPTS = 8  # the first name and 7 more, as kube-apiserver tries
_MAX_UPDATE_RETRIES = 16
_ORPHAN = "orphan"
_FOREGROUND = "foregroundDeletion"


@dataclass
class Request:
    """Who is asking, and how."""

    user: dict[str, Any] = field(default_factory=lambda: dict(SYSTEM_USER))
    dry_run: bool = False
    warnings: list[str] = field(default_factory=list)  # admission warnings for the response
    annotations: dict[str, str] = field(default_factory=dict)  # admission audit annotations
    manager: str = "kube-controller-manager"  # the field manager its writes are recorded under
    force: bool = False  # server-side apply takes conflicting fields
    write: managed_fields.Write | None = None


@dataclass
class Listed:
    """A list answer: its metadata and its objects' JSON as stored (decoded, and converted to the version asked
    for, only when a caller reads `items`)."""

    rt: ResourceType
    metadata: dict[str, Any]
    raws: list[bytes]

    @property
    def items(self) -> list[dict[str, Any]]:
        return [conversion.from_storage(self.rt, jsoncodec.loads(raw)) for raw in self.raws]

    def body(self) -> dict[str, Any]:
        return {"kind": f"{self.rt.kind}List", "apiVersion": self.rt.api_version, "metadata": self.metadata,
                "items": self.items}

    def encoded(self) -> bytes:
        """The answer as JSON: the stored objects joined as they are, unless they are served converted."""
        if self.rt.storage_version:
            return dumps(self.body())
        head = dumps({"kind": f"{self.rt.kind}List", "apiVersion": self.rt.api_version, "metadata": self.metadata})
        return head[:-1] + b',"items":[' + b",".join(self.raws) + b"]}"


@dataclass
class Result:
    """An answer: the object (or Status) and, when it was just stored, its serialized form."""

    body: dict[str, Any]
    raw: bytes | None = None
    code: int = 200


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["metadata"]


def _path_value(obj: Any, path: str) -> str:
    for part in path.split("."):
        if not isinstance(obj, dict):
            return ""
        obj = obj.get(part)
    if obj is None:
        return ""
    if isinstance(obj, bool):
        return "true" if obj else "false"
    return str(obj)


def removable(obj: dict[str, Any]) -> bool:
    """A terminating object goes once no finalizer (and, for namespaces, no spec finalizer) remains."""
    if _meta(obj).get("finalizers"):
        return False
    if obj.get("kind") == "Pod" and _meta(obj).get("deletionGracePeriodSeconds"):
        return False  # a gracefully deleted pod goes when its kubelet confirms with grace period 0
    return not (obj.get("kind") == "Namespace" and (obj.get("spec") or {}).get("finalizers"))


class ClusterIPs:
    """Allocates Service cluster IPs from 10.96.0.0/12."""

    def __init__(self) -> None:
        self._net = ipaddress.ip_network("10.96.0.0/12")
        self._next = 10
        self._lock = threading.Lock()

    def allocate(self) -> str:
        with self._lock:
            self._next += 1
            return str(self._net[self._next])


class RestAPI:
    def __init__(self, store: Store, types: Registry, admission: Admission,
                 on_commit: Callable[[ResourceType, Event], None] | None = None):
        self.store = store
        self.types = types
        self.admission = admission
        self._on_commit = on_commit
        self._ips = ClusterIPs()

    # --- versions served by conversion -----------------------------------------------------------

    def _converted(self, rt: ResourceType, result: Result) -> Result:
        """A result of the storage version's type, in `rt`'s version."""
        body = conversion.from_storage(rt, result.body)
        return result if body is result.body else Result(body, None, result.code)

    # --- reads -----------------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        obj = self.store.get(rt.group_resource, (namespace, name))
        if obj is None:
            raise errors.not_found(rt.group, rt.plural, name)
        return conversion.from_storage(rt, obj)

    def matcher(self, rt: ResourceType, namespace: str | None, label_selector: str,
                field_selector: str) -> Callable[[dict[str, Any]], bool]:
        """A predicate for list and watch; 400 for a selector kube-apiserver would reject."""
        try:
            labels = parse_label_selector(label_selector or "")
            fields = parse_field_selector(field_selector or "")
        except SelectorError as err:
            raise errors.bad_request(f"unable to parse requirement: {err}")
        unsupported = fields.fields() - rt.field_labels
        if unsupported:
            raise errors.bad_request(f'field label not supported: {sorted(unsupported)[0]}')
        wanted = sorted(fields.fields())

        def matches(obj: dict[str, Any]) -> bool:
            meta = obj["metadata"]
            if namespace and meta.get("namespace") != namespace:
                return False
            if not labels.empty and not labels.matches(meta.get("labels") or {}):
                return False
            if wanted:
                return fields.matches({f: _path_value(obj, f) for f in wanted})
            return True

        return matches

    def list(self, rt: ResourceType, namespace: str | None, label_selector: str = "", field_selector: str = "",
             limit: int = 0, continue_token: str = "") -> "Listed":
        """A page of the resource's objects in key order, all as they were at the list's resourceVersion. Selectors
        read what the store keeps beside each object's JSON (its labels and field-selectable values), and the page
        is that JSON as stored: nothing is decoded."""
        matches = self.matcher(rt, namespace, label_selector, field_selector)
        start: tuple[str, str] | None = None
        rv = None
        if continue_token:
            try:
                token = json.loads(base64.urlsafe_b64decode(continue_token.encode()))
                start = (str(token["start"][0]), str(token["start"][1]))
                rv = int(token["rv"])
            except (ValueError, KeyError, TypeError, IndexError):
                raise errors.bad_request("continue key is not valid: invalid continue token")
        selective = bool(label_selector or field_selector)
        # selective: `following` says whether something selected follows the page
        found, following, current = self.store.entries(
            rt.group_resource, namespace or None, start, limit,
            (lambda key, stored: matches(stored.view(key))) if selective else None)
        metadata: dict[str, Any] = {"resourceVersion": str(rv if rv is not None else current)}
        raws = [stored.raw for _, stored in found]
        last: tuple[str, str] | None = found[-1][0] if found else None
        remaining = following
        if remaining and last is not None:
            token = {"rv": rv if rv is not None else current, "start": list(last)}
            metadata["continue"] = base64.urlsafe_b64encode(json.dumps(token).encode()).decode()
            if not label_selector and not field_selector:
                metadata["remainingItemCount"] = remaining
        return Listed(rt, metadata, raws)

    # --- create ----------------------------------------------------------------------------------

    def _check_body(self, rt: ResourceType, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.bad_request(f"the body of the request must be a JSON object describing a {rt.kind}")
        api_version, kind = body.get("apiVersion"), body.get("kind")
        if rt.is_custom and (not api_version or not kind):
            missing = "Kind" if not kind else "apiVersion"
            raise errors.bad_request(f"Object '{missing}' is missing in '{json.dumps(body)[:200]}'")
        if api_version and api_version != rt.api_version or kind and kind != rt.kind:
            raise errors.bad_request(f"the API version in the data ({api_version}) does not match the expected API "
                                     f"version ({rt.api_version})" if api_version != rt.api_version else
                                     f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})")
        body = dict(body)  # callers may pass a stored object: change copies, never theirs
        body["apiVersion"], body["kind"] = rt.api_version, rt.kind
        meta = body.get("metadata")
        if meta is None:
            meta = {}
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        meta = body["metadata"] = dict(meta)
        for key in ("labels", "annotations"):
            value = meta.get(key)
            if value is not None and (not isinstance(value, dict)
                                      or not all(isinstance(v, str) for v in value.values())):
                raise errors.bad_request(f"metadata.{key} must be a map of strings")
        for key in ("finalizers", "ownerReferences"):
            if meta.get(key) is not None and not isinstance(meta[key], list):
                raise errors.bad_request(f"metadata.{key} must be a list")
        meta.pop("managedFields", None)
        meta.pop("selfLink", None)
        return body

    def _check_namespace(self, rt: ResourceType, namespace: str, name: str) -> None:
        if not rt.namespaced:
            return
        ns = self.store.get(("", "namespaces"), ("", namespace))
        if ns is None:
            raise errors.not_found("", "namespaces", namespace)
        if _meta(ns).get("deletionTimestamp"):
            resource = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
            details: dict[str, Any] = {"name": name, "kind": rt.plural}
            if rt.group:
                details["group"] = rt.group
            details["causes"] = [{"reason": "NamespaceTerminating", "field": "metadata.namespace",
                                  "message": f"namespace {namespace} is being terminated"}]
            raise errors.APIError(403, "Forbidden", f'{resource} "{name}" is forbidden: unable to create new content '
                                  f"in namespace {namespace} because it is being terminated", details)

    def _validate(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """Schema (custom resources), metadata and kind validation; returns the pruned, defaulted object."""
        causes: list[Cause] = []
        if rt.is_custom and rt.schema:
            obj, causes = apply_schema(obj, rt.schema)
        causes = list(causes) + validate_object_meta(_meta(obj), namespaced=rt.namespaced,
                                                     name_validator="skip")
        name_errors = strategies.validate_name(rt.kind, _meta(obj).get("name", ""))
        causes += [Cause("metadata.name", f'Invalid value: "{_meta(obj).get("name", "")}": {msg}')
                   for msg in name_errors]
        causes += strategies.validate(rt.kind, obj)
        if causes:
            raise errors.invalid(rt.group, rt.kind, _meta(obj).get("name", ""), causes)
        return obj

    def create(self, rt: ResourceType, namespace: str, body: Any, req: Request) -> Result:
        obj = self._check_body(rt, body)
        if rt.storage_version:
            stored = self.types.storage_of(rt)
            return self._converted(rt, self.create(stored, namespace, conversion.to_storage(rt, obj), req))
        meta = _meta(obj)
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise errors.bad_request("the namespace of the provided object does not match the namespace sent "
                                         "on the request")
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if meta.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        for key in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
            meta.pop(key, None)
        generated = not meta.get("name")
        if generated:
            if not meta.get("generateName"):
                raise errors.invalid(rt.group, rt.kind, "", [Cause("metadata.name", "Required value: name or "
                                                                   "generateName is required", "FieldValueRequired")])
            meta["name"] = _generated_name(meta["generateName"])
        name = meta["name"]
        if not isinstance(name, str):
            raise errors.bad_request("metadata.name must be a string")
        self._check_namespace(rt, namespace, name)
        strategies.apply_defaults(rt.kind, obj)
        obj = self._admit_mutating("CREATE", rt, None, namespace, name, obj, None, req)
        meta = _meta(obj)
        meta["uid"] = new_uid()
        meta["creationTimestamp"] = now_rfc3339()
        meta["generation"] = 1
        strategies.prepare_for_create(rt.kind, obj, rt.status_subresource, rt.is_custom, self._ips.allocate)
        obj = self._validate(rt, obj)
        self._record_managers(rt, None, obj, req, None)
        self._admit_validating("CREATE", rt, None, namespace, name, obj, None, req)
        if req.dry_run:
            return Result(obj, code=201)
        event = self._store_new(rt, obj, generated)
        self._committed(rt, event)
        return Result(event.obj, event.raw, 201)

    def _store_new(self, rt: ResourceType, obj: dict[str, Any], generated: bool) -> Event:
        """Store a new object. A generated name that is taken is generated again, as kube-apiserver does
        (its RetryGenerateName feature): 5 characters of 27 give some 14 million names, so a
        few thousand creates with one generateName meet a taken name in one run out of several."""
        for _ in range(_GENERATE_ATTEMPTS - 1 if generated else 0):
            try:
                return self.store.create(rt.group_resource, obj)
            except errors.APIError as err:
                if err.reason != "AlreadyExists":
                    raise
            obj["metadata"]["name"] = _generated_name(obj["metadata"]["generateName"])
        return self.store.create(rt.group_resource, obj)

    # --- update and patch ------------------------------------------------------------------------

    def update(self, rt: ResourceType, namespace: str, name: str, body: Any, req: Request,
               subresource: str | None = None) -> Result:
        obj = self._check_body(rt, body)
        if rt.storage_version:
            stored = self.types.storage_of(rt)
            return self._converted(rt, self.update(stored, namespace, name, conversion.to_storage(rt, obj), req,
                                                   subresource))
        meta = _meta(obj)
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL "
                                     f"({name})")
        if rt.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
            raise errors.bad_request("the namespace of the provided object does not match the namespace sent on "
                                     "the request")
        return self._update(rt, namespace, name, lambda _old: copy_json(obj), req, subresource)

    def patch(self, rt: ResourceType, namespace: str, name: str, content_type: str, patch: Any, req: Request,
              subresource: str | None = None) -> Result:
        kind = content_type.split(";")[0].strip().lower()
        if kind == "application/json-patch+json":
            if not isinstance(patch, list):
                raise errors.bad_request("json patch must be a list of operations")
        elif kind in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            if not isinstance(patch, dict):
                raise errors.bad_request("the patch must be a JSON object")
            if kind.startswith("application/strategic") and rt.is_custom:
                raise errors.APIError(415, "UnsupportedMediaType", "the body of the request was in an unknown format "
                                      "- accepted media types include: application/json-patch+json, "
                                      "application/merge-patch+json, application/apply-patch+yaml")
        elif kind == "application/apply-patch+yaml":
            return self._server_side_apply(rt, namespace, name, patch, req, subresource)
        else:
            raise errors.unsupported_media_type(content_type)

        def patched(old: dict[str, Any]) -> dict[str, Any]:
            try:
                if kind == "application/json-patch+json":
                    result = apply_json_patch(old, patch)
                elif kind == "application/merge-patch+json":
                    result = json_merge_patch(old, patch)
                else:
                    result = strategic_merge_patch(old, patch, rt.kind)
            except PatchError as err:
                raise errors.APIError(422, "Invalid", f"the server rejected our request due to an error in our "
                                      f"request: {err}")
            if not isinstance(result, dict) or not isinstance(result.get("metadata"), dict):
                raise errors.APIError(422, "Invalid", "the patch produced an object without metadata")
            if result["metadata"].get("name", name) != name:
                raise errors.bad_request(f"the name of the object ({result['metadata'].get('name')}) does not match "
                                         f"the name on the URL ({name})")
            return result

        if rt.storage_version:  # the patch applies to the object as this version shows it
            stored = self.types.storage_of(rt)
            return self._converted(rt, self._update(
                stored, namespace, name,
                lambda old: conversion.to_storage(rt, patched(conversion.from_storage(rt, old))), req, subresource))
        return self._update(rt, namespace, name, patched, req, subresource)

    def update_with(self, rt: ResourceType, namespace: str, name: str,
                    make_new: Callable[[dict[str, Any]], dict[str, Any]], req: Request, subresource: str) -> Result:
        """An update computed from the stored object, for subresources (scale) that rewrite part of it."""
        if rt.storage_version:
            raise errors.method_not_allowed()
        return self._update(rt, namespace, name, make_new, req, subresource)

    def _server_side_apply(self, rt: ResourceType, namespace: str, name: str, config: Any, req: Request,
                           subresource: str | None) -> Result:
        """Apply a configuration (create it when absent); the rules live in `managed_fields`."""
        if not isinstance(config, dict):
            raise errors.bad_request("the applied configuration must be an object")
        if (config.get("metadata") or {}).get("managedFields") is not None:
            raise errors.bad_request("metadata.managedFields must be nil")
        config = self._check_body(rt, copy.deepcopy(config))
        if rt.storage_version:
            # Applied as the storage version, so fields are owned and conflict there; managedFields name it.
            stored = self.types.storage_of(rt)
            return self._converted(rt, self._server_side_apply(
                stored, namespace, name, conversion.to_storage(rt, config, partial=True), req, subresource))
        if config["metadata"].get("name") not in (None, name):
            raise errors.bad_request(f"the name of the object ({config['metadata']['name']}) does not match the "
                                     f"name on the URL ({name})")
        write = managed_fields.Write(req.manager, managed_fields.APPLY, config, req.force)
        req = replace(req, write=write)
        try:
            return self._update(rt, namespace, name,
                                lambda old: managed_fields.apply(rt, old, config, write, subresource), req, subresource)
        except errors.APIError as err:
            if err.code != 404 or subresource or self.store.get(rt.group_resource, (
                    namespace if rt.namespaced else "", name)) is not None:
                raise
        created = managed_fields.apply(rt, None, config, write, None)
        created["metadata"]["name"] = name
        return self.create(rt, namespace, created, req)

    def _record_managers(self, rt: ResourceType, old: dict[str, Any] | None, new: dict[str, Any], req: Request,
                         subresource: str | None) -> None:
        write = req.write or managed_fields.Write(req.manager)
        entries = managed_fields.record(rt, old, new, write, subresource, now_rfc3339())
        meta = dict(_meta(new))  # a copy: a status write shares the stored object's metadata
        if entries:
            meta["managedFields"] = entries
        else:
            meta.pop("managedFields", None)
        new["metadata"] = meta

    def _update(self, rt: ResourceType, namespace: str, name: str,
                make_new: Callable[[dict[str, Any]], dict[str, Any]], req: Request,
                subresource: str | None) -> Result:
        """`make_new(stored)` returns the object to store; `stored` is this call's own (the store decodes a copy
        for every read)."""
        gr = rt.group_resource
        key = (namespace if rt.namespaced else "", name)
        for _ in range(_MAX_UPDATE_RETRIES):
            old = self.store.get(gr, key)
            if old is None:
                raise errors.not_found(rt.group, rt.plural, name)
            new = make_new(old)
            if not isinstance(new, dict):
                raise errors.bad_request(f"the body of the request must be a JSON object describing a {rt.kind}")
            new["apiVersion"], new["kind"] = rt.api_version, rt.kind
            meta = new.setdefault("metadata", {})
            old_meta = _meta(old)
            wanted_rv = meta.get("resourceVersion")
            if wanted_rv and wanted_rv != old_meta["resourceVersion"]:
                raise errors.conflict(rt.group, rt.plural, name, "the object has been modified; please apply your "
                                      "changes to the latest version and try again")
            if meta.get("uid") and meta["uid"] != old_meta["uid"]:
                raise errors.conflict(rt.group, rt.plural, name, f"Precondition failed: UID in precondition: "
                                      f"{meta['uid']}, UID in object meta: {old_meta['uid']}")
            for system_key in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                               "generation", "resourceVersion"):
                if system_key in old_meta:
                    meta[system_key] = old_meta[system_key]
                else:
                    meta.pop(system_key, None)
            meta["name"] = name
            if rt.namespaced:
                meta["namespace"] = namespace
            else:
                meta.pop("namespace", None)
            meta.pop("managedFields", None)
            if old_meta.get("deletionTimestamp"):
                added = [f for f in meta.get("finalizers") or [] if f not in (old_meta.get("finalizers") or [])]
                if added:
                    raise errors.invalid(rt.group, rt.kind, name, [Cause(
                        "metadata.finalizers", f"Forbidden: no new finalizers can be added if the object is being "
                        f"deleted, found new finalizers {added!r}", "FieldValueForbidden")])
            if subresource is None:
                strategies.apply_defaults(rt.kind, new)
            new = self._admit_mutating("UPDATE", rt, subresource, namespace, name, new, old, req)
            new = strategies.prepare_for_update(rt.kind, new, old, rt.status_subresource, subresource)
            new = self._validate(rt, new)
            if strategies.spec_changed(old, new, rt.status_subresource):
                new["metadata"] = dict(_meta(new), generation=old_meta.get("generation", 1) + 1)
            self._record_managers(rt, old, new, req, subresource)
            if new == old:
                return Result(old)  # a no-op update writes nothing, as in kube-apiserver
            self._admit_validating("UPDATE", rt, subresource, namespace, name, new, old, req)
            if req.dry_run:
                return Result(new)
            try:
                if _meta(new).get("deletionTimestamp") and removable(new):
                    event = self.store.remove(gr, key, old_meta["resourceVersion"], final=new)
                else:
                    event = self.store.replace(gr, new, old_meta["resourceVersion"])
            except errors.APIError as err:
                if err.code == 409:
                    # Retry against the newer object, as kube-apiserver does: a client's resourceVersion
                    # precondition is checked again there, and a patch is applied again.
                    continue
                raise
            self._committed(rt, event)
            return Result(event.obj, event.raw)
        raise errors.conflict(rt.group, rt.plural, name, "too many concurrent updates; try again")

    # --- delete ----------------------------------------------------------------------------------

    def delete(self, rt: ResourceType, namespace: str, name: str, options: dict[str, Any] | None,
               req: Request) -> Result:
        options = options or {}
        if not isinstance(options, dict):
            raise errors.bad_request("DeleteOptions must be a JSON object")
        if rt.storage_version:
            return self._converted(rt, self.delete(self.types.storage_of(rt), namespace, name, options, req))
        gr = rt.group_resource
        key = (namespace if rt.namespaced else "", name)
        for _ in range(_MAX_UPDATE_RETRIES):
            old = self.store.get(gr, key)
            if old is None:
                raise errors.not_found(rt.group, rt.plural, name)
            old_meta = _meta(old)
            pre = options.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != old_meta["uid"]:
                raise errors.conflict(rt.group, rt.plural, name, f"Precondition failed: UID in precondition: "
                                      f"{pre['uid']}, UID in object meta: {old_meta['uid']}")
            if pre.get("resourceVersion") and pre["resourceVersion"] != old_meta["resourceVersion"]:
                raise errors.conflict(rt.group, rt.plural, name, "Precondition failed: ResourceVersion in "
                                      f"precondition: {pre['resourceVersion']}, ResourceVersion in object meta: "
                                      f"{old_meta['resourceVersion']}")
            policy = options.get("propagationPolicy")
            if policy is None and options.get("orphanDependents") is not None:
                policy = "Orphan" if options["orphanDependents"] else "Background"
            if policy not in (None, "Background", "Foreground", "Orphan"):
                raise errors.invalid("meta.k8s.io", "DeleteOptions", "", [Cause(
                    "propagationPolicy", f'Unsupported value: "{policy}": supported values: "Foreground", '
                    '"Background", "Orphan", "nil"', "FieldValueNotSupported")])
            self._admit_validating("DELETE", rt, None, namespace, name, None, old, req)
            finalizers = list(old_meta.get("finalizers") or [])
            if policy == "Orphan" and _ORPHAN not in finalizers:
                finalizers.append(_ORPHAN)
            elif policy == "Foreground" and _FOREGROUND not in finalizers:
                finalizers.append(_FOREGROUND)
            grace = options.get("gracePeriodSeconds")
            graceful_pod = (rt.kind == "Pod" and (old.get("spec") or {}).get("nodeName") and grace != 0)
            if rt.kind == "Namespace" or rt.kind == "CustomResourceDefinition":
                pending = True  # their content is cleaned up before they go
            else:
                pending = bool(finalizers) or bool(graceful_pod)
            if old_meta.get("deletionTimestamp"):
                if rt.kind == "Pod" and grace == 0 and not old_meta.get("finalizers"):
                    pending = False  # the kubelet confirming a graceful pod deletion
                else:
                    return Result(old)
            if req.dry_run:
                return Result(old)
            try:
                if pending:
                    new = copy.deepcopy(old)
                    meta = _meta(new)
                    meta["deletionTimestamp"] = now_rfc3339()
                    meta["deletionGracePeriodSeconds"] = (int(grace) if graceful_pod and grace is not None
                                                          else (30 if graceful_pod else 0))
                    meta["finalizers"] = finalizers
                    meta["generation"] = old_meta.get("generation", 1) + 1
                    if not meta["finalizers"]:
                        meta.pop("finalizers")
                    if rt.kind == "Namespace":
                        new["status"] = dict(new.get("status") or {}, phase="Terminating")
                    if rt.kind == "CustomResourceDefinition":
                        meta["finalizers"] = list(dict.fromkeys(
                            finalizers + ["customresourcecleanup.apiextensions.k8s.io"]))
                    event = self.store.replace(gr, new, old_meta["resourceVersion"])
                    self._committed(rt, event)
                    # kube-apiserver answers 202 only when the client explicitly asked for cascading deletion
                    accepted = options.get("orphanDependents") is False
                    return Result(event.obj, event.raw, 202 if accepted else 200)
                event = self.store.remove(gr, key, old_meta["resourceVersion"])
            except errors.APIError as err:
                if err.code == 409:
                    continue
                raise
            self._committed(rt, event)
            if rt.kind in strategies.RETURNS_DELETED_OBJECT or rt.is_custom:
                return Result(event.obj, event.raw)
            details = {"name": name, "kind": rt.plural, "uid": old_meta["uid"]}
            if rt.group:
                details["group"] = rt.group
            return Result(errors.success_status(details))
        raise errors.conflict(rt.group, rt.plural, name, "too many concurrent updates; try again")

    def delete_collection(self, rt: ResourceType, namespace: str | None, label_selector: str, field_selector: str,
                          options: dict[str, Any] | None, req: Request) -> dict[str, Any]:
        listed = self.list(rt, namespace, label_selector, field_selector)
        deleted = []
        for obj in listed.items:
            meta = obj["metadata"]
            try:
                result = self.delete(rt, meta.get("namespace") or "", meta["name"], options, req)
            except errors.APIError as err:
                if err.code == 404:
                    continue
                raise
            deleted.append(result.body if result.body.get("kind") == rt.kind else obj)
        return {"kind": f"{rt.kind}List", "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": str(self.store.current_rv())}, "items": deleted}

    # --- admission -------------------------------------------------------------------------------

    def _admit_mutating(self, op: str, rt: ResourceType, sub: str | None, namespace: str, name: str,
                        obj: dict[str, Any], old: dict[str, Any] | None, req: Request) -> dict[str, Any]:
        if not self.admission.active():
            return obj
        attrs = Attributes(op, rt, sub, namespace if rt.namespaced else "", name, obj, old, req.user, req.dry_run,
                           req.warnings, req.annotations)
        result = self.admission.mutate(attrs)
        if not isinstance(result, dict) or not isinstance(result.get("metadata"), dict):
            raise errors.internal("a mutating webhook produced an object without metadata")
        return result

    def _admit_validating(self, op: str, rt: ResourceType, sub: str | None, namespace: str, name: str,
                          obj: dict[str, Any] | None, old: dict[str, Any] | None, req: Request) -> None:
        if self.admission.active():
            attrs = Attributes(op, rt, sub, namespace if rt.namespaced else "", name, obj, old, req.user,
                               req.dry_run, req.warnings, req.annotations)
            if op == "DELETE":
                self.admission.mutate(attrs)
            self.admission.validate(attrs)

    def _committed(self, rt: ResourceType, event: Event) -> None:
        if self._on_commit is not None:
            self._on_commit(rt, event)


def _generated_name(prefix: str) -> str:
    return prefix + "".join(random.choice(_GENERATE_ALPHABET) for _ in range(5))
