"""List and watch semantics: selectors, pagination, resourceVersions, transitions, bookmarks, 410."""

from __future__ import annotations

import threading

import pytest
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException



def make_cms(core: client.CoreV1Api, namespace: str) -> None:
    for name, labels in [("a", {"env": "prod", "tier": "web"}), ("b", {"env": "dev", "tier": "web"}),
                         ("c", {"env": "prod"}), ("d", {})]:
        core.create_namespaced_config_map(namespace, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=name, labels=labels)))


@pytest.mark.parametrize("selector,expected", [
    ("env=prod", "ac"), ("env==prod", "ac"), ("env!=prod", "bd"), ("env in (prod,dev)", "abc"),
    ("env notin (prod)", "bd"), ("tier", "ab"), ("!tier", "cd"), ("env=prod,tier=web", "a"),
    ("env=prod,!tier", "c"), ("", "abcd")])
def test_label_selectors(api_client, namespace, selector, expected):
    core = client.CoreV1Api(api_client)
    make_cms(core, namespace)
    names = [i.metadata.name for i in core.list_namespaced_config_map(namespace, label_selector=selector).items]
    assert "".join(names) == expected


def test_bad_selectors_are_400(api_client, namespace):
    core = client.CoreV1Api(api_client)
    for selector in ("env in (", "=x", "env in ()"):
        with pytest.raises(ApiException) as err:
            core.list_namespaced_config_map(namespace, label_selector=selector)
        assert err.value.status == 400, selector
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map(namespace, field_selector="spec.nope=1")
    assert err.value.status == 400


def test_field_selectors(api_client, namespace):
    core = client.CoreV1Api(api_client)
    make_cms(core, namespace)
    assert [i.metadata.name for i in core.list_namespaced_config_map(
        namespace, field_selector="metadata.name=b").items] == ["b"]
    assert len(core.list_config_map_for_all_namespaces(
        field_selector=f"metadata.namespace={namespace},metadata.name!=a").items) == 3
    pod = client.V1Pod(metadata=client.V1ObjectMeta(name="p"),
                       spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]))
    core.create_namespaced_pod(namespace, pod)
    assert [p.metadata.name for p in core.list_namespaced_pod(namespace, field_selector="status.phase=Pending").items] \
        == ["p"]
    assert core.list_namespaced_pod(namespace, field_selector="status.phase=Running").items == []


def test_pagination_with_limit_and_continue(api_client, namespace):
    core = client.CoreV1Api(api_client)
    for i in range(7):
        core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"p{i}")))
    seen, token, pages = [], None, 0
    while True:
        page = core.list_namespaced_config_map(namespace, limit=3, _continue=token)
        seen += [i.metadata.name for i in page.items]
        pages += 1
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == 7 - len(seen)
    assert seen == [f"p{i}" for i in range(7)] and pages == 3


def test_pagination_of_a_selective_list_pages_what_is_selected(api_client, namespace):
    """Every third object selected: full pages of selected ones, and a continue token only while a selected one
    follows (none after the last, though unselected ones follow it)."""
    core = client.CoreV1Api(api_client)
    for i in range(20):
        core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(
            name=f"s{i:02d}", labels={"pick": "yes" if i % 3 == 0 else "no"})))
    seen, sizes, token = [], [], None
    while True:
        page = core.list_namespaced_config_map(namespace, limit=2, label_selector="pick=yes", _continue=token)
        seen += [i.metadata.name for i in page.items]
        sizes.append(len(page.items))
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count is None  # not counted for a selective list
    assert seen == [f"s{i:02d}" for i in range(0, 20, 3)] and sizes == [2, 2, 2, 1]
    exact = core.list_namespaced_config_map(namespace, limit=7, label_selector="pick=yes")
    assert len(exact.items) == 7 and not exact.metadata._continue  # s18 is the last selected: nothing follows


def test_watch_from_resource_version_and_initial_events(api_client, namespace):
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="before")))
    rv = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="after")))
    core.delete_namespaced_config_map("before", namespace)
    events = [(e["type"], e["object"].metadata.name) for e in watch.Watch().stream(
        core.list_namespaced_config_map, namespace, resource_version=rv, timeout_seconds=1)]
    assert events == [("ADDED", "after"), ("DELETED", "before")]
    initial = [(e["type"], e["object"].metadata.name) for e in watch.Watch().stream(
        core.list_namespaced_config_map, namespace, timeout_seconds=1)]
    assert initial == [("ADDED", "after")]


def test_watch_transition_rule_with_label_selector(api_client, namespace):
    core = client.CoreV1Api(api_client)
    rv = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(
        name="t", labels={"shard": "other"})))
    core.patch_namespaced_config_map("t", namespace, {"metadata": {"labels": {"shard": "mine"}}})
    core.patch_namespaced_config_map("t", namespace, {"data": {"x": "1"}})
    core.patch_namespaced_config_map("t", namespace, {"metadata": {"labels": {"shard": "other"}}})
    events = [(e["type"], e["object"].metadata.labels["shard"]) for e in watch.Watch().stream(
        core.list_namespaced_config_map, namespace, label_selector="shard=mine", resource_version=rv,
        timeout_seconds=1)]
    # Starts matching: ADDED; changes while matching: MODIFIED; stops matching: DELETED (previous state).
    assert events == [("ADDED", "mine"), ("MODIFIED", "mine"), ("DELETED", "mine")]


def test_watch_live_events_and_bookmarks(api_client, namespace):
    core = client.CoreV1Api(api_client)
    rv = core.list_namespaced_config_map(namespace).metadata.resource_version
    got: list[tuple[str, str]] = []
    w = watch.Watch()

    def consume() -> None:
        for event in w.stream(core.list_namespaced_config_map, namespace, resource_version=rv,
                              allow_watch_bookmarks=True, timeout_seconds=4):
            name = event["object"].metadata.name if event["type"] != "BOOKMARK" else ""
            got.append((event["type"], name or ""))
            if event["type"] == "BOOKMARK":
                w.stop()

    t = threading.Thread(target=consume)
    t.start()
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="live")))
    t.join(10)
    assert got[0] == ("ADDED", "live")
    assert got[-1][0] == "BOOKMARK"


def test_watch_too_old_gets_410_expired(make_apiserver):
    server = make_apiserver(watch_history=3)
    api = config.new_client_from_config(config_file=server.kubeconfig)
    core = client.CoreV1Api(api)
    old_rv = core.list_namespaced_config_map("default").metadata.resource_version
    for i in range(6):
        core.create_namespaced_config_map("default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"x{i}")))
    with pytest.raises(ApiException) as err:
        for _ in watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version=old_rv,
                                      timeout_seconds=2):
            pass
    assert err.value.status == 410
    api.close()


def test_watch_events_arrive_in_resource_version_order_under_concurrent_writers(api_client, namespace):
    core = client.CoreV1Api(api_client)
    rv = core.list_namespaced_config_map(namespace).metadata.resource_version

    def writer(prefix: str) -> None:
        for i in range(15):
            core.create_namespaced_config_map(namespace, client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name=f"{prefix}-{i}")))

    threads = [threading.Thread(target=writer, args=(p,)) for p in "abcd"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rvs = [int(e["object"].metadata.resource_version) for e in watch.Watch().stream(
        core.list_namespaced_config_map, namespace, resource_version=rv, timeout_seconds=1)]
    assert len(rvs) == 60 and rvs == sorted(rvs)


def test_list_resource_version_and_cluster_wide_list(api_client, namespace):
    core = client.CoreV1Api(api_client)
    made = core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="l")))
    every = core.list_config_map_for_all_namespaces()
    assert int(every.metadata.resource_version) >= int(made.metadata.resource_version)
    assert any(i.metadata.name == "l" and i.metadata.namespace == namespace for i in every.items)
