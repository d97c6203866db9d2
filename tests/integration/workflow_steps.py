"""What the built-in workflow step tests share: a cluster (the embedded API server with simulated workloads, the
catalog installed, the Application controller running) and small builders of applications and their status."""

from __future__ import annotations

import threading
from typing import Any, Iterator

import pytest

from velashard.apis.oam import APPLICATIONS
from velashard.apiserver.http.server import APIServer
from velashard.cli.main import main
from velashard.core.controller import ApplicationController, Options
from velashard.workflow.egress import EgressPolicy, parse_allowed
from velashard.core.install import install
from velashard.kube.client import KubeClient
from velashard.kube.manager import Manager
from velashard.kube.resources import NAMESPACES
from tests.integration.helpers import eventually, trust_authorless_apps


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[APIServer]:
    api = APIServer(port=0, simulate_workloads=True).start()
    api.write_kubeconfig(str(tmp_path_factory.mktemp("steps") / "kubeconfig"))
    yield api
    api.stop()


@pytest.fixture(scope="module")
def kube(server: APIServer) -> Iterator[KubeClient]:
    client = KubeClient.from_kubeconfig(server.kubeconfig, shard_id="test", qps=500, burst=500)
    install(client)
    trust_authorless_apps(client)  # the apps here are written without a recorded author
    manager = Manager(client, "master")
    # the steps call servers on loopback, which the egress policy refuses unless allowed
    ApplicationController(manager, Options(workers=4, state_keep_interval=1.0, waiting_requeue=0.5,
                                           egress=EgressPolicy(allow=(parse_allowed("127.0.0.1"),))))
    stop = threading.Event()
    thread = threading.Thread(target=manager.run, args=(stop,), daemon=True)
    thread.start()
    yield client
    stop.set()
    thread.join(15)


@pytest.fixture
def ns(kube: KubeClient, request: pytest.FixtureRequest) -> str:
    name = "wf-" + request.node.name.replace("_", "-")[5:45].strip("-")
    kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def step(name: str, type_: str, **fields: Any) -> dict[str, Any]:
    """A workflow step; `properties=...`, `inputs=...`, `outputs=...`, `if_=...`, `timeout=...` as given."""
    body = {"name": name, "type": type_}
    body.update({("if" if k == "if_" else k): v for k, v in fields.items()})
    return body


def run_app(kube: KubeClient, ns: str, name: str, steps: list[dict[str, Any]],
            components: list[dict[str, Any]] | None = None, **spec: Any) -> None:
    kube.create(APPLICATIONS, {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application",
                               "metadata": {"name": name, "namespace": ns},
                               "spec": {"components": components or [], "workflow": {"steps": steps}, **spec}})


def status(kube: KubeClient, ns: str, name: str) -> dict[str, Any]:
    return kube.get(APPLICATIONS, name, ns).get("status") or {}


def steps_by_name(app_status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = {}
    for s in (app_status.get("workflow") or {}).get("steps") or []:
        found[s["name"]] = s
        found.update({sub["name"]: sub for sub in s.get("subSteps") or []})
    return found


def finished(kube: KubeClient, ns: str, name: str, timeout: float = 30.0) -> dict[str, dict[str, Any]]:
    """The steps once the workflow has finished."""
    def done() -> dict[str, Any] | None:
        s = status(kube, ns, name)
        return s if (s.get("workflow") or {}).get("finished") else None
    return steps_by_name(eventually(done, timeout=timeout))


def phase_of(kube: KubeClient, ns: str, name: str, step_name: str, phase: str,
             timeout: float = 30.0) -> dict[str, Any]:
    """A step once it is in `phase`."""
    return eventually(lambda: (lambda s: s if s and s.get("phase") == phase else None)(
        steps_by_name(status(kube, ns, name)).get(step_name)), timeout=timeout)


def resume(server: APIServer, ns: str, name: str) -> None:
    """What a person approving does: `velashard resume`."""
    assert main(["--kubeconfig", server.kubeconfig, "resume", name, "-n", ns]) == 0


def webservice(name: str = "web", image: str = "nginx:1.25", **properties: Any) -> dict[str, Any]:
    return {"name": name, "type": "webservice", "properties": {"image": image, **properties}}
