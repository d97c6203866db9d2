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


def _headers(apiserver) -> dict[str, str]:
    return {"Authorization": f"Bearer {apiserver.admin_token}", "Content-Type": "application/json"}


@pytest.mark.parametrize("method,path", [
    ("POST", "/apis/nosuch.example.com/v1/widgets"),  # a group the server does not serve
    ("POST", "/api/v1/namespaces/default/nosuchthings"),
    ("PUT", "/api/v1/namespaces/default/configmaps/absent/nosub"),
    ("POST", "/api/v1/namespaces/default/configmaps/x"),  # POST on an object: method not allowed
])
def test_error_with_body_keeps_connection_in_sync(apiserver, method, path):
    conn = _conn(apiserver)
    try:
        body = json.dumps({"apiVersion": "v1", "kind": "Whatever", "spec": {"pad": "x" * 5000}})
        conn.request(method, path, body=body, headers=_headers(apiserver))
        first = conn.getresponse()
        assert first.status in (404, 405)
        assert json.loads(first.read())["kind"] == "Status"
        conn.request("GET", "/api/v1/namespaces/default", headers=_headers(apiserver))
        second = conn.getresponse()
        assert second.status == 200
        assert json.loads(second.read())["metadata"]["name"] == "default"
    finally:
        conn.close()


def test_oversized_body_answers_413_then_closes(apiserver):
    conn = _conn(apiserver)
    try:
        conn.putrequest("POST", "/api/v1/namespaces/default/configmaps")
        for k, v in _headers(apiserver).items():
            conn.putheader(k, v)
        conn.putheader("Content-Length", str(10 * 1024 * 1024))
        conn.endheaders()
        answer = conn.getresponse()
        assert answer.status == 413
        assert answer.getheader("Connection", "").lower() == "close"
    finally:
        conn.close()


def test_unsupported_media_type_is_415_status(apiserver):
    conn = _conn(apiserver)
    try:
        conn.request("POST", "/api/v1/namespaces/default/configmaps", body=b"\x00\x01",
                     headers=dict(_headers(apiserver), **{"Content-Type": "application/cbor"}))
        answer = conn.getresponse()
        body = json.loads(answer.read())
        assert answer.status == 415 and body["reason"] == "UnsupportedMediaType"
        assert "application/cbor" in body["message"] and "application/json" in body["message"]
    finally:
        conn.close()


def _svc(name: str) -> client.V1Service:
    return client.V1Service(metadata=client.V1ObjectMeta(name=name),
                            spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=80)], selector={"a": "b"}))


def _deploy(name: str, replicas: int = 1, image: str = "nginx:1") -> client.V1Deployment:
    labels = {"app": name}
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1DeploymentSpec(
            replicas=replicas, selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(metadata=client.V1ObjectMeta(labels=labels), spec=client.V1PodSpec(
                containers=[client.V1Container(name="c", image=image)]))))


def test_delete_service_and_serviceaccount_answer_the_deleted_object(api_client, namespace):
    core = client.CoreV1Api(api_client)
    made = core.create_namespaced_service(namespace, _svc("web"))
    gone = core.delete_namespaced_service("web", namespace)
    assert isinstance(gone, client.V1Service) and gone.metadata.uid == made.metadata.uid
    core.create_namespaced_service_account(namespace, client.V1ServiceAccount(
        metadata=client.V1ObjectMeta(name="robot")))
    sa = core.delete_namespaced_service_account("robot", namespace)
    assert isinstance(sa, client.V1ServiceAccount) and sa.metadata.name == "robot"


def test_delete_deployment_answers_status_with_resource_details(api_client, namespace):
    apps = client.AppsV1Api(api_client)
    made = apps.create_namespaced_deployment(namespace, _deploy("web"))
    answer = apps.delete_namespaced_deployment("web", namespace, _preload_content=False)
    status = json.loads(answer.data)
    assert status["kind"] == "Status" and status["status"] == "Success"
    assert status["details"] == {"name": "web", "group": "apps", "kind": "deployments", "uid": made.metadata.uid}


def test_delete_with_finalizer_answers_object_with_deletion_timestamp(api_client, namespace):
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="held", finalizers=["example.com/hold"])))
    answer = core.delete_namespaced_config_map("held", namespace, _preload_content=False)
    body = json.loads(answer.data)
    assert answer.status == 200 and body["kind"] == "ConfigMap"
    assert body["metadata"]["deletionTimestamp"] and body["metadata"]["finalizers"] == ["example.com/hold"]
    core.patch_namespaced_config_map("held", namespace, {"metadata": {"finalizers": None}})
    eventually(lambda: not core.list_namespaced_config_map(namespace, field_selector="metadata.name=held").items)


def test_error_statuses_name_the_resource(api_client, namespace):
    apps = client.AppsV1Api(api_client)
    apps.create_namespaced_deployment(namespace, _deploy("dup"))
    with pytest.raises(ApiException) as err:
        apps.create_namespaced_deployment(namespace, _deploy("dup"))
    status = status_of(err.value)
    assert err.value.status == 409 and status["reason"] == "AlreadyExists"
    assert status["message"] == 'deployments.apps "dup" already exists'
    assert status["details"] == {"name": "dup", "group": "apps", "kind": "deployments"}
    with pytest.raises(ApiException) as err:
        client.CoreV1Api(api_client).read_namespaced_service("absent", namespace)
    status = status_of(err.value)
    assert status["message"] == 'services "absent" not found'
    assert status["details"] == {"name": "absent", "kind": "services"}
    stale = apps.read_namespaced_deployment("dup", namespace)
    apps.patch_namespaced_deployment("dup", namespace, {"metadata": {"labels": {"x": "y"}}})
    stale.metadata.labels = {"z": "w"}
    with pytest.raises(ApiException) as err:
        apps.replace_namespaced_deployment("dup", namespace, stale)
    status = status_of(err.value)
    assert err.value.status == 409 and status["reason"] == "Conflict"
    assert status["message"] == ('Operation cannot be fulfilled on deployments.apps "dup": the object has been '
                                 'modified; please apply your changes to the latest version and try again')
    with pytest.raises(ApiException) as err:
        apps.create_namespaced_deployment(namespace, _deploy("Bad_Name"))
    status = status_of(err.value)
    assert err.value.status == 422 and status["reason"] == "Invalid"
    assert status["details"]["kind"] == "Deployment" and status["details"]["group"] == "apps"
    assert status["message"].startswith('Deployment.apps "Bad_Name" is invalid: metadata.name: Invalid value: ')
    assert status["details"]["causes"][0]["field"] == "metadata.name"


def test_simulated_node_with_capacity_conditions_and_heartbeat_lease(api_client):
    core = client.CoreV1Api(api_client)
    node = core.read_node("node-0")
    assert node.status.capacity["cpu"] and node.status.allocatable["pods"] == "110"
    ready = {c.type: c.status for c in node.status.conditions}
    assert ready["Ready"] == "True" and ready["MemoryPressure"] == "False"
    lease = client.CoordinationV1Api(api_client).read_namespaced_lease("node-0", "kube-node-lease")
    assert lease.spec.holder_identity == "node-0" and lease.spec.renew_time is not None
    assert lease.metadata.owner_references[0].kind == "Node"


def test_replication_controllers_are_served(api_client, namespace):
    core = client.CoreV1Api(api_client)
    rc = client.V1ReplicationController(metadata=client.V1ObjectMeta(name="rc"), spec=client.V1ReplicationControllerSpec(
        replicas=2, template=client.V1PodTemplateSpec(metadata=client.V1ObjectMeta(labels={"app": "rc"}),
                                                      spec=client.V1PodSpec(containers=[client.V1Container(
                                                          name="c", image="nginx")]))))
    made = core.create_namespaced_replication_controller(namespace, rc)
    assert made.spec.selector == {"app": "rc"}
    eventually(lambda: core.read_namespaced_replication_controller_status("rc", namespace).status.ready_replicas == 2)


def test_simulated_pod_is_scheduled_runs_and_honours_deletion_grace(api_client, namespace):
    core = client.CoreV1Api(api_client)
    core.create_namespaced_pod(namespace, client.V1Pod(metadata=client.V1ObjectMeta(name="p"), spec=client.V1PodSpec(
        containers=[client.V1Container(name="c", image="nginx")])))

    def running():
        pod = core.read_namespaced_pod("p", namespace)
        return pod if pod.status.phase == "Running" else None

    pod = eventually(running)
    assert pod.spec.node_name == "node-0" and pod.status.pod_ip.startswith("10.244.0.")
    assert pod.status.container_statuses[0].ready and pod.status.container_statuses[0].state.running
    assert {c.type: c.status for c in pod.status.conditions}["Ready"] == "True"
    deleting = core.delete_namespaced_pod("p", namespace)
    assert isinstance(deleting, client.V1Pod) and deleting.metadata.deletion_timestamp is not None
    assert deleting.metadata.deletion_grace_period_seconds == 30
    eventually(lambda: not core.list_namespaced_pod(namespace).items)


def test_pod_whose_selector_matches_no_node_stays_pending_unschedulable(api_client, namespace):
    core = client.CoreV1Api(api_client)
    core.create_namespaced_pod(namespace, client.V1Pod(metadata=client.V1ObjectMeta(name="p"), spec=client.V1PodSpec(
        node_selector={"disk": "ssd"}, containers=[client.V1Container(name="c", image="nginx")])))
    cond = eventually(lambda: (core.read_namespaced_pod("p", namespace).status.conditions or [None])[0])
    assert cond.type == "PodScheduled" and cond.reason == "Unschedulable"


def test_simulated_statuses_parse_in_typed_clients(api_client, namespace):
    apps = client.AppsV1Api(api_client)
    labels = {"app": "ds"}
    template = client.V1PodTemplateSpec(metadata=client.V1ObjectMeta(labels=labels), spec=client.V1PodSpec(
        containers=[client.V1Container(name="c", image="nginx")]))
    apps.create_namespaced_daemon_set(namespace, client.V1DaemonSet(
        metadata=client.V1ObjectMeta(name="ds"),
        spec=client.V1DaemonSetSpec(selector=client.V1LabelSelector(match_labels=labels), template=template)))
    apps.create_namespaced_stateful_set(namespace, client.V1StatefulSet(
        metadata=client.V1ObjectMeta(name="sts"), spec=client.V1StatefulSetSpec(
            replicas=0, service_name="sts", selector=client.V1LabelSelector(match_labels=labels), template=template)))
    ds = eventually(lambda: apps.read_namespaced_daemon_set_status("ds", namespace).status.observed_generation)
    assert ds == 1
    status = apps.read_namespaced_daemon_set_status("ds", namespace).status
    assert status.desired_number_scheduled == status.number_ready == 1 and status.number_misscheduled == 0
    eventually(lambda: apps.read_namespaced_stateful_set_status("sts", namespace).status.observed_generation)
    assert apps.read_namespaced_stateful_set_status("sts", namespace).status.replicas == 0


def test_scale_subresource_through_typed_client(api_client, namespace):
    apps = client.AppsV1Api(api_client)
    apps.create_namespaced_deployment(namespace, _deploy("web"))
    scale = apps.read_namespaced_deployment_scale("web", namespace)
    assert isinstance(scale, client.V1Scale) and scale.spec.replicas == 1 and scale.status.selector == "app=web"
    scaled = apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 3}})
    assert scaled.spec.replicas == 3
    assert apps.read_namespaced_deployment("web", namespace).spec.replicas == 3
    eventually(lambda: apps.read_namespaced_deployment_scale("web", namespace).status.replicas == 3)
    current = apps.read_namespaced_deployment_scale("web", namespace)
    current.spec.replicas = 0
    assert apps.replace_namespaced_deployment_scale("web", namespace, current).spec.replicas == 0
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": -1}})
    assert err.value.status == 422 and status_of(err.value)["details"]["kind"] == "Scale"
    stale = apps.read_namespaced_deployment_scale("web", namespace)
    apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 2}})
    with pytest.raises(ApiException) as err:
        apps.replace_namespaced_deployment_scale("web", namespace, stale)
    assert err.value.status == 409


def test_scale_is_in_discovery(api_client):
    resources = client.AppsV1Api(api_client).get_api_resources().resources
    scale = {r.name: r for r in resources}["deployments/scale"]
    assert scale.group == "autoscaling" and scale.version == "v1" and scale.kind == "Scale"


def test_deployment_owns_a_replicaset_per_template_revision(api_client, namespace):
    apps = client.AppsV1Api(api_client)
    made = apps.create_namespaced_deployment(namespace, _deploy("web", replicas=2))

    def replicasets():
        return sorted(apps.list_namespaced_replica_set(namespace).items,
                      key=lambda rs: int(rs.metadata.annotations["deployment.kubernetes.io/revision"]))

    first = eventually(lambda: replicasets() and replicasets()[0])
    assert first.metadata.owner_references[0].uid == made.metadata.uid and first.metadata.owner_references[0].controller
    assert first.spec.replicas == 2 and first.metadata.labels["pod-template-hash"]
    assert first.spec.selector.match_labels["pod-template-hash"] == first.metadata.labels["pod-template-hash"]
    apps.patch_namespaced_deployment("web", namespace, {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "image": "nginx:2"}]}}}})
    eventually(lambda: len(replicasets()) == 2 and replicasets()[0].spec.replicas == 0)
    newest = replicasets()[1]
    assert newest.metadata.annotations["deployment.kubernetes.io/revision"] == "2" and newest.spec.replicas == 2
    eventually(lambda: apps.read_namespaced_deployment("web", namespace).metadata.annotations[
        "deployment.kubernetes.io/revision"] == "2")
    eventually(lambda: (apps.read_namespaced_replica_set_status(newest.metadata.name, namespace)
                        .status.ready_replicas == 2))
    # rolling back to the first template reuses its ReplicaSet as revision 3
    template = api_client.sanitize_for_serialization(first.spec.template)
    del template["metadata"]["labels"]["pod-template-hash"]
    apps.patch_namespaced_deployment("web", namespace, {"spec": {"template": template}})
    eventually(lambda: replicasets()[-1].metadata.name == first.metadata.name)
    rolled = replicasets()[-1]
    assert rolled.metadata.annotations["deployment.kubernetes.io/revision"] == "3"
    assert rolled.metadata.annotations["deployment.kubernetes.io/revision-history"] == "1"
    apps.delete_namespaced_deployment("web", namespace)
    eventually(lambda: not apps.list_namespaced_replica_set(namespace).items)


def test_hpa_keeps_its_target_within_bounds_through_the_scale_of_the_target(api_client, namespace):
    apps = client.AppsV1Api(api_client)
    apps.create_namespaced_deployment(namespace, _deploy("web", replicas=1))
    client.AutoscalingV2Api(api_client).create_namespaced_horizontal_pod_autoscaler(
        namespace, client.V2HorizontalPodAutoscaler(
            metadata=client.V1ObjectMeta(name="web"), spec=client.V2HorizontalPodAutoscalerSpec(
                min_replicas=2, max_replicas=4, scale_target_ref=client.V2CrossVersionObjectReference(
                    api_version="apps/v1", kind="Deployment", name="web"))))
    eventually(lambda: apps.read_namespaced_deployment_scale("web", namespace).spec.replicas == 2)
    status = eventually(lambda: client.AutoscalingV2Api(api_client).read_namespaced_horizontal_pod_autoscaler_status(
        "web", namespace).status.observed_generation and client.AutoscalingV2Api(
        api_client).read_namespaced_horizontal_pod_autoscaler_status("web", namespace).status)
    assert status.desired_replicas == 2


def test_more_builtin_kinds_are_served_with_typed_clients(api_client, namespace):
    core = client.CoreV1Api(api_client)
    pvc = core.create_namespaced_persistent_volume_claim(namespace, client.V1PersistentVolumeClaim(
        metadata=client.V1ObjectMeta(name="data"), spec=client.V1PersistentVolumeClaimSpec(
            access_modes=["ReadWriteOnce"], resources=client.V1VolumeResourceRequirements(
                requests={"storage": "1Gi"}))))
    assert pvc.status.phase == "Pending"
    assert isinstance(core.delete_namespaced_persistent_volume_claim("data", namespace), client.V1PersistentVolumeClaim)
    batch = client.BatchV1Api(api_client)
    batch.create_namespaced_cron_job(namespace, client.V1CronJob(
        metadata=client.V1ObjectMeta(name="nightly"), spec=client.V1CronJobSpec(
            schedule="0 3 * * *", job_template=client.V1JobTemplateSpec(spec=client.V1JobSpec(
                template=client.V1PodTemplateSpec(spec=client.V1PodSpec(restart_policy="Never", containers=[
                    client.V1Container(name="c", image="busybox")])))))))
    assert batch.read_namespaced_cron_job("nightly", namespace).spec.schedule == "0 3 * * *"
    client.PolicyV1Api(api_client).create_namespaced_pod_disruption_budget(namespace, client.V1PodDisruptionBudget(
        metadata=client.V1ObjectMeta(name="pdb"), spec=client.V1PodDisruptionBudgetSpec(
            min_available=1, selector=client.V1LabelSelector(match_labels={"app": "web"}))))
    client.NetworkingV1Api(api_client).create_namespaced_ingress(namespace, client.V1Ingress(
        metadata=client.V1ObjectMeta(name="ing"), spec=client.V1IngressSpec(default_backend=client.V1IngressBackend(
            service=client.V1IngressServiceBackend(name="web", port=client.V1ServiceBackendPort(number=80))))))
    core.create_namespaced_limit_range(namespace, client.V1LimitRange(
        metadata=client.V1ObjectMeta(name="lr"), spec=client.V1LimitRangeSpec(limits=[client.V1LimitRangeItem(
            type="Container", default={"cpu": "500m"})])))
