"""Workflow steps written in CUE, run by the controller against the embedded API server and real servers on
loopback: HTTP (request and webhook steps, the legacy vela/op), HTTPS with a CA and a client certificate from a
Secret, SMTP, a Prometheus query API; configs, objects listed, patched and deleted; deploy with topology,
override and replication policies."""

from __future__ import annotations

import base64
import json

import pytest

from velashard.apis.oam import APPLICATIONS, SYSTEM_NAMESPACE
from velashard.workflow.egress import EgressPolicy, parse_allowed
from velashard.kube import errors
from velashard.kube.resources import CONFIGMAPS, DEPLOYMENTS, NAMESPACES, SECRETS
from velashard.workflow.store import context_name
from tests.integration.helpers import controller_cluster, eventually, namespace_for_test
from tests.integration.loopback import HTTPServer, SMTPServer, json_answer, make_client_cert, prometheus


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # the steps call servers on loopback, which the egress policy refuses unless allowed
    yield from controller_cluster(tmp_path_factory, egress=EgressPolicy(allow=(parse_allowed("127.0.0.1"),)))


@pytest.fixture
def ns(cluster, request):
    return namespace_for_test(cluster[1], request, "wf-")


def application(name: str, ns: str, steps: list[dict], components: list[dict] | None = None, **spec) -> dict:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": {"name": name, "namespace": ns},
            "spec": {"components": components or [], "workflow": {"steps": steps}, **spec}}


def settled(kube, name, ns, phases=("running", "workflowFailed", "workflowTerminated"), timeout=30.0) -> dict:
    seen: dict = {}

    def check():
        seen["status"] = kube.get(APPLICATIONS, name, ns).get("status") or {}
        return seen["status"] if seen["status"].get("status") in phases else None
    try:
        return eventually(check, timeout=timeout, interval=0.2)
    except AssertionError:
        raise AssertionError(f"{ns}/{name} did not settle: {json.dumps(seen.get('status'), indent=1)}") from None


def steps_of(status: dict) -> dict[str, dict]:
    return {s["name"]: s for top in status["workflow"]["steps"] for s in (top, *(top.get("subSteps") or []))}


def variables(kube, app: str, ns: str) -> dict:
    return json.loads(kube.get(CONFIGMAPS, context_name(app), ns)["data"]["vars"])


@pytest.fixture
def http_server():
    server = HTTPServer()
    yield server
    server.stop()


def test_request_and_webhook_steps_post_to_a_loopback_server(cluster, ns, http_server):
    _, kube = cluster
    http_server.answers["/version"] = json_answer(200, {"version": "2.1", "channel": "stable"})
    kube.create(SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hook"},
                          "data": {"url": base64.b64encode(http_server.url("/secret-hook").encode()).decode()}}, ns)
    kube.create(APPLICATIONS, application("calls", ns, [
        {"name": "ask", "type": "call-url", "properties": {"url": http_server.url("/version"),
                                                          "header": {"X-Team": "payments"}},
         "outputs": [{"name": "version", "valueFrom": "response.version"}]},
        {"name": "tell", "type": "post-hook", "inputs": [{"from": "version", "parameterKey": "data.release"}],
         "properties": {"url": {"value": http_server.url("/hook")}, "data": {"app": "calls"}}},
        {"name": "tell-secretly", "type": "post-hook", "properties": {"url": {"secretRef": {"name": "hook",
                                                                                       "key": "url"}}}}]))
    status = settled(kube, "calls", ns)
    assert status["status"] == "running", status["workflow"]
    assert [s["phase"] for s in steps_of(status).values()] == ["succeeded"] * 3
    ask, hook, secret_hook = (next(r for r in http_server.requests if r.path == p)
                              for p in ("/version", "/hook", "/secret-hook"))
    assert ask.method == "GET" and ask.headers["X-Team"] == "payments"
    assert hook.method == "POST" and hook.headers["Content-Type"] == "application/json"
    assert json.loads(hook.body) == {"app": "calls", "release": "2.1"}  # the output went in as an input
    posted = json.loads(secret_hook.body)  # no data: the application itself, as the webhook step sends it
    assert posted["kind"] == "Application" and posted["metadata"]["name"] == "calls"
    assert variables(kube, "calls", ns) == {"version": "2.1"}
    assert status["workflow"]["contextBackend"]["name"] == context_name("calls")


def test_a_failing_request_fails_its_step_and_an_unreachable_one_is_retried(cluster, ns, http_server):
    _, kube = cluster
    http_server.answers["/broken"] = json_answer(500, {"error": "down"})
    kube.create(APPLICATIONS, application("refused", ns, [
        {"name": "ask", "type": "call-url", "properties": {"url": http_server.url("/broken")}},
        {"name": "never", "type": "call-url", "properties": {"url": http_server.url("/version")}}]))
    status = settled(kube, "refused", ns)
    steps = steps_of(status)
    assert status["status"] == "workflowFailed" and status["workflow"]["terminated"]
    assert (steps["ask"]["phase"], steps["ask"]["reason"]) == ("failed", "Action")
    assert steps["ask"]["message"] == f'{http_server.url("/broken")} answered 500'
    assert steps["never"]["phase"] == "skipped"
    closed = HTTPServer()
    closed.stop()  # a port nobody listens on
    kube.create(APPLICATIONS, application("unreachable", ns, [
        {"name": "ask", "type": "call-url", "properties": {"url": closed.url("/x")}}]))

    def failed_once() -> dict | None:
        step = (steps_of(kube.get(APPLICATIONS, "unreachable", ns).get("status") or {
            "workflow": {"steps": []}}) or {}).get("ask")
        # the call runs apart from the reconcile workers: the step waits for it ("running", Wait) first
        return step if step and step["phase"] != "running" else None

    step = eventually(failed_once, timeout=30)
    assert (step["phase"], step["reason"]) == ("failed", "Execute")  # retried, with backoff
    assert step["message"].startswith('step "ask": action call (http.do): GET http://127.0.0.1:')
    assert "refused" in step["message"].lower()
    assert kube.get(APPLICATIONS, "unreachable", ns)["status"]["status"] == "runningWorkflow"


def _tls_secret(kube, ns: str, name: str, ca: bytes, client=None) -> None:
    data = {"ca.crt": ca}
    if client is not None:
        data.update({"client.crt": client.cert_pem, "client.key": client.key_pem})
    kube.create(SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                          "data": {k: base64.b64encode(v).decode() for k, v in data.items()}}, ns)


def test_https_with_the_ca_and_client_certificate_of_a_secret(cluster, ns):
    _, kube = cluster
    from velashard.webhook.certificates import make_ca
    client_ca = make_ca("loopback-clients")
    server = HTTPServer(tls=True, client_ca=client_ca)
    try:
        _tls_secret(kube, ns, "mtls", server.ca.cert_pem, make_client_cert(client_ca, "velashard-step"))
        _tls_secret(kube, ns, "ca-only", server.ca.cert_pem)
        kube.create(APPLICATIONS, application("secure", ns, [
            {"name": "call", "type": "secure-request", "properties": {"url": server.url("/health"), "secret": "mtls"},
             "outputs": [{"name": "code", "valueFrom": "status"}]}]))
        status = settled(kube, "secure", ns)
        assert status["status"] == "running", status["workflow"]
        assert variables(kube, "secure", ns) == {"code": 200}
        subject = dict(x[0] for x in server.requests[0].client_cert["subject"])
        assert subject["commonName"] == "velashard-step"
        # without the client certificate the server refuses the handshake: the step errs, saying why
        kube.create(APPLICATIONS, application("no-cert", ns, [
            {"name": "call", "type": "secure-request", "properties": {"url": server.url("/health"),
                                                                      "secret": "ca-only"}}]))
        # (the request runs apart from the reconcile: the step waits for it first)
        step = eventually(lambda: (steps_of(kube.get(APPLICATIONS, "no-cert", ns).get("status") or {
            "workflow": {"steps": []}}).get("call") or {}).get("phase") == "failed" and steps_of(
            kube.get(APPLICATIONS, "no-cert", ns)["status"])["call"], timeout=20)
        assert (step["phase"], step["reason"]) == ("failed", "Execute")
        assert 'action call (http.do): GET https://127.0.0.1' in step["message"]
    finally:
        server.stop()


def test_a_legacy_vela_op_step_posts_and_logs(cluster, ns, http_server):
    server, kube = cluster
    http_server.answers["/created"] = json_answer(201, {})
    http_server.answers["/ok"] = json_answer(200, {})
    kube.create(APPLICATIONS, application("legacy", ns, [
        {"name": "post", "type": "legacy-post", "properties": {"url": http_server.url("/created"),
                                                               "message": "hello"},
         "outputs": [{"name": "code", "valueFrom": "code"}]},
        {"name": "wrong", "type": "legacy-post", "properties": {"url": http_server.url("/ok"), "message": "x"}}]))
    status = settled(kube, "legacy", ns)
    steps = steps_of(status)
    assert steps["post"]["phase"] == "succeeded" and variables(kube, "legacy", ns)["code"] == 201
    assert (steps["wrong"]["phase"], steps["wrong"]["message"]) == ("failed", "expected 201, got 200")
    assert next(r for r in http_server.requests if r.path == "/created").body == b"hello"
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "velashard.cli.main", "workflow", "logs", "legacy", "-n", ns,
                          "--step", "post", "--kubeconfig", server.kubeconfig], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["--- step post", f"posted to {http_server.url('/created')}"]


def test_an_email_step_sends_through_a_loopback_smtp_server(cluster, ns):
    _, kube = cluster
    smtp = SMTPServer()
    try:
        kube.create(APPLICATIONS, application("mailer", ns, [
            {"name": "mail", "type": "send-mail", "properties": {
                "from": "vela@example.com", "host": "127.0.0.1", "port": smtp.port, "to": ["ops@example.com"],
                "subject": "deployed", "body": "<b>mailer</b> is out"}}]))
        status = settled(kube, "mailer", ns)
        assert status["status"] == "running", status["workflow"]
        [message] = smtp.mailbox.messages
        assert message["from"] == "vela@example.com" and message["to"] == ["ops@example.com"]
        assert "Subject: deployed" in message["content"] and "<b>mailer</b> is out" in message["content"]
        assert "text/html" in message["content"]
    finally:
        smtp.stop()
    kube.create(APPLICATIONS, application("no-server", ns, [
        {"name": "mail", "type": "send-mail", "properties": {
            "from": "vela@example.com", "host": "127.0.0.1", "port": smtp.port, "to": ["ops@example.com"],
            "subject": "x", "body": "x"}}]))
    step = eventually(lambda: (lambda s: s if s and s.get("reason") == "Execute" else None)(steps_of(
        kube.get(APPLICATIONS, "no-server", ns).get("status") or {"workflow": {"steps": []}}).get("mail")), timeout=20)
    assert step["message"].startswith('step "mail": action mail (email.send): failed to send email:')


def test_check_metrics_against_a_loopback_prometheus(cluster, ns, http_server):
    _, kube = cluster
    http_server.answers["/api/v1/query"] = prometheus([0.5, 0.99])
    kube.create(APPLICATIONS, application("metrics", ns, [
        {"name": "slo", "type": "watch-metric", "properties": {
            "query": 'sum(rate(ok[1m]))', "metricEndpoint": http_server.url(""), "condition": ">=0.95",
            "duration": "2s", "failDuration": "1m"}}]))
    status = settled(kube, "metrics", ns)
    assert status["status"] == "running", status["workflow"]
    assert "query=sum%28rate%28ok%5B1m%5D%29%29" in http_server.requests[0].path
    http_server.answers["/api/v1/query"] = prometheus([0.1])
    kube.create(APPLICATIONS, application("bad-metrics", ns, [
        {"name": "slo", "type": "watch-metric", "properties": {
            "query": "up", "metricEndpoint": http_server.url(""), "condition": ">0.5", "failDuration": "2s"}}]))
    status = settled(kube, "bad-metrics", ns)
    step = steps_of(status)["slo"]
    assert (status["status"], step["reason"]) == ("workflowFailed", "Action")
    assert "has not held for" in step["message"] and "the query returns 0.1" in step["message"]


def test_config_steps_create_read_list_and_delete(cluster, ns):
    _, kube = cluster
    template = 'template: {\n\tparameter: {host: string, port: int}\n\toutput: stringData: dsn: ' \
               '"\\(parameter.host):\\(parameter.port)"\n}\n'
    try:
        kube.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "config-template-database", "labels": {"config.oam.dev/scope": "project"}},
            "data": {"template": template}}, SYSTEM_NAMESPACE)
    except errors.AlreadyExists:
        pass
    kube.create(APPLICATIONS, application("configs", ns, [
        {"name": "make", "type": "make-config", "properties": {"name": "db", "template": "database",
                                                                 "config": {"host": "db.local", "port": 5432}}},
        {"name": "read", "type": "get-config", "properties": {"name": "db"},
         "outputs": [{"name": "host", "valueFrom": "output.config.host"}]},
        {"name": "list", "type": "find-configs", "properties": {"template": "database"},
         "outputs": [{"name": "count", "valueFrom": "len(output.configs)"}]}]))
    status = settled(kube, "configs", ns)
    assert status["status"] == "running", status["workflow"]
    secret = kube.get(SECRETS, "db", ns)
    labels = secret["metadata"]["labels"]
    assert (labels["config.oam.dev/catalog"], labels["config.oam.dev/type"], labels["config.oam.dev/scope"]) == (
        "velacore-config", "database", "project")
    assert json.loads(base64.b64decode(secret["data"]["input-properties"])) == {"host": "db.local", "port": 5432}
    assert base64.b64decode(secret["data"]["dsn"]) == b"db.local:5432"  # what the config template renders
    assert secret["metadata"]["labels"]["app.oam.dev/name"] == "configs"  # applied for the app, tracked
    assert variables(kube, "configs", ns) == {"host": "db.local", "count": 1}
    kube.create(APPLICATIONS, application("unconfig", ns, [
        {"name": "drop", "type": "drop-config", "properties": {"name": "db"}}]))
    assert settled(kube, "unconfig", ns)["status"] == "running"
    with pytest.raises(errors.NotFound):
        kube.get(SECRETS, "db", ns)


def test_objects_listed_patched_and_deleted_by_a_step(cluster, ns):
    _, kube = cluster
    for name, labels in (("keep", {"team": "a"}), ("old-1", {"team": "a", "stale": "yes"}),
                         ("old-2", {"stale": "yes"})):
        kube.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": name, "labels": labels}, "data": {"x": "1"}}, ns)
    # a patched object is applied for the app: one no app manages is adopted only under a take-over policy
    kube.create(APPLICATIONS, application("tidy", ns, [
        {"name": "tidy", "type": "tidy-up", "properties": {"select": {"team": "a"}, "patch": "keep",
                                                           "sweep": {"stale": "yes"}},
         "outputs": [{"name": "count", "valueFrom": "count"}]}], policies=[
        {"name": "adopt", "type": "take-over", "properties": {"rules": [{"selector": {"resourceTypes": ["ConfigMap"]}}]}}]))
    assert settled(kube, "tidy", ns)["status"] == "running"
    assert variables(kube, "tidy", ns) == {"count": 2}
    assert kube.get(CONFIGMAPS, "keep", ns)["data"] == {"x": "1", "patched": "yes"}
    for name in ("old-1", "old-2"):
        with pytest.raises(errors.NotFound):
            kube.get(CONFIGMAPS, name, ns)


def test_deploy_steps_place_override_and_replicate_components(cluster, ns):
    _, kube = cluster
    for suffix in ("staging", "prod"):
        kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"{ns}-{suffix}"}})
    web = {"name": "web", "type": "webservice", "properties": {"image": "nginx:1.25", "ports": [{"port": 80}]}}
    policies = [
        {"name": "staging", "type": "topology", "properties": {"clusters": ["local"], "namespace": f"{ns}-staging"}},
        {"name": "prod", "type": "topology", "properties": {"clusters": ["local"], "namespace": f"{ns}-prod"}},
        {"name": "prod-image", "type": "override", "properties": {"components": [
            {"name": "web", "properties": {"image": "nginx:1.26"}}]}}]
    kube.create(APPLICATIONS, application("envs", ns, [
        {"name": "to-staging", "type": "deploy", "properties": {"policies": ["staging"]}},
        {"name": "to-prod", "type": "deploy", "properties": {"policies": ["prod", "prod-image"]}}], [web],
        policies=policies))
    status = settled(kube, "envs", ns, timeout=40)
    assert status["status"] == "running", status["workflow"]
    image = lambda n: kube.get(DEPLOYMENTS, "web", n)["spec"]["template"]["spec"]["containers"][0]["image"]  # noqa
    assert (image(f"{ns}-staging"), image(f"{ns}-prod")) == ("nginx:1.25", "nginx:1.26")
    assert sorted(s["namespace"] for s in status["services"]) == [f"{ns}-prod", f"{ns}-staging"]
    assert all(s["healthy"] for s in status["services"])
    with pytest.raises(errors.NotFound):
        kube.get(DEPLOYMENTS, "web", ns)  # nothing went to the app's own namespace


def test_a_component_that_does_not_render_fails_only_its_step(cluster, ns, http_server):
    _, kube = cluster
    broken = {"name": "broken", "type": "k8s-objects", "properties": {"objects": [{"err": "no kind"}]}}
    kube.create(APPLICATIONS, application("partly", ns, [
        {"name": "apply-broken", "type": "apply-component", "properties": {"component": "broken"}},
        {"name": "tell", "type": "call-url", "if": "always", "properties": {"url": http_server.url("/after")}}],
        [broken]))
    step = eventually(lambda: (lambda s: s if s and s.get("reason") == "Execute" else None)(steps_of(
        kube.get(APPLICATIONS, "partly", ns).get("status") or {"workflow": {"steps": []}}).get("apply-broken")),
        timeout=20)
    assert step["message"].startswith('step "apply-broken": action apply (oam.component-apply): component "broken"')
    rendered = next(c for c in kube.get(APPLICATIONS, "partly", ns)["status"]["conditions"] if c["type"] == "Rendered")
    assert rendered["status"] == "False" and 'component "broken"' in rendered["message"]
