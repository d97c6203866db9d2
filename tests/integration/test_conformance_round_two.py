"""What real clients' own tests expect of kube-apiserver (issue 16): kept-alive connections stay in sync
after errors, DELETE answers kind by kind, error details, nodes, simulated pods, the scale subresource."""

from __future__ import annotations

import http.client
import json

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.helpers import eventually, status_of


def _conn(apiserver) -> http.client.HTTPConnection:
    return http.client.HTTPConnection(apiserver.host, apiserver.port, timeout=10)


def _headers() -> dict[str, str]:
    return {"Authorization": "Bearer admin", "Content-Type": "application/json"}


@pytest.mark.parametrize("method,path", [
    ("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews"),  # a group the server does not serve
    ("POST", "/api/v1/namespaces/default/nosuchthings"),
    ("PUT", "/api/v1/namespaces/default/configmaps/absent/nosub"),
    ("POST", "/api/v1/namespaces/default/configmaps/x"),  # POST on an object: method not allowed
])
def test_error_with_body_keeps_connection_in_sync(apiserver, method, path):
    conn = _conn(apiserver)
    try:
        body = json.dumps({"apiVersion": "v1", "kind": "Whatever", "spec": {"pad": "x" * 5000}})
        conn.request(method, path, body=body, headers=_headers())
        first = conn.getresponse()
        assert first.status in (404, 405)
        assert json.loads(first.read())["kind"] == "Status"
        conn.request("GET", "/api/v1/namespaces/default", headers=_headers())
        second = conn.getresponse()
        assert second.status == 200
        assert json.loads(second.read())["metadata"]["name"] == "default"
    finally:
        conn.close()


def test_oversized_body_answers_413_then_closes(apiserver):
    conn = _conn(apiserver)
    try:
        conn.putrequest("POST", "/api/v1/namespaces/default/configmaps")
        for k, v in _headers().items():
            conn.putheader(k, v)
        conn.putheader("Content-Length", str(10 * 1024 * 1024))
        conn.endheaders()
        answer = conn.getresponse()
        assert answer.status == 413
        assert answer.getheader("Connection", "").lower() == "close"
    finally:
        conn.close()
