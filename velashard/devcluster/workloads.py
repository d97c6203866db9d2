"""`--simulate-workloads`: give Deployments, StatefulSets, DaemonSets and Jobs the status a kubelet and the
workload controllers would give them shortly after each change, in the spirit of KWOK."""

from __future__ import annotations

import heapq
import logging
import threading
import time
from typing import Any

from velashard.devcluster import errors, objectstatus
from velashard.devcluster.resources import Registry
from velashard.devcluster.rest import Request, RestAPI
from velashard.devcluster.store import Event, now_rfc3339

log = logging.getLogger("velashard.devcluster.workloads")

SIMULATED = {("apps", "deployments"), ("apps", "statefulsets"), ("apps", "daemonsets"), ("batch", "jobs"),
             *objectstatus.SIMULATED}
# Workloads carrying this annotation are run by something else (the dev command's local kubelet).
UNMANAGED_ANNOTATION = "devcluster.velashard.io/simulate"


def simulated_status(kind: str, obj: dict[str, Any], now: str) -> dict[str, Any] | None:
    """The status the controllers would converge `obj` to, or None when nothing is to be done."""
    if kind not in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
        return objectstatus.object_status(kind, obj, now)
    spec = obj.get("spec") or {}
    meta = obj["metadata"]
    generation = meta.get("generation", 1)
    status = dict(obj.get("status") or {})
    if kind == "Job":
        if spec.get("suspend") or status.get("completionTime"):
            return None
        completions = spec.get("completions") or 1
        return {**status, "startTime": status.get("startTime", now), "completionTime": now,
                "succeeded": completions, "active": 0, "ready": 0, "terminating": 0,
                "conditions": [{"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                                "message": "Reached expected number of succeeded pods",
                                "lastProbeTime": now, "lastTransitionTime": now},
                               {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                                "message": "Reached expected number of succeeded pods",
                                "lastProbeTime": now, "lastTransitionTime": now}]}
    if status.get("observedGeneration") == generation:
        return None
    if kind == "DaemonSet":
        return {"observedGeneration": generation, "currentNumberScheduled": 1, "desiredNumberScheduled": 1,
                "numberAvailable": 1, "numberReady": 1, "updatedNumberScheduled": 1, "numberMisscheduled": 0}
    replicas = spec.get("replicas", 1)
    counts = {"replicas": replicas, "updatedReplicas": replicas, "readyReplicas": replicas,
              "availableReplicas": replicas}
    result: dict[str, Any] = {"observedGeneration": generation, **{k: v for k, v in counts.items() if v}}
    if kind == "Deployment":
        result["conditions"] = [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
             "message": "Deployment has minimum availability.", "lastUpdateTime": now, "lastTransitionTime": now},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
             "message": f'ReplicaSet "{meta["name"]}" has successfully progressed.', "lastUpdateTime": now,
             "lastTransitionTime": now}]
    else:
        result["currentReplicas"] = replicas
        result["currentRevision"] = result["updateRevision"] = f'{meta["name"]}-{generation}'
        result["collisionCount"] = 0
    return result


class WorkloadSimulator:
    def __init__(self, api: RestAPI, types: Registry, delay: float = 0.2):
        self._api = api
        self._types = types
        self._delay = delay
        self._sub = api.store.subscribe()
        self._stop = threading.Event()
        self._due: list[tuple[float, tuple[str, str], str, str]] = []
        self._req = Request(user={"username": "system:serviceaccount:kube-system:workload-simulator", "uid": "",
                                  "groups": ["system:serviceaccounts"]})
        self._thread = threading.Thread(target=self._run, name="devcluster-workloads", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._sub.close()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            wait = 0.5
            if self._due:
                wait = max(0.0, min(wait, self._due[0][0] - time.monotonic()))
            event = self._sub.get(timeout=wait)
            if event is not None:
                self._observe(event)
            while self._due and self._due[0][0] <= time.monotonic():
                _, gr, namespace, name = heapq.heappop(self._due)
                self._converge(gr, namespace, name)

    def _observe(self, event: Event) -> None:
        if event.type == "DELETED" or event.gr not in SIMULATED:
            return
        meta = event.obj["metadata"]
        if (meta.get("annotations") or {}).get(UNMANAGED_ANNOTATION) == "false":
            return
        if simulated_status(event.obj["kind"], event.obj, "") is not None:
            heapq.heappush(self._due, (time.monotonic() + self._delay, event.gr, meta.get("namespace") or "",
                                       meta["name"]))

    def _converge(self, gr: tuple[str, str], namespace: str, name: str) -> None:
        rt = self._types.for_group_resource(*gr)
        obj = self._api.store.get(gr, (namespace, name))
        if rt is None or obj is None or obj["metadata"].get("deletionTimestamp"):
            return
        status = simulated_status(rt.kind, obj, now_rfc3339())
        if status is None:
            return
        body = dict(obj, status=status)
        try:
            self._api.update(rt, namespace, name, body, self._req, subresource="status")
        except errors.APIError as err:
            if err.code == 409:  # changed meanwhile: the newer version is already queued
                return
            log.warning("simulated status write failed kind=%s key=%s/%s err=%s", rt.kind, namespace, name,
                        err.message)
