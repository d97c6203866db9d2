"""What `velashard status` prints, as `vela status` prints it (pure)."""

from __future__ import annotations

from velashard.cli.appstatus import about, boxed, endpoints, go_time, services, tree, workflow


def ref(kind, name, namespace="default", api="v1", deleted=False):
    return {"apiVersion": api, "kind": kind, "name": name, "namespace": namespace, "deleted": deleted}


def test_the_tree_is_laid_out_as_vela_status_tree_lays_it_out():
    tracker = {"spec": {"managedResources": [ref("Deployment", "a", api="apps/v1"), ref("Service", "a"),
                                             ref("ConfigMap", "c", "other"), ref("Secret", "gone", deleted=True)]}}
    assert tree(tracker).splitlines() == [
        "CLUSTER       NAMESPACE     RESOURCE     STATUS    ",
        "local     ─┬─ default   ─┬─ Service/a    updated   ",
        "           │             └─ Deployment/a updated   ",
        "           └─ other     ─── ConfigMap/c  updated   "]
    assert tree(None).splitlines() == ["CLUSTER       NAMESPACE     RESOURCE  STATUS    "]


def app(**status):
    return {"metadata": {"name": "hello", "namespace": "default", "creationTimestamp": "2026-01-02T03:04:05Z",
                         "labels": {"controller.core.oam.dev/scheduled-shard-id": "shard-1"},
                         "annotations": {"app.oam.dev/username": "alice"}},
            "status": {"status": "running", **status}}


def test_about_workflow_and_services_read_as_vela_status():
    healthy = app(services=[{"name": "hello", "healthy": True, "message": "Ready:1/1", "namespace": "default",
                             "traits": [{"type": "scaler", "healthy": False, "message": "scaling"}]}],
                  workflow={"mode": "DAG", "finished": True, "steps": [
                      {"id": "x1", "name": "deploy", "type": "deploy", "phase": "succeeded"}]})
    text = about(healthy)
    assert "  Created at:\t2026-01-02 03:04:05 +0000 UTC" in text and "  Healthy:   \t❌" in text  # a trait is not
    assert "  Shard:     \tshard-1" in text and "  Author:    \talice" in text
    assert workflow(healthy).splitlines() == ["Workflow:", "", "  mode: DAG", "  finished: true", "  Suspend: false",
                                              "  Terminated: false", "  Steps", "  - id: x1", "    name: deploy",
                                              "    type: deploy", "    phase: succeeded ", ""]
    lines = services(healthy, {"hello": "webservice"}).splitlines()
    assert lines[:9] == ["Services:", "", "  - Name: hello  ", "    Cluster: local", "    Namespace: default",
                         "    Type: webservice", "    Health: ✅", "      Message: Ready:1/1", "    Traits:"]
    assert go_time("nonsense") == "nonsense" and workflow(app()) == ""


def test_endpoints_of_services_and_ingresses():
    svc = {"kind": "Service", "metadata": {"name": "web", "namespace": "ns", "labels": {"app.oam.dev/component": "web"}},
           "spec": {"ports": [{"port": 80}, {"port": 5432}]}}
    lb = {"kind": "Service", "metadata": {"name": "lb", "namespace": "ns"}, "spec": {"type": "LoadBalancer", "ports": [
        {"port": 8443, "appProtocol": "https"}]}, "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.9"}]}}}
    ing = {"kind": "Ingress", "metadata": {"name": "in", "namespace": "ns"}, "spec": {"tls": [{}], "rules": [
        {"host": "app.example.com", "http": {"paths": [{"path": "/api"}]}}]}}
    assert endpoints({}, [svc, lb, ing]) == [
        ("local", "web", "Service/ns/web", "http://web.ns", "true"),
        ("local", "web", "Service/ns/web", "web.ns:5432", "true"),
        ("local", "-", "Service/ns/lb", "https://10.0.0.9:8443", "false"),
        ("local", "-", "Ingress/ns/in", "https://app.example.com/api", "false")]
    assert boxed(("a", "Bee"), [("x", "y")]).splitlines() == [
        "+---+-----+", "| A | BEE |", "+---+-----+", "| x | y   |", "+---+-----+"]
