"""`--simulate-workloads`: give Deployments, StatefulSets, DaemonSets and Jobs the status a kubelet and the
workload controllers would give them shortly after each change, in the spirit of KWOK."""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections import deque
from typing import Any

from velashard.apiserver import errors
from velashard.apiserver.controllers import deployments
from velashard.apiserver.registry.rest import Request, RestAPI
from velashard.apiserver.simulation import objectstatus, pods
from velashard.apiserver.simulation.nodes import NodeHeartbeat, node_ip
from velashard.apiserver.storage.resources import Registry, ResourceType
from velashard.apiserver.storage.store import SUBSCRIBER_BATCH_SECONDS, Event, now_rfc3339

log = logging.getLogger("velashard.apiserver.simulation.workloads")

SIMULATED = {("apps", "deployments"), ("apps", "statefulsets"), ("apps", "daemonsets"), ("batch", "jobs"),
             ("apps", "replicasets"), ("", "replicationcontrollers"), *objectstatus.SIMULATED}
_PODS = ("", "pods")
_HPAS = ("autoscaling", "horizontalpodautoscalers")
# Objects written at once, as kube-controller-manager syncs several Deployments and ReplicaSets at once
# (--concurrent-deployment-syncs): one thread got too small a share of the API server's time under load and fell
# tens of seconds behind the writes it answers.
WORKERS = 4
Key = tuple[tuple[str, str], str, str]


def hpa_status(hpa: dict[str, Any], current: int, now: str) -> dict[str, Any]:
    """With no metrics to act on, the autoscaler keeps the target's replicas within [minReplicas, maxReplicas]."""
    spec = hpa.get("spec") or {}
    desired = min(max(current, spec.get("minReplicas", 1)), spec.get("maxReplicas", current))
    status = {"observedGeneration": hpa["metadata"].get("generation", 1), "currentReplicas": current,
              "desiredReplicas": desired,
              "conditions": [{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale",
                              "message": "recommended size matches current size", "lastTransitionTime": now},
                             {"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound",
                              "message": "the HPA was able to compute the replica count", "lastTransitionTime": now}]}
    if desired != current:
        status["lastScaleTime"] = now
    return status
# Workloads carrying this annotation are run by something else (the dev command's local kubelet).
UNMANAGED_ANNOTATION = "devcluster.velashard.io/simulate"


def simulated_status(kind: str, obj: dict[str, Any], now: str, nodes: int = 1) -> dict[str, Any] | None:
    """The status the controllers would converge `obj` to, or None when nothing is to be done.

    `nodes` is how many nodes a DaemonSet runs on."""
    if kind not in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController", "Job"):
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
        return {"observedGeneration": generation, "currentNumberScheduled": nodes, "desiredNumberScheduled": nodes,
                "numberAvailable": nodes, "numberReady": nodes, "updatedNumberScheduled": nodes,
                "numberMisscheduled": 0}
    replicas = spec.get("replicas", 1)
    if kind in ("ReplicaSet", "ReplicationController"):
        counts = {"fullyLabeledReplicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas}
        return {"observedGeneration": generation, "replicas": replicas, **{k: v for k, v in counts.items() if v}}
    counts = {"updatedReplicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas}
    # replicas is required in StatefulSet status; Deployment status omits zero counts as its controller does
    result: dict[str, Any] = {"observedGeneration": generation, **{k: v for k, v in counts.items() if v}}
    if replicas or kind == "StatefulSet":
        result["replicas"] = replicas
    if kind == "Deployment" and spec.get("paused"):
        result["conditions"] = [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
             "message": "Deployment has minimum availability.", "lastUpdateTime": now, "lastTransitionTime": now},
            {"type": "Progressing", "status": "Unknown", "reason": "DeploymentPaused",
             "message": "Deployment is paused", "lastUpdateTime": now, "lastTransitionTime": now}]
        result.pop("updatedReplicas", None)
    elif kind == "Deployment":
        result["conditions"] = [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
             "message": "Deployment has minimum availability.", "lastUpdateTime": now, "lastTransitionTime": now},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
             "message": f'ReplicaSet "{deployments.replicaset_name(obj)}" '
                        'has successfully progressed.', "lastUpdateTime": now,
             "lastTransitionTime": now}]
    else:
        result["currentReplicas"] = replicas
        result["currentRevision"] = result["updateRevision"] = f'{meta["name"]}-{generation}'
        result["collisionCount"] = 0
    return result


class WorkloadSimulator:
    """Writes what the workload controllers, the scheduler and the kubelets of `nodes` would write."""

    def __init__(self, api: RestAPI, types: Registry, delay: float = 0.2, nodes: NodeHeartbeat | None = None):
        self._api = api
        self._types = types
        self._delay = delay
        self._nodes = nodes
        self._node_names = frozenset(nodes.names()) if nodes is not None else frozenset()
        self._pod_ips: dict[str, int] = {}
        # Each simulated node's pods, kept from the events (and from this scheduler's own writes, at once):
        # scheduling reads the load for every pod, and counting it over all pods made that quadratic.
        self._pod_nodes: dict[tuple[str, str], str] = {}
        self._node_load: dict[str, int] = {}
        self._sub = api.store.subscribe()
        self._stop = threading.Event()
        # Bookkeeping shared by the thread that reads events and the workers that write (never held while writing).
        self._lock = threading.Lock()
        self._due: list[tuple[float, tuple[str, str], str, str]] = []
        # Keys in _due: a later event of an object already due is covered by that run, which reads the object then.
        self._pending: set[Key] = set()
        # resourceVersions of this simulator's own writes that leave nothing more to do (a status, a Deployment's
        # revision annotation on the way to its status), by object: their events would only wake a run that finds
        # nothing to write (two of a new Deployment's three runs).
        self._settled: dict[Key, set[int]] = {}
        self._ready: deque[Key] = deque()  # due, for the next free worker
        self._work = threading.Condition(self._lock)
        self._busy: set[Key] = set()  # in a worker's hands: one run per object at a time
        self._again: set[Key] = set()  # came due while busy: run once more after
        # Events of a busy object wait for its run to end, which by then knows which of them are its own writes.
        self._held: dict[Key, list[Event]] = {}
        self._req = Request(user={"username": "system:serviceaccount:kube-system:workload-simulator", "uid": "",
                                  "groups": ["system:serviceaccounts"]})
        self._threads = [threading.Thread(target=self._run, name="apiserver-workloads", daemon=True)] + [
            threading.Thread(target=self._work_loop, name=f"apiserver-workloads-{i}", daemon=True)
            for i in range(WORKERS)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._sub.close()
        with self._work:
            self._work.notify_all()
        for thread in self._threads:
            thread.join(timeout=5)

    def _run(self) -> None:
        """Reads every event and hands each object to a worker once its delay is up."""
        while not self._stop.is_set():
            with self._lock:
                wait = 0.05 if self._busy else 0.5  # a run that ends may have queued its object again
                if self._due:
                    wait = max(0.0, min(wait, self._due[0][0] - time.monotonic()))
            events = self._sub.take(timeout=wait)
            with self._lock:
                for event in events:
                    if event.gr == _PODS:
                        meta = event.obj["metadata"]
                        self._place((meta.get("namespace") or "", meta["name"]), None if event.type == "DELETED"
                                    else (event.obj.get("spec") or {}).get("nodeName"))
                    self._observe(event)
            if events:
                self._stop.wait(SUBSCRIBER_BATCH_SECONDS)  # woken once per batch (its writes wait 0.2 s anyway)
            with self._lock:
                while self._due and self._due[0][0] <= time.monotonic():
                    _, gr, namespace, name = heapq.heappop(self._due)
                    key = (gr, namespace, name)
                    self._pending.discard(key)
                    if key in self._busy:
                        self._again.add(key)
                    else:
                        self._busy.add(key)
                        self._ready.append(key)
                        self._work.notify()

    def _work_loop(self) -> None:
        while True:
            with self._work:
                while not self._ready and not self._stop.is_set():
                    self._work.wait()
                if self._stop.is_set():
                    return
                key = self._ready.popleft()
            try:
                self._converge(*key)
            except errors.APIError as err:
                if err.code not in (404, 409):  # gone or changed meanwhile: a newer event is queued
                    log.warning("simulated write failed gr=%s key=%s/%s err=%s", key[0], key[1], key[2],
                                err.message)
            except Exception:  # a bug here must not stop the other objects' simulation
                log.exception("simulated write failed gr=%s key=%s/%s", *key)
            with self._lock:
                self._busy.discard(key)
                for event in self._held.pop(key, ()):
                    self._observe(event)
                if key in self._again:
                    self._again.discard(key)
                    self._busy.add(key)
                    self._ready.append(key)
                    self._work.notify()

    def _observe(self, event: Event) -> None:
        """Queue the object if the event asks for a run (under the lock)."""
        meta = event.obj["metadata"]
        key = (event.gr, meta.get("namespace") or "", meta["name"])
        if key in self._busy:
            self._held.setdefault(key, []).append(event)
            return
        if event.type == "DELETED":
            self._settled.pop(key, None)
            return
        settled = self._settled.pop(key, None)
        if settled is not None:
            later = {rv for rv in settled if rv > event.rv}  # events come in order: older ones will not
            if later:
                self._settled[key] = later
            if event.rv in settled:
                return
        if key in self._pending:
            return
        if event.gr == _PODS:
            due = pods.pod_action(event.obj, self._node_names) is not None
        elif event.gr == _HPAS:
            due = (event.obj.get("status") or {}).get("observedGeneration") != meta.get("generation")
        elif event.gr in SIMULATED:
            if (meta.get("annotations") or {}).get(UNMANAGED_ANNOTATION) == "false":
                return
            # any Deployment change may concern its ReplicaSets (annotations such as change-cause too)
            due = (event.gr == ("apps", "deployments")
                   or simulated_status(event.obj["kind"], event.obj, "", self._node_count()) is not None)
        else:
            return
        if due:
            self._pending.add(key)
            heapq.heappush(self._due, (time.monotonic() + self._delay, *key))

    def _place(self, pod: tuple[str, str], node: str | None) -> None:
        """Count `pod` on `node` (None: on no node), under the lock."""
        before = self._pod_nodes.pop(pod, None)
        if before is not None:
            self._node_load[before] -= 1
        if node in self._node_names:
            self._pod_nodes[pod] = node  # type: ignore[assignment]
            self._node_load[node] = self._node_load.get(node, 0) + 1  # type: ignore[index]

    def _wrote_settled(self, gr: tuple[str, str], stored: dict[str, Any]) -> None:
        """Remember a write of ours whose event asks for nothing more."""
        meta = stored["metadata"]
        with self._lock:
            self._settled.setdefault((gr, meta.get("namespace") or "", meta["name"]), set()).add(
                int(meta["resourceVersion"]))

    def _node_count(self) -> int:
        return max(len(self._node_names), 1)

    def _converge(self, gr: tuple[str, str], namespace: str, name: str) -> None:
        rt = self._types.for_group_resource(*gr)
        obj = self._api.store.get(gr, (namespace, name))
        if rt is None or obj is None:
            return
        if gr == _PODS:
            self._converge_pod(rt, obj)
            return
        if gr == _HPAS:
            self._converge_hpa(rt, obj)
            return
        if obj["metadata"].get("deletionTimestamp"):
            return
        if rt.kind == "Deployment":
            obj = self._sync_replicasets(rt, obj)
        status = simulated_status(rt.kind, obj, now_rfc3339(), self._node_count())
        if status is None:
            return
        result = self._api.update(rt, namespace, name, dict(obj, status=status), self._req, subresource="status")
        self._wrote_settled(gr, result.body)

    def _converge_hpa(self, rt: ResourceType, hpa: dict[str, Any]) -> None:
        ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
        group = (ref.get("apiVersion") or "").rpartition("/")[0]
        target_rt = next((t for t in self._types.all() if t.group == group and t.kind == ref.get("kind")), None)
        meta = hpa["metadata"]
        target = (self._api.store.get(target_rt.group_resource, (meta["namespace"], ref.get("name", "")))
                  if target_rt is not None else None)
        if target_rt is None or target is None:
            return  # as the HPA controller, wait for the target to exist
        current = (target.get("spec") or {}).get("replicas", 1)
        status = hpa_status(hpa, current, now_rfc3339())
        if status["desiredReplicas"] != current:
            self._api.patch(target_rt, meta["namespace"], ref["name"], "application/merge-patch+json",
                            {"spec": {"replicas": status["desiredReplicas"]}}, self._req)
        self._api.update(rt, meta["namespace"], meta["name"], dict(hpa, status=status), self._req,
                         subresource="status")

    def _sync_replicasets(self, rt: ResourceType, deploy: dict[str, Any]) -> dict[str, Any]:
        """Write the ReplicaSets of the Deployment's revisions; answers the Deployment as stored after."""
        rs_rt = self._types.lookup("apps", "v1", "replicasets")
        assert rs_rt is not None
        meta = deploy["metadata"]
        namespace = meta["namespace"]
        # Through the store's owner index: listing the namespace's ReplicaSets made every Deployment change
        # cost as much as the namespace holds.
        owned = sorted((rs for gr, rs in self._api.store.dependents_of(meta["uid"])
                        if gr == rs_rt.group_resource and any(ref.get("controller") and ref.get("uid") == meta["uid"]
                                                              for ref in rs["metadata"].get("ownerReferences") or [])),
                       key=lambda rs: rs["metadata"]["name"])
        todo = deployments.plan(deploy, owned)
        for rs in todo.create:
            self._api.create(rs_rt, namespace, rs, self._req)
        for rs in todo.update:
            self._api.update(rs_rt, namespace, rs["metadata"]["name"], rs, self._req)
        for name in todo.delete:
            self._api.delete(rs_rt, namespace, name, {}, self._req)
        if (meta.get("annotations") or {}).get(deployments.REVISION) != todo.deployment_revision:
            result = self._api.patch(rt, namespace, meta["name"], "application/merge-patch+json", {"metadata": {
                "annotations": {deployments.REVISION: todo.deployment_revision}}}, self._req)
            self._wrote_settled(rt.group_resource, result.body)  # this run goes on to its status
            return result.body
        return deploy

    def _converge_pod(self, rt: ResourceType, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        action = pods.pod_action(pod, self._node_names)
        now = now_rfc3339()
        if action == pods.REMOVE:  # the kubelet confirms the graceful deletion once containers stopped
            self._api.delete(rt, namespace, name, {"gracePeriodSeconds": 0}, self._req)
        elif action == pods.SCHEDULE:
            nodes = self._simulated_nodes()
            node = pods.choose_node(pod, nodes, self._load())
            if node is None:
                self._api.update(rt, namespace, name, dict(pod, status=pods.unschedulable_status(
                    pod, len(nodes), now)), self._req, subresource="status")
                return
            self._api.update(rt, namespace, name, dict(pod, spec=dict(pod.get("spec") or {}, nodeName=node)),
                             self._req)
            with self._lock:  # the next pod's choice sees this one before its event comes
                self._place((namespace, name), node)
        elif action == pods.RUN:
            node = pod["spec"]["nodeName"]
            index = int(node.rsplit("-", 1)[1])
            with self._lock:
                self._pod_ips[node] = serial = self._pod_ips.get(node, 1) + 1
            status = pods.running_status(pod, node_ip(index), f"10.244.{index}.{serial % 250 + 2}", now)
            self._api.update(rt, namespace, name, dict(pod, status=status), self._req, subresource="status")

    def _simulated_nodes(self) -> list[dict[str, Any]]:
        nodes_rt = self._types.lookup("", "v1", "nodes")
        assert nodes_rt is not None
        found = [self._api.store.get(nodes_rt.group_resource, ("", n)) for n in sorted(self._node_names)]
        return [n for n in found if n is not None]

    def _load(self) -> dict[str, int]:
        with self._lock:
            return dict(self._node_load)
