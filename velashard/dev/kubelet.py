"""A local kubelet for `velashard dev`: runs the cluster's vela-core Deployments as local processes.

For each Deployment in the runtime namespace whose pod template is labelled
app.kubernetes.io/name=vela-core it keeps `replicas` Pod objects and one `velashard` process per
pod, started with the container's args. Pod status follows the process: Ready from its /readyz (NotReady
after the readiness probe's failureThreshold failures in a row, each allowed its timeoutSeconds, as the
kubelet counts them: one slow answer on a busy machine is not a failure), NotReady within two seconds of
its death, restarts with exponential backoff unless the pod's restartPolicy is Never. A changed pod template
rolls out as a Deployment's default RollingUpdate does (max surge 25% rounded up, max unavailable 25% rounded
down: a new pod first, an old one removed once the new is Ready); a pod deleted through the API (`kubectl
delete pod`) is terminated as a kubelet does: out of its Services at once, SIGTERM, SIGKILL after its grace
period, and the Deployment gets a new pod. A Service routes to every Ready pod it selects. A pod's Secret and
emptyDir volumes are directories in DIR/volumes/<pod>/ (velashard/dev/volumes.py), removed with the pod; the
container's args that name a path under a mount name the directory instead. Installing shards through the addon,
scaling them, upgrading the chart and killing a process behave as in a cluster.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
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
from velashard.dev.volumes import EmptyDirVolume, SecretVolume, Volume, local_args, pod_volumes

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
    template_hash: str = ""
    grace: float = 30.0  # terminationGracePeriodSeconds
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
    terminating: bool = False  # deleted, or replaced by a rollout: out of its Services, stopping
    volumes: list[Volume] = field(default_factory=list)
    volume_root: str = ""  # the pod's volumes' directories are in it; it goes with the pod


class LocalKubelet:
    def __init__(self, api: RestAPI, kubeconfig: str, namespace: str, log_dir: str, poll: float = 0.5,
                 credentials: Callable[[LocalPod], str] | None = None,
                 route_service: Callable[[str, list[str]], None] | None = None,
                 on_change: Callable[[list[dict[str, Any]]], None] | None = None):
        """`credentials(pod)`: the kubeconfig a pod's process uses (its ServiceAccount's token), else
        `kubeconfig` for all; `route_service(NS/NAME, [HOST:PORT, ...])`: keeps each Service that selects pods
        pointing at the webhook ports of its Ready pods' processes, else the master gets --webhook-url;
        `on_change(processes)`:
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
        self._lock = threading.Lock()  # self.pods: a terminated pod leaves it from its own thread
        self._next: dict[str, int] = {}  # the next pod number per Deployment and template
        self._routes: dict[str, list[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="local-kubelet", daemon=True)
        self._req = Request(user=dict(KUBELET_USER))
        types = api.types
        self._deployments = types.lookup("apps", "v1", "deployments")
        self._pods_rt = types.lookup("", "v1", "pods")
        self._volumes = os.path.join(os.path.dirname(log_dir), "volumes")

    def start(self) -> None:
        # Every pod of an earlier run is gone with that run's API server: its volumes go too, as a kubelet's
        # housekeeping removes those of orphaned pods.
        shutil.rmtree(self._volumes, ignore_errors=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=10)
        pods = self._pods()
        for pod in pods:  # all at once, then wait for each
            if pod.process is not None and pod.process.poll() is None:
                pod.process.terminate()
        for pod in pods:
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

    def _pods(self) -> list[LocalPod]:
        with self._lock:
            return list(self.pods.values())

    def sync(self) -> None:
        assert self._deployments is not None
        deployments = [d for d in self.api.store.list(self._deployments.group_resource, self.namespace)[0]
                       if is_vela_core(d) and not d["metadata"].get("deletionTimestamp")]
        objects = {p["metadata"]["name"]: p for p in self.api.store.list(("", "pods"), self.namespace)[0]}
        names = {d["metadata"]["name"] for d in deployments}
        for pod in self._pods():
            obj = objects.get(pod.name)
            if not pod.terminating and (obj is None or obj["metadata"].get("deletionTimestamp")
                                        or pod.deployment not in names):
                self._terminate(pod)  # deleted through the API, or its Deployment is gone
        for dep in deployments:
            self._claim(dep)
            self._roll(dep)
        for pod in self._pods():
            if not pod.terminating:
                self._supervise(pod)
        self._route_services()
        for dep in deployments:
            self._deployment_status(dep)

    def _roll(self, dep: dict[str, Any]) -> None:
        """`replicas` pods of the current template: new ones first, up to the surge; old ones removed while as
        many stay Ready as max unavailable allows (not-Ready ones at once)."""
        name, template = dep["metadata"]["name"], _template_hash(dep)
        replicas = (dep.get("spec") or {}).get("replicas", 1)
        surge, unavailable = math.ceil(replicas * 0.25), math.floor(replicas * 0.25)
        surge = surge or (0 if unavailable else 1)
        mine = [p for p in self._pods() if p.deployment == name and not p.terminating]
        new = sorted((p for p in mine if p.template_hash == template), key=lambda p: p.name)
        old = [p for p in mine if p.template_hash != template]
        while len(new) > replicas:  # scaled down: the not-Ready first, then the newest
            victim = min(new, key=lambda p: (bool(p.ready), -int(p.name.rsplit("-", 1)[1])))
            new.remove(victim)
            self._terminate(victim)
        while len(new) < replicas and len(new) + len(old) < replicas + surge:
            pod = self._create(self._next_name(name, template), dep, template)
            with self._lock:
                self.pods[pod.name] = pod
            new.append(pod)
        ready = sum(1 for p in new + old if p.ready)
        for pod in sorted(old, key=lambda p: bool(p.ready)):
            if pod.ready:
                if ready - 1 < replicas - unavailable:
                    break
                ready -= 1
            self._terminate(pod)

    def _next_name(self, deployment: str, template: str) -> str:
        key = f"{deployment}-{template}"
        number = self._next.get(key, 0)
        self._next[key] = number + 1
        return f"{key}-{number}"

    def _claim(self, dep: dict[str, Any]) -> None:
        """Mark the Deployment as ours so that the workload simulator leaves its status alone."""
        annotations = dep["metadata"].get("annotations") or {}
        if annotations.get(UNMANAGED_ANNOTATION) != "false":
            self.api.patch(self._deployments, self.namespace, dep["metadata"]["name"],
                           "application/merge-patch+json",
                           {"metadata": {"annotations": {UNMANAGED_ANNOTATION: "false"}}}, self._req)

    def _create(self, name: str, dep: dict[str, Any], template_hash: str) -> LocalPod:
        template = dep["spec"]["template"]
        container = (template.get("spec") or {}).get("containers", [{}])[0]
        restart = (template.get("spec") or {}).get("restartPolicy", "Always")
        pod_labels = dict((template.get("metadata") or {}).get("labels") or {})
        probe = container.get("readinessProbe") or {}
        pod = LocalPod(name, dep["metadata"]["name"], list(container.get("args") or []), restart,
                       template_hash=template_hash,
                       grace=float((template.get("spec") or {}).get("terminationGracePeriodSeconds", 30)),
                       service_account=(template.get("spec") or {}).get("serviceAccountName") or "default",
                       labels=pod_labels, log_path=os.path.join(self.log_dir, f"{name}.log"),
                       probe_timeout=float(probe.get("timeoutSeconds") or 1),
                       failure_threshold=int(probe.get("failureThreshold") or 3),
                       volumes=pod_volumes(template.get("spec") or {}, container, os.path.join(self._volumes, name)),
                       volume_root=os.path.join(self._volumes, name))
        for volume in pod.volumes:
            if isinstance(volume, EmptyDirVolume):
                volume.create()
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
        args = [a for a in local_args(pod.args, pod.volumes)
                if not a.startswith(("--kubeconfig", "--metrics-addr", "--health-addr", "--webhook-port",
                                     "--webhook-bind-address", "--webhook-url", "--namespace"))]
        kubeconfig = self.credentials(pod) if self.credentials is not None else self.kubeconfig
        # A pod's process is local: everything it serves listens on loopback, whatever the chart asks of a pod.
        args += ["--kubeconfig", kubeconfig, "--namespace", self.namespace,
                 "--metrics-addr", f"127.0.0.1:{pod.metrics_port}", "--health-addr", f"127.0.0.1:{pod.health_port}",
                 "--webhook-port", str(pod.webhook_port), "--webhook-bind-address", "127.0.0.1"]
        is_master = any(a == "--shard-id=master" for a in args) or "--shard-id" not in " ".join(args)
        if is_master and self.route_service is None:
            args += ["--webhook-url", f"https://127.0.0.1:{pod.webhook_port}"]  # identity: from a SelfSubjectReview
        return [sys.executable, "-m", "velashard.cli.main", *args]

    def _route_services(self) -> None:
        """Point each Service with a webhook port at every Ready, not terminating pod it selects, as Endpoints
        would."""
        if self.route_service is None:
            return
        pods = [p for p in self._pods() if p.ready and not p.terminating]
        for svc in self.api.store.list(("", "services"), self.namespace)[0]:
            selector = (svc.get("spec") or {}).get("selector") or {}
            if not selector or not any(p.get("targetPort") == "webhook" or p.get("name") == "webhook"
                                       for p in (svc.get("spec") or {}).get("ports") or []):
                continue
            ref = f'{self.namespace}/{svc["metadata"]["name"]}'
            endpoints = sorted(f"127.0.0.1:{p.webhook_port}" for p in pods
                               if all(p.labels.get(k) == v for k, v in selector.items()))
            if self._routes.get(ref) != endpoints:
                self.route_service(ref, endpoints)
                self._routes[ref] = endpoints

    def _terminate(self, pod: LocalPod) -> None:
        """As a kubelet stops a pod: out of its Services first, then SIGTERM, SIGKILL after its grace period,
        then the Pod object goes (in a thread of its own: the other pods are not held up meanwhile)."""
        pod.terminating, pod.ready = True, False
        self._route_services()
        log.info("pod terminating", extra={"fields": {"pod": pod.name}})
        threading.Thread(target=self._finish, args=(pod,), name=f"terminate-{pod.name}", daemon=True).start()

    def _finish(self, pod: LocalPod) -> None:
        self._kill(pod)
        try:
            self.api.delete(self._pods_rt, self.namespace, pod.name, {"gracePeriodSeconds": 0}, self._req)
        except errors.APIError as err:
            if err.code != 404:
                log.warning("deleting a terminated pod failed: %s", err.message)
        if pod.volume_root:
            shutil.rmtree(pod.volume_root, ignore_errors=True)  # its emptyDirs, and its Secrets' copies
        with self._lock:
            self.pods.pop(pod.name, None)

    def _volumes_ready(self, pod: LocalPod) -> bool:
        """Project the pod's Secret volumes (again when a Secret changed, as a kubelet's periodic sync does);
        whether all are there (a pod whose Secret does not exist yet waits to start)."""
        ready = True
        for volume in pod.volumes:
            if isinstance(volume, SecretVolume):
                secret = self.api.store.get(("", "secrets"), (self.namespace, volume.secret))
                ready = volume.sync(secret) and ready
        return ready

    def _supervise(self, pod: LocalPod) -> None:
        now = time.monotonic()
        if not self._volumes_ready(pod):
            return
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
                pod.process.wait(min(pod.grace, 30.0))
            except subprocess.TimeoutExpired:
                pod.process.kill()
                pod.process.wait()

    def _deployment_status(self, dep: dict[str, Any]) -> None:
        mine = [p for p in self._pods() if p.deployment == dep["metadata"]["name"] and not p.terminating]
        ready = sum(1 for p in mine if p.ready)
        replicas = (dep.get("spec") or {}).get("replicas", 1)
        updated = sum(1 for p in mine if p.template_hash == _template_hash(dep))
        status = {"observedGeneration": dep["metadata"].get("generation", 1), "replicas": len(mine),
                  "updatedReplicas": updated, "readyReplicas": ready, "availableReplicas": ready,
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
                 "restarts": p.restarts, "log": p.log_path, **({"terminating": True} if p.terminating else {})}
                for p in self._pods()]


def _template_hash(dep: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(dep["spec"].get("template"), sort_keys=True).encode()).hexdigest()[:8]
