"""Small helpers shared by the integration tests."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import time
import uuid
from typing import Any, Callable, Iterator

import pytest
from cryptography import x509

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from velashard.apiserver.http.server import APIServer
from velashard.core.controller import ApplicationController, Options
from velashard.core.install import install
from velashard.core.runcontroller import run_controller
from velashard.kube.client import KubeClient
from velashard.kube.manager import Manager
from velashard.kube.resources import NAMESPACES, Resource
from velashard.webhook.paths import MUTATING_PATH
from tests.workflowsteps import install_missing


def eventually(check: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05) -> Any:
    """Poll `check` until it returns a truthy value; fail with the last value or error after `timeout`."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except (ApiException, AssertionError, KeyError) as err:
            last = err
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s; last: {last!r}")


# Words someone might try as a bearer token; no server velashard starts accepts any of them.
GUESSABLE_TOKENS = ("admin", "Admin", "administrator", "alice", "password", "token", "secret", "root", "default",
                    "kubernetes", "velashard", "system:masters", "changeme", "12345678", "admin-token-for-tests")


def token_codes(url: str, tokens: tuple[str, ...] = GUESSABLE_TOKENS) -> dict[str, int]:
    """The status code of listing every Secret at `url` (plain HTTP) with each bearer token."""
    import urllib.error
    import urllib.request

    codes = {}
    for token in tokens:
        req = urllib.request.Request(f"{url}/api/v1/secrets", headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                codes[token] = resp.status
        except urllib.error.HTTPError as err:
            codes[token] = err.code
    return codes


def status_of(err: ApiException) -> dict[str, Any]:
    """The Kubernetes Status object carried by an API error."""
    return json.loads(err.body)


def raw_request(api_client: Any, method: str, path: str, body: bytes | str | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """Send a request the typed client cannot express (malformed bodies, odd verbs); returns (code, JSON)."""
    import urllib.error
    import urllib.request

    config = api_client.configuration
    data = body.encode() if isinstance(body, str) else body
    req = urllib.request.Request(config.host + path, data=data, method=method)
    req.add_header("Authorization", config.api_key.get("authorization") or config.api_key.get("BearerToken") or "")
    req.add_header("Content-Type", "application/json")
    for key, value in (headers or {}).items():
        req.add_header(key, value)
    import ssl
    context = ssl.create_default_context(cafile=config.ssl_ca_cert) if config.ssl_ca_cert else None
    try:
        with urllib.request.urlopen(req, timeout=30, context=context) as resp:
            payload = resp.read()
            code = resp.status
    except urllib.error.HTTPError as err:
        payload, code = err.read(), err.code
    try:
        return code, json.loads(payload)
    except ValueError:
        return code, payload.decode(errors="replace")


def deployment(name: str, replicas: int = 1, image: str = "nginx:1.25") -> client.V1Deployment:
    """A minimal Deployment with one container."""
    labels = {"app": name}
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1DeploymentSpec(
            replicas=replicas, selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(containers=[client.V1Container(name="main", image=image)]))))


def update_latest(kube: Any, res: Any, name: str, namespace: str | None, change: Callable[[dict], None],
                  attempts: int = 10) -> dict:
    """Read, change and write an object, again on a 409: a controller writing the object's status in between
    moves its resourceVersion, and a stale write is refused (as kubectl edit would retry)."""
    from velashard.kube import errors

    for _ in range(attempts - 1):
        obj = kube.get(res, name, namespace)
        change(obj)
        try:
            return kube.update(res, obj)
        except errors.Conflict:
            time.sleep(0.05)
    obj = kube.get(res, name, namespace)
    change(obj)
    return kube.update(res, obj)


def trust_authorless_apps(kube: Any, *users: str) -> None:
    """Apps that tests write straight to the API server carry no recorded author (no webhook records one), so
    the controller acts for them as the default user: bind it (and any `users`, e.g. the admin whose apps a
    master's webhook records) to cluster-admin, as a platform that trusts such apps would. (The tenant-isolation
    tests bind nothing of the kind.)"""
    from velashard.kube import errors
    from velashard.kube.resources import Resource

    bindings = Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding",
                        namespaced=False)
    for user in ("kubevela:vela-core", *users):
        try:
            kube.create(bindings, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                                   "metadata": {"name": f"tests-trust-{user.replace(':', '-')}"},
                                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                               "name": "cluster-admin"},
                                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                                 "name": user}]})
        except errors.AlreadyExists:
            pass


# The tests' author: what an app or a run records as its writer (labels.APP_USERNAME) and then acts as. Its rules
# hold in the namespace "authored" only; in "elsewhere" it may do nothing.
AUTHOR = "jane@example.com"
CONFIGMAP_RULES = ({"apiGroups": [""], "resources": ["configmaps"],
                    "verbs": ["get", "list", "create", "update", "patch", "delete"]},)
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")


def controller_cluster(tmp_path_factory: pytest.TempPathFactory, *, workflow_runs: bool = False,
                       trust_authorless: bool = True, author_rules: tuple[dict, ...] = (),
                       **options: Any) -> Iterator[tuple[APIServer, KubeClient]]:
    """A module's cluster: the embedded API server with simulated workloads, velashard installed with the workflow
    steps the catalog lacks, and a master's Manager running the Application controller (and, with `workflow_runs`,
    the WorkflowRun controller beside it) on a thread; yields (server, client) and stops both after.
    `trust_authorless`: the default user may do anything (trust_authorless_apps). `author_rules`: a Role of them
    bound to AUTHOR in the namespace "authored" (created with "elsewhere", where AUTHOR may do nothing).
    `options`: the controllers' Options beyond the tests' defaults (4 workers, state-keep every second, waiting
    steps looked at twice a second). A module-scoped fixture is `yield from controller_cluster(tmp_path_factory)`."""
    server = APIServer(port=0, simulate_workloads=True).start()
    server.write_kubeconfig(str(tmp_path_factory.mktemp("cluster") / "kubeconfig"))
    kube = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test", qps=500, burst=500)
    if trust_authorless:
        trust_authorless_apps(kube)
    install(kube)
    install_missing(kube)
    if author_rules:
        for name in ("authored", "elsewhere"):
            kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        kube.create(ROLES, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                            "metadata": {"name": "author"}, "rules": list(author_rules)}, "authored")
        kube.create(ROLE_BINDINGS, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                                    "metadata": {"name": "author"}, "subjects": [{"kind": "User", "name": AUTHOR}],
                                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                "name": "author"}}, "authored")
    manager = Manager(kube, "master")
    settings = Options(**{"workers": 4, "state_keep_interval": 1.0, "waiting_requeue": 0.5, **options})
    apps = ApplicationController(manager, settings)
    if workflow_runs:
        assert run_controller(manager, apps, settings) is not None, "WorkflowRuns are not served"
    stop = threading.Event()
    thread = threading.Thread(target=manager.run, args=(stop,), daemon=True)
    thread.start()
    yield server, kube
    stop.set()
    thread.join(15)
    server.stop()


def namespace_for_test(kube: KubeClient, request: pytest.FixtureRequest, prefix: str) -> str:
    """A namespace of its own for the test asking (`prefix` and the test's name), created."""
    name = prefix + request.node.name.replace("_", "-")[5:40].strip("-")
    kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def admission_review() -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "operation": "CREATE", "namespace": "team-a", "name": "a",
        "kind": {"group": "core.oam.dev", "version": "v1beta1", "kind": "Application"},
        "userInfo": {"username": "alice"},
        "object": {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
                   "metadata": {"name": "a", "namespace": "team-a"}, "spec": {"components": []}}}}).encode()


class AdmissionCaller:
    """Admission calls back to back, each on a new connection (the handshake is where a certificate is read),
    verified against the CA: what failed, and the serials of the certificates served."""

    def __init__(self, port: int, ca_pem: bytes):
        self.port, self.failures, self.serials = port, [], []
        self.context = ssl.create_default_context(cadata=ca_pem.decode())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "AdmissionCaller":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=10)
            try:
                conn.request("POST", MUTATING_PATH, admission_review(), {"Content-Type": "application/json"})
                response = conn.getresponse()
                answer = json.loads(response.read())
                if response.status != 200 or not answer["response"]["allowed"]:
                    self.failures.append(f"HTTP {response.status}: {answer}")
                der = conn.sock.getpeercert(binary_form=True)
                self.serials.append(x509.load_der_x509_certificate(der).serial_number)
            except (OSError, ValueError, KeyError) as err:
                self.failures.append(repr(err))
            finally:
                conn.close()


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def serial(pem: bytes) -> int:
    return x509.load_pem_x509_certificate(pem).serial_number
