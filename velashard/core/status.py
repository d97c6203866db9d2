"""An Application's status assembled from plain data: the workflow's steps, each component's health, the
conditions and the phase. Pure; `now` is an argument."""

from __future__ import annotations

from typing import Any

from velashard.core.rendered import RenderedComponent
from velashard.core.tracker import Ref

Health = dict[str, tuple[bool, str]]  # component name -> (healthy, message)
TraitHealth = dict[tuple[str, str], tuple[bool, str]]  # (component, trait type) -> (healthy, message)
SETTLED_PHASES = ("running", "workflowSuspending", "workflowFailed", "workflowTerminated")


def condition(ctype: str, ok: bool, reason: str, message: str, now: str) -> dict[str, Any]:
    return {"type": ctype, "status": "True" if ok else "False", "reason": reason, "message": message,
            "lastTransitionTime": now}


def services(components: list[RenderedComponent], health: Health, traits: TraitHealth,
             namespace: str) -> list[dict[str, Any]]:
    """status.services[] in KubeVela's shape: one entry per component, with its traits' health."""
    return [service(c, namespace, health[c.name], traits) for c in components]


def service(c: RenderedComponent, namespace: str, health: tuple[bool, str], traits: TraitHealth) -> dict[str, Any]:
    """One component where it was deployed, with its traits' health."""
    trait_status = []
    for t in c.traits:
        ok, message = traits.get((c.name, t), (True, ""))
        trait_status.append({"type": t, "healthy": ok, **({"message": message} if message else {})})
    return {"name": c.name, "namespace": namespace, "cluster": "local", "healthy": health[0], "message": health[1],
            "workloadDefinition": {"apiVersion": c.workload.get("apiVersion", ""), "kind": c.workload.get("kind", "")},
            "traits": trait_status}


def applied_resources(refs: list[Ref]) -> list[dict[str, Any]]:
    """status.appliedResources[] in KubeVela's shape (creator: workflow)."""
    return [{"creator": "workflow", **{k: v for k, v in ref.items() if k not in ("component", "trait", "run", "replicaKey")}}
            for ref in refs]


def policy_status(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """status.policy[]: the policies this revision runs with."""
    return [{"name": p.get("name", ""), "type": p.get("type", "")} for p in spec.get("policies") or []]


def workflow_conditions(workflow: dict[str, Any], health: Health, now: str) -> list[dict[str, Any]]:
    """WorkflowFinished (why not, when not) and Healthy (naming each unhealthy component)."""
    all_healthy = all(h for h, _ in health.values())
    failed = any(s.get("phase") == "failed" for s in workflow.get("steps") or [])
    reason = "Failed" if failed else "Suspended" if workflow.get("suspend") else \
        "Finished" if workflow.get("finished") else "Running"
    # a workflow with steps keeps its message empty, as KubeVela's does: the failed step's says what happened
    message = workflow.get("message") or next((f'{s.get("name")}: {s.get("message", "")}'
                                               for s in workflow.get("steps") or [] if s.get("phase") == "failed"), "")
    return [condition("WorkflowFinished", bool(workflow.get("finished")) and not failed, reason, message, now),
            condition("Healthy", all_healthy, "Healthy" if all_healthy else "Unhealthy",
                      "; ".join(f"{n}: {m}" for n, (h, m) in sorted(health.items()) if not h), now)]


def with_phase(previous: dict[str, Any], status: dict[str, Any], phase: str, generation: int | None,
               conditions: list[dict[str, Any]]) -> dict[str, Any]:
    """`status` completed with the phase, the generation it describes and the conditions; a condition whose
    value did not change keeps its transition time from `previous` (the status as stored)."""
    before = {c["type"]: c for c in previous.get("conditions") or []}
    carried = []
    for cond in conditions:
        old = before.get(cond["type"])
        if old and old.get("status") == cond["status"]:
            cond = dict(cond, lastTransitionTime=old.get("lastTransitionTime", cond["lastTransitionTime"]))
        carried.append(cond)
    return dict(status, status=phase, observedGeneration=generation, conditions=carried)
