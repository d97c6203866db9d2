"""A local kubelet for `velashard dev`: runs the cluster's vela-core Deployments as local processes.

For each Deployment in the runtime namespace whose pod template is labelled
app.kubernetes.io/name=vela-core it keeps `replicas` Pod objects and one `velashard` process per
pod, started with the container's args. Pod status follows the process: Ready from its /readyz (NotReady
after the readiness probe's failureThreshold failures in a row, each allowed its timeoutSeconds, as the
kubelet counts them: one slow answer on a busy machine is not a failure), NotReady within two seconds of
its death, restarts with exponential backoff unless the pod's restartPolicy is Never. Installing shards through the addon, scaling them and killing one behave
as in a cluster.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable

from velashard.apis import labels
from velashard.apiserver import errors
from velashard.apiserver.registry.rest import Request, RestAPI
from velashard.apiserver.simulation.workloads import UNMANAGED_ANNOTATION
from velashard.apiserver.storage.store import now_rfc3339

log = logging.getLogger("velashard.dev.kubelet")

NODE_NAME = "local"
KUBELET_USER = {"username": "system:node:local", "uid": "", "groups": ["system:nodes"]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def is_vela_core(deployment: dict[str, Any]) -> bool:
    template = ((deployment.get("spec") or {}).get("template") or {}).get("metadata") or {}
    return (template.get("labels") or {}).get(labels.POD_NAME_LABEL) == labels.POD_NAME_VALUE


def readiness(ready: bool | None, failures: int, probe_ok: bool, failure_threshold: int) -> tuple[bool, int]:
    """(Ready, failed probes in a row) after one probe, as the kubelet decides it: Ready once a probe succeeds;
    a Ready pod turns NotReady only after `failure_threshold` failures in a row; a pod never Ready stays NotReady."""
    if probe_ok:
        return True, 0
    failures += 1
    return ready is True and failures < failure_threshold, failures


@dataclass
class LocalPod:
    name: str
    deployment: str
    args: list[str]
    restart_policy: str
    service_account: str = "default"
    labels: dict[str, str] = field(default_factory=dict)
    metrics_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    webhook_port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None
    restarts: int = 0
    next_start: float = 0.0
    ready: bool | None = None
    state: dict | None = None  # the container state last reported
    log_path: str = ""
    probe_timeout: float = 1.0  # the readiness probe's timeoutSeconds
    failure_threshold: int = 3  # its failureThreshold
    probe_failures: int = 0  # failed probes in a row


class LocalKubelet:
    def __init__(self, api: RestAPI, kubeconfig: str, namespace: str, log_dir: str, poll: float = 0.5,
                 credentials: Callable[[LocalPod], str] | None = None,
                 route_service: Callable[[str, str | None], None] | None = None,
                 on_change: Callable[[list[dict[str, Any]]], None] | None = None):
        """`credentials(pod)`: the kubeconfig a pod's process uses (its ServiceAccount's token), else
        `kubeconfig` for all; `route_service(NS/NAME, HOST:PORT or None)`: keeps the Services that select a
        pod pointing at its process's webhook port, else the master gets --webhook-url; `on_change(processes)`:
        called from the kubelet's thread with `processes()` whenever a process starts, stops, restarts or
        changes readiness."""
        self.api = api
        self.on_change = on_change
        self._reported: list[dict[str, Any]] | None = None
        self.kubeconfig = kubeconfig
        self.credentials = credentials
        self.route_service = route_service
        self.namespace = namespace
        self.log_dir = log_dir
        self.poll = poll
        self.pods: dict[str, LocalPod] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="local-kubelet", daemon=True)
        self._req = Request(user=dict(KUBELET_USER))
        types = api.types
        self._deployments = types.lookup("apps", "v1", "deployments")
        self._pods_rt = types.lookup("", "v1", "pods")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=10)
        for pod in list(self.pods.values()):
            self._kill(pod)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync()
            except errors.APIError as err:
                log.warning("kubelet sync failed: %s", err.message)
            self._report()
            self._stop.wait(self.poll)

    def _report(self) -> None:
        if self.on_change is None:
            return
        current = self.processes()
        if current == self._reported:
            return
        try:
            self.on_change(current)
        except OSError as err:  # e.g. the file it writes: tried again on the next sync, pods stay supervised
            log.warning("reporting the processes failed: %s", err)
            return
        self._reported = current

    # --- convergence -----------------------------------------------------------------------------

    def sync(self) -> None:
        assert self._deployments is not None
        deployments = [d for d in self.api.store.list(self._deployments.group_resource, self.namespace)[0]
                       if is_vela_core(d) and not d["metadata"].get("deletionTimestamp")]
        wanted: dict[str, tuple[dict[str, Any], int]] = {}
        for dep in deployments:
            self._claim(dep)
            replicas = (dep.get("spec") or {}).get("replicas", 1)
            for i in range(replicas):
                wanted[f'{dep["metadata"]["name"]}-{_template_hash(dep)}-{i}'] = (dep, i)
        for name in [n for n in self.pods if n not in wanted]:
            self._remove(self.pods.pop(name))
        for name, (dep, _) in wanted.items():
            pod = self.pods.get(name)
            if pod is None:
                pod = self._create(name, dep)
                self.pods[name] = pod
            self._supervise(pod)
        for dep in deployments:
            self._deployment_status(dep)

    def _claim(self, dep: dict[str, Any]) -> None:
        """Mark the Deployment as ours so that the workload simulator leaves its status alone."""
        annotations = dep["metadata"].get("annotations") or {}
        if annotations.get(UNMANAGED_ANNOTATION) != "false":
            self.api.patch(self._deployments, self.namespace, dep["metadata"]["name"],
                           "application/merge-patch+json",
                           {"metadata": {"annotations": {UNMANAGED_ANNOTATION: "false"}}}, self._req)

    def _create(self, name: str, dep: dict[str, Any]) -> LocalPod:
        template = dep["spec"]["template"]
        container = (template.get("spec") or {}).get("containers", [{}])[0]
        restart = (template.get("spec") or {}).get("restartPolicy", "Always")
        pod_labels = dict((template.get("metadata") or {}).get("labels") or {})
        probe = container.get("readinessProbe") or {}
        pod = LocalPod(name, dep["metadata"]["name"], list(container.get("args") or []), restart,
                       service_account=(template.get("spec") or {}).get("serviceAccountName") or "default",
                       labels=pod_labels, log_path=os.path.join(self.log_dir, f"{name}.log"),
                       probe_timeout=float(probe.get("timeoutSeconds") or 1),
                       failure_threshold=int(probe.get("failureThreshold") or 3))
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name, "namespace": self.namespace, "labels": dict(pod_labels),
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": dep["metadata"]["name"],
                                 "uid": dep["metadata"]["uid"], "controller": True}]},
            "spec": dict(template.get("spec") or {}, nodeName=NODE_NAME)}
        try:
            self.api.create(self._pods_rt, self.namespace, body, self._req)
        except errors.APIError as err:
            if err.code != 409:
                raise
        return pod

    def command(self, pod: LocalPod) -> list[str]:
        args = [a for a in pod.args if not a.startswith(("--kubeconfig", "--metrics-addr", "--health-addr",
                                                           "--webhook-port", "--webhook-bind-address", "--webhook-url",
                                                           "--namespace"))]
        kubeconfig = self.credentials(pod) if self.credentials is not None else self.kubeconfig
        # A pod's process is local: everything it serves listens on loopback, whatever the chart asks of a pod.
        args += ["--kubeconfig", kubeconfig, "--namespace", self.namespace,
                 "--metrics-addr", f"127.0.0.1:{pod.metrics_port}", "--health-addr", f"127.0.0.1:{pod.health_port}",
                 "--webhook-port", str(pod.webhook_port), "--webhook-bind-address", "127.0.0.1"]
        is_master = any(a == "--shard-id=master" for a in args) or "--shard-id" not in " ".join(args)
        if is_master and self.route_service is None:
            args += ["--webhook-url", f"https://127.0.0.1:{pod.webhook_port}"]  # identity: from a SelfSubjectReview
        return [sys.executable, "-m", "velashard.cli.main", *args]

    def _route(self, pod: LocalPod, ready: bool) -> None:
        """Point the Services selecting this pod at its process (their webhook port), as Endpoints would."""
        if self.route_service is None:
            return
        services = self.api.store.list(("", "services"), self.namespace)[0]
        for svc in services:
            selector = (svc.get("spec") or {}).get("selector") or {}
            if not selector or any(pod.labels.get(k) != v for k, v in selector.items()):
                continue
            if any(p.get("targetPort") == "webhook" or p.get("name") == "webhook"
                   for p in (svc.get("spec") or {}).get("ports") or []):
                self.route_service(f'{self.namespace}/{svc["metadata"]["name"]}',
                                   f"127.0.0.1:{pod.webhook_port}" if ready else None)

    def _supervise(self, pod: LocalPod) -> None:
        now = time.monotonic()
        running = pod.process is not None and pod.process.poll() is None
        if not running:
            if pod.process is not None:
                code = pod.process.returncode
                pod.process = None
                pod.restarts += 1
                # CrashLoopBackOff as the kubelet does it (10 s doubling), shortened to 5 s doubling for dev
                pod.next_start = now + min(5 * 2 ** min(pod.restarts - 1, 4), 60)
                log.warning("pod process exited", extra={"fields": {"pod": pod.name, "code": code}})
                self._status(pod, ready=False, phase="Running", exit_code=code)
            if pod.restart_policy == "Never" and pod.restarts:
                return
            if now >= pod.next_start:
                with open(pod.log_path, "ab") as out:
                    pod.process = subprocess.Popen(self.command(pod), stdout=out, stderr=subprocess.STDOUT,
                                                   env=dict(os.environ, POD_NAMESPACE=self.namespace,
                                                            POD_NAME=pod.name))
                pod.ready, pod.probe_failures = None, 0
            return
        self._status(pod, ready=self._readiness(pod), phase="Running")

    def _readiness(self, pod: LocalPod) -> bool:
        ready, pod.probe_failures = readiness(pod.ready, pod.probe_failures, self._probe(pod), pod.failure_threshold)
        return ready

    def _probe(self, pod: LocalPod) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{pod.health_port}/readyz",
                                        timeout=pod.probe_timeout) as resp:
                return resp.status == 200
        except OSError:
            return False

    def _status(self, pod: LocalPod, ready: bool, phase: str, exit_code: int | None = None) -> None:
        """Readiness from the probe; the container's state from the process, as the kubelet reports it (so a
        dead process reads as terminated, not merely NotReady)."""
        state = {"running": {}} if exit_code is None else {"terminated": {"exitCode": exit_code}}
        if pod.ready is ready and pod.state == state:
            return
        pod.ready, pod.state = ready, state
        self._route(pod, ready)
        now = now_rfc3339()
        status = {"phase": phase, "hostIP": "127.0.0.1", "podIP": "127.0.0.1",
                  "conditions": [{"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": now},
                                 {"type": "ContainersReady", "status": "True" if ready else "False",
                                  "lastTransitionTime": now}],
                  "containerStatuses": [{"name": "vela-core", "ready": ready, "restartCount": pod.restarts,
                                         "image": "velashard:dev", "started": pod.process is not None,
                                         "state": state}]}
        try:
            self.api.patch(self._pods_rt, self.namespace, pod.name, "application/merge-patch+json",
                           {"status": status}, self._req, subresource="status")
        except errors.APIError as err:
            if err.code != 404:
                raise

    def _kill(self, pod: LocalPod) -> None:
        if pod.process is not None and pod.process.poll() is None:
            pod.process.terminate()
            try:
                pod.process.wait(12)
            except subprocess.TimeoutExpired:
                pod.process.kill()

    def _remove(self, pod: LocalPod) -> None:
        self._kill(pod)
        try:
            self.api.delete(self._pods_rt, self.namespace, pod.name, {"gracePeriodSeconds": 0}, self._req)
        except errors.APIError as err:
            if err.code != 404:
                raise

    def _deployment_status(self, dep: dict[str, Any]) -> None:
        mine = [p for p in self.pods.values() if p.deployment == dep["metadata"]["name"]]
        ready = sum(1 for p in mine if p.ready)
        replicas = (dep.get("spec") or {}).get("replicas", 1)
        status = {"observedGeneration": dep["metadata"].get("generation", 1), "replicas": len(mine),
                  "updatedReplicas": len(mine), "readyReplicas": ready, "availableReplicas": ready,
                  "conditions": [{"type": "Available", "status": "True" if ready >= replicas else "False",
                                  "reason": "MinimumReplicasAvailable" if ready >= replicas
                                  else "MinimumReplicasUnavailable"}]}
        current = dep.get("status") or {}
        if all(current.get(k) == v for k, v in status.items() if k != "conditions") and \
                (current.get("conditions") or [{}])[0].get("status") == status["conditions"][0]["status"]:
            return
        try:
            self.api.patch(self._deployments, self.namespace, dep["metadata"]["name"], "application/merge-patch+json",
                           {"status": status}, self._req, subresource="status")
        except errors.APIError as err:
            if err.code != 404:
                raise

    def processes(self) -> list[dict[str, Any]]:
        return [{"name": p.name, "pid": p.process.pid if p.process else None, "metricsPort": p.metrics_port,
                 "healthPort": p.health_port, "webhookPort": p.webhook_port, "ready": bool(p.ready),
                 "restarts": p.restarts, "log": p.log_path} for p in self.pods.values()]


def _template_hash(dep: dict[str, Any]) -> str:
    import json
    return hashlib.sha256(json.dumps(dep["spec"].get("template"), sort_keys=True).encode()).hexdigest()[:8]
