"""Shared fixtures: an embedded API server in process, and clients for it."""

from __future__ import annotations

import os
from typing import Any, Callable, Iterator

import pytest
from kubernetes import client, config

from velashard.apiserver.http.server import APIServer


@pytest.fixture(scope="session")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[APIServer]:
    """One in-process API server shared by the session (tests use their own namespaces)."""
    server = APIServer(port=0, simulate_workloads=True, bookmark_interval=1.0).start()
    server.write_kubeconfig(str(tmp_path_factory.mktemp("kube") / "kubeconfig"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def api_client(apiserver: APIServer) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(config_file=apiserver.kubeconfig)
    yield api
    api.close()


@pytest.fixture
def make_apiserver(tmp_path: Any) -> Iterator[Callable[..., APIServer]]:
    """A private server per call (e.g. a tiny watch history); stopped after the test."""
    servers: list[APIServer] = []

    def make(**kwargs: Any) -> APIServer:
        server = APIServer(port=0, **kwargs).start()
        server.write_kubeconfig(str(tmp_path / f"kubeconfig-{len(servers)}"))
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def namespace(api_client: client.ApiClient, request: pytest.FixtureRequest) -> str:
    """A fresh namespace named after the test."""
    name = "t-" + "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:50].strip("-")
    name = name + "-" + os.urandom(2).hex()
    client.CoreV1Api(api_client).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--chaos-long", action="store_true",
                     help="run the long chaos scenario (1,000 apps, 5 minutes of failures) instead of the short one")
    parser.addoption("--fence-repeat", type=int, default=int(os.environ.get("VELASHARD_FENCE_REPEAT", "1")),
                     help="how many times the fencing e2e tests pause and partition a shard (default 1; "
                          "$VELASHARD_FENCE_REPEAT)")
