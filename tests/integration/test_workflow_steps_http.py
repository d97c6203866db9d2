"""The built-in workflow steps that talk to servers outside the cluster (notification, webhook, request,
check-metrics), against real HTTP and SMTP servers on the loopback interface (hack/loopback.py)."""

from __future__ import annotations

import json
from typing import Any, Iterator

import pytest

from hack.loopback import HTTPRecorder, SMTPRecorder
from velashard.kube.resources import CONFIGMAPS, SECRETS
from tests.integration.helpers import eventually
from tests.integration.workflow_steps import finished, kube, ns, run_app, server, step  # noqa: F401


def answer(method: str, path: str, body: bytes) -> tuple[int, Any]:
    if path.startswith("/missing"):
        return 404, {"message": "no such thing"}
    if path.startswith("/repo"):
        return 200, {"name": "velashard", "stargazers_count": 42}
    if path.startswith("/text"):
        return 200, b"plain words"
    if path.startswith("/api/v1/query"):  # Prometheus: one sample, 0.99
        return 200, {"status": "success", "data": {"resultType": "vector",
                                                   "result": [{"metric": {}, "value": [0, "0.99"]}]}}
    return 200, {"ok": True}


@pytest.fixture(scope="module")
def http() -> Iterator[HTTPRecorder]:
    with HTTPRecorder(answer) as server:
        yield server


@pytest.fixture(scope="module")
def smtp() -> Iterator[SMTPRecorder]:
    with SMTPRecorder() as server:
        yield server


def secret(kube, ns: str, name: str, data: dict[str, str]) -> None:
    kube.create(SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns},
                          "stringData": data})


def test_notification_to_chats_and_by_email(kube, ns, http, smtp):
    secret(kube, ns, "hooks", {"ding": http.url(f"/{ns}/ding")})
    secret(kube, ns, "mail", {"password": "from-a-secret"})
    run_app(kube, ns, "notify", [
        step("chat", "notification", properties={
            "slack": {"url": {"value": http.url(f"/{ns}/slack")}, "message": {"text": "deployed"}},
            "dingding": {"url": {"secretRef": {"name": "hooks", "key": "ding"}},
                         "message": {"text": {"content": "deployed"}}},
            "lark": {"url": {"value": http.url(f"/{ns}/lark")},
                     "message": {"msg_type": "text", "content": json.dumps({"text": "deployed"})}}}),
        step("mail", "notification", properties={"email": {
            "from": {"address": "vela@example.com", "alias": "Vela", "host": "127.0.0.1", "port": smtp.port,
                     "password": {"secretRef": {"name": "mail", "key": "password"}}},
            "to": ["team@example.com"], "content": {"subject": "release", "body": "it is out"}}})])
    steps = finished(kube, ns, "notify")
    assert steps["chat"]["phase"] == "succeeded" and steps["mail"]["phase"] == "succeeded", steps
    (slack,) = http.to(f"/{ns}/slack")
    assert slack.method == "POST" and slack.headers["Content-Type"] == "application/json"
    assert slack.json() == {"text": "deployed"}
    assert http.to(f"/{ns}/ding")[0].json() == {"msgtype": "text", "text": {"content": "deployed"}}
    assert http.to(f"/{ns}/lark")[0].json() == {"msg_type": "text", "content": '{"text": "deployed"}'}
    (mail,) = [m for m in smtp.messages if "release" in m.data]
    assert mail.password == "from-a-secret" and mail.recipients == ["team@example.com"]
    assert "it is out" in mail.data


def test_notification_with_a_missing_secret_key_fails(kube, ns, http):
    secret(kube, ns, "hooks", {"other": "x"})
    run_app(kube, ns, "nokey", [step("chat", "notification", properties={
        "slack": {"url": {"secretRef": {"name": "hooks", "key": "slack"}}, "message": {"text": "x"}}})])
    steps = finished(kube, ns, "nokey")
    assert steps["chat"]["phase"] == "failed" and "key slack" in steps["chat"]["message"]


def test_webhook_sends_the_app_or_the_data(kube, ns, http):
    secret(kube, ns, "hook", {"url": http.url(f"/{ns}/from-secret")})
    run_app(kube, ns, "hooked", [
        step("whole-app", "webhook", properties={"url": {"value": http.url(f"/{ns}/app")}}),
        step("data", "webhook", properties={"url": {"secretRef": {"name": "hook", "key": "url"}},
                                            "data": {"release": "v2"}})])
    steps = finished(kube, ns, "hooked")
    assert all(s["phase"] == "succeeded" for s in steps.values()), steps
    sent = http.to(f"/{ns}/app")[0].json()
    assert sent["kind"] == "Application" and sent["metadata"]["name"] == "hooked"
    assert http.to(f"/{ns}/from-secret")[0].json() == {"release": "v2"}


def test_request_passes_the_json_answer_on_and_fails_on_an_error_status(kube, ns, http):
    run_app(kube, ns, "asker", [
        step("stars", "request", properties={"url": http.url("/repo"), "header": {"X-Trace": "t1"}},
             outputs=[{"name": "count", "valueFrom": '"\\(response.stargazers_count) stars"'}]),
        step("post", "request", properties={"url": http.url(f"/{ns}/post"), "method": "POST",
                                            "body": {"count": 1}}),
        step("plain", "request", properties={"url": http.url("/text")}),
        step("keep", "export2config", inputs=[{"from": "count", "parameterKey": "data.count"}],
             properties={"configName": "stars", "data": {}}),
        step("missing", "request", properties={"url": http.url("/missing")}),
        step("on-failure", "print-message-in-status", if_="status.missing.failed",
             properties={"message": "noticed"})])
    steps = finished(kube, ns, "asker")
    assert kube.get(CONFIGMAPS, "stars", ns)["data"] == {"count": "42 stars"}
    assert [r for r in http.to("/repo") if r.headers.get("X-Trace") == "t1"]
    assert http.to(f"/{ns}/post")[0].json() == {"count": 1}
    assert steps["plain"]["phase"] == "succeeded"  # an answer that is not JSON is no failure
    assert steps["missing"]["phase"] == "failed" and "404" in steps["missing"]["message"]
    assert steps["on-failure"]["phase"] == "succeeded"


def test_check_metrics_against_a_prometheus_api(kube, ns, http):
    run_app(kube, ns, "canary", [step("check", "check-metrics", properties={
        "query": "sum(rate(requests[1m]))", "metricEndpoint": http.url(""), "condition": ">=0.95",
        "duration": "2s"})])
    assert finished(kube, ns, "canary", timeout=40)["check"]["phase"] == "succeeded"
    eventually(lambda: any(r.path.startswith("/api/v1/query") for r in http.requests))

