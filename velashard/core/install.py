"""Installing velashard's CRDs and built-in definitions into a cluster, idempotently."""

from __future__ import annotations

import time
from typing import Callable, Sequence

from velashard.apis.oam import CRDS, DEFINITION_RESOURCES, SYSTEM_NAMESPACE
from velashard.core.builtins import builtin_definitions
from velashard.kube import errors
from velashard.kube.apply import upsert
from velashard.kube.client import KubeClient
from velashard.kube.resources import ADMISSION_POLICIES, ADMISSION_POLICY_BINDINGS, NAMESPACES
from velashard.kube.resources import CRDS as CRD_RESOURCE
from velashard.sharding.guard import guard_objects


def _established(crd: dict) -> bool:
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (crd.get("status") or {}).get("conditions") or [])


def install(client: KubeClient, report: Callable[[str], None] = lambda _line: None, timeout: float = 60.0,
            shard_guard_users: Sequence[str] | None = None, shard_guard_groups: Sequence[str] = (),
            definitions: bool = True) -> None:
    """CRDs first (waiting until they are served), then vela-system and the built-in definitions; with
    `shard_guard_users` (sharding: the controller's identity and shard admins) also the shard-label guard; without
    `definitions`, the built-in definitions are left to the chart."""
    for crd in CRDS:
        report(f'customresourcedefinition/{crd["metadata"]["name"]} {upsert(client, CRD_RESOURCE, crd)}')
    deadline = time.monotonic() + timeout
    for crd in CRDS:
        while not _established(client.get(CRD_RESOURCE, crd["metadata"]["name"])):
            if time.monotonic() > deadline:
                raise errors.ServerError(504, "Timeout", f'CRD {crd["metadata"]["name"]} was not established '
                                                         f"within {timeout:.0f}s")
            time.sleep(0.1)
    report(f"namespace/{SYSTEM_NAMESPACE} " + upsert(client, NAMESPACES, {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}}))
    for definition in builtin_definitions() if definitions else []:
        res = DEFINITION_RESOURCES[definition["kind"]]
        report(f'{definition["kind"].lower()}/{definition["metadata"]["name"]} {upsert(client, res, definition)}')
    if shard_guard_users is not None:
        install_shard_guard(client, shard_guard_users, shard_guard_groups, report)


def install_shard_guard(client: KubeClient, users: Sequence[str], groups: Sequence[str] = (),
                        report: Callable[[str], None] = lambda _line: None) -> None:
    """The ValidatingAdmissionPolicy and binding that keep users from choosing or changing an app's shard."""
    policy, binding = guard_objects(users, groups)
    report(f'validatingadmissionpolicy/{policy["metadata"]["name"]} {upsert(client, ADMISSION_POLICIES, policy)}')
    report(f'validatingadmissionpolicybinding/{binding["metadata"]["name"]} '
           f'{upsert(client, ADMISSION_POLICY_BINDINGS, binding)}')
