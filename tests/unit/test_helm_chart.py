"""The Helm chart, linted and rendered with the real Helm SDK (helm-python-sdk), sharding on and off."""

from __future__ import annotations

import os

import pytest
import yaml

helm = pytest.importorskip("helm_python", reason="helm-python-sdk is installed by the test extra")

from velashard.apis.oam import CRDS  # noqa: E402
from velashard.cli.manager import build_parser, validate  # noqa: E402

CHART = os.path.join(os.path.dirname(__file__), "..", "..", "helm", "velashard")


def render(values: dict) -> list[dict]:
    manifests = helm.Chart.load(CHART).render(values, name="kubevela", namespace="vela-system")
    return [doc for text in manifests.values() for doc in yaml.safe_load_all(text) if doc]


def find(docs: list[dict], kind: str, name: str | None = None) -> dict:
    return next(d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name))


@pytest.mark.parametrize("values", [{}, {"sharding": {"enabled": True}},
                                    {"sharding": {"enabled": True}, "podDisruptionBudget": {"enabled": True}}])
def test_lint_reports_no_error(values):
    report = helm.lint(CHART, values)
    assert report["errors"] == [] and not [m for m in report["messages"] if m["severity"] >= 3], report


def test_sharding_off():
    docs = render({})
    deploy = find(docs, "Deployment")
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--enable-sharding" not in args
    assert "controller.core.oam.dev/shard-id" not in deploy["spec"]["template"]["metadata"]["labels"]
    assert deploy["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == "vela-core"
    assert "controller.core.oam.dev/shard-id" not in find(docs, "Service")["spec"]["selector"]
    # Unsharded, the webhooks record authors and check definitions; nothing schedules.
    assert "--use-webhook=true" in args and "--feature-gates=AuthenticateApplication=true" in args
    assert [h["name"] for h in find(docs, "MutatingWebhookConfiguration")["webhooks"]] == [
        "mutating-create.core.oam.dev.v1beta1.applications", "mutating-author.core.oam.dev.v1beta1.applications"]
    plain = render({"authentication": {"enabled": False}})
    assert not [d for d in plain if d["kind"] == "MutatingWebhookConfiguration"]
    assert "--feature-gates=AuthenticateApplication=false" in find(plain, "Deployment")["spec"]["template"][
        "spec"]["containers"][0]["args"]
    assert not [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    parsed = build_parser().parse_args(args)
    validate(parsed, build_parser())  # the chart's args are flags the controller accepts


def test_sharding_on_with_gates_pdb_and_placement():
    docs = render({"sharding": {"enabled": True, "schedulableShards": "shard-0,shard-1"},
                   "featureGates": {"DisableWebhookAutoSchedule": True},
                   "webhook": {"failurePolicy": {"mutating": "Ignore", "validating": "Ignore"}},
                   "podDisruptionBudget": {"enabled": True}, "nodeSelector": {"role": "control"},
                   "tolerations": [{"key": "dedicated", "operator": "Exists"}], "leaderElection": {"enabled": True}})
    deploy = find(docs, "Deployment")
    pod = deploy["spec"]["template"]
    args = pod["spec"]["containers"][0]["args"]
    assert "--enable-sharding" in args and "--schedulable-shards=shard-0,shard-1" in args
    assert "--feature-gates=AuthenticateApplication=true,DisableWebhookAutoSchedule=true" in args
    assert "--enable-leader-election" in args
    assert "--webhook-bind-address=0.0.0.0" in args  # in a pod the webhook Service routes to the pod's IP
    assert pod["metadata"]["labels"]["controller.core.oam.dev/shard-id"] == "master"
    assert pod["spec"]["nodeSelector"] == {"role": "control"} and pod["spec"]["tolerations"][0]["key"] == "dedicated"
    assert find(docs, "Service")["spec"]["selector"]["controller.core.oam.dev/shard-id"] == "master"
    create_hook, update_hook, author_hook = find(docs, "MutatingWebhookConfiguration")["webhooks"]
    assert create_hook["rules"][0]["operations"] == ["CREATE"] and "objectSelector" not in create_hook
    assert update_hook["rules"][0]["operations"] == ["UPDATE"]
    assert update_hook["objectSelector"]["matchExpressions"][0]["operator"] == "DoesNotExist"
    assert author_hook["rules"][0]["operations"] == ["UPDATE"] and "objectSelector" not in author_hook
    from velashard.webhook.runner import AUTHOR_MATCH_CONDITIONS
    assert author_hook["matchConditions"] == AUTHOR_MATCH_CONDITIONS  # the same hook the master registers
    for hook in (create_hook, update_hook, author_hook):
        assert hook["failurePolicy"] == "Ignore" and hook["timeoutSeconds"] == 5
        assert hook["clientConfig"]["service"]["path"] == "/mutating-core-oam-dev-v1beta1-applications"
    # without the gate only definitions are validated (a template that does not compile is refused)
    (definitions_hook,) = find(docs, "ValidatingWebhookConfiguration")["webhooks"]
    assert definitions_hook["clientConfig"]["service"]["path"] == "/validating-core-oam-dev-v1beta1-definitions"
    assert definitions_hook["failurePolicy"] == "Ignore"
    assert set(definitions_hook["rules"][0]["resources"]) == {
        "componentdefinitions", "traitdefinitions", "policydefinitions", "workflowstepdefinitions"}
    gated = render({"sharding": {"enabled": True}, "featureGates": {"ValidateComponentWhenSharding": True},
                    "webhook": {"failurePolicy": {"validating": "Ignore"}}})
    validating = find(gated, "ValidatingWebhookConfiguration")["webhooks"][0]
    assert validating["failurePolicy"] == "Ignore" and validating["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    assert find(docs, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    validate(build_parser().parse_args(args), build_parser())


def test_an_optional_pod_monitor_scrapes_the_master_and_the_shards():
    assert not [d for d in render({"sharding": {"enabled": True}}) if d["kind"] == "PodMonitor"]
    docs = render({"sharding": {"enabled": True}, "metrics": {"podMonitor": {"enabled": True,
                                                                              "labels": {"release": "prom"}}}})
    monitor = find(docs, "PodMonitor")
    pod_labels = find(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert monitor["spec"]["podMetricsEndpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "30s"}]
    assert helm.lint(CHART, {"metrics": {"podMonitor": {"enabled": True}}})["errors"] == []


def test_shard_label_guard_is_the_one_velashard_install_ships():
    from velashard.apiserver.admission.policy import validate_binding, validate_policy
    from velashard.sharding.guard import guard_objects

    assert not [d for d in render({}) if d["kind"].startswith("ValidatingAdmissionPolicy")
                and "shard-label" in d["metadata"]["name"]]
    docs = render({"sharding": {"enabled": True, "shardAdmins": {"users": ["ops"], "groups": ["sre"]}}})
    policy = find(docs, "ValidatingAdmissionPolicy", "kubevela-velashard-shard-label-guard")
    binding = find(docs, "ValidatingAdmissionPolicyBinding", "kubevela-velashard-shard-label-guard")
    expected_policy, expected_binding = guard_objects(["system:serviceaccount:vela-system:kubevela-velashard", "ops"],
                                                      ["sre"])
    assert policy["spec"] == expected_policy["spec"]
    assert binding["spec"] == dict(expected_binding["spec"], policyName=policy["metadata"]["name"])
    assert validate_policy(policy) == [] and validate_binding(binding) == []


def test_author_guard_is_the_one_the_master_registers():
    from velashard.apiserver.admission.policy import validate_binding, validate_policy
    from velashard.core.authors import AuthConfig
    from velashard.webhook.author_guard import guard_objects

    assert not [d for d in render({"authentication": {"enabled": False}})
                if d["kind"].startswith("ValidatingAdmissionPolicy")]
    for values, config in (({}, AuthConfig()),
                           ({"authentication": {"withUser": False, "groupPattern": "kubevela:*|system:masters|a.b"},
                             "sharding": {"enabled": True, "shardAdmins": {"users": ["ops"], "groups": ["sre"]}}},
                            AuthConfig(with_user=False, group_pattern="kubevela:*|system:masters|a.b"))):
        docs = render(values)
        policy = find(docs, "ValidatingAdmissionPolicy", "kubevela-velashard-author-guard")
        binding = find(docs, "ValidatingAdmissionPolicyBinding", "kubevela-velashard-author-guard")
        admins = values.get("sharding", {}).get("shardAdmins", {})
        expected, expected_binding = guard_objects(
            config, ["system:serviceaccount:vela-system:kubevela-velashard"] + admins.get("users", []),
            admins.get("groups", []))
        assert policy["spec"] == expected["spec"]
        assert binding["spec"] == dict(expected_binding["spec"], policyName=policy["metadata"]["name"])
        assert validate_policy(policy) == [] and validate_binding(binding) == []


def rules_of(role: dict) -> dict[str, set[str]]:
    """resource (group/plural) -> verbs, over every rule of a role."""
    out: dict[str, set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out.setdefault(f"{group}/{resource}", set()).update(rule["verbs"])
    return out


def test_shards_act_for_apps_only_by_impersonation():
    docs = render({"sharding": {"enabled": True}})
    app_rules = rules_of(find(docs, "ClusterRole", "kubevela-velashard-application-controller"))
    assert app_rules["/users"] == app_rules["/groups"] == app_rules["/serviceaccounts"] - {"get", "list", "watch"} \
        == {"impersonate"}
    # No cluster-wide write of what apps render on the controller's own identity, and no Secrets at all.
    for resource in ("apps/deployments", "apps/statefulsets", "batch/jobs", "/services", "/configmaps",
                     "networking.k8s.io/ingresses", "autoscaling/horizontalpodautoscalers"):
        assert app_rules[resource] == {"get", "list", "watch"}, resource
    assert "/secrets" not in app_rules and "coordination.k8s.io/leases" not in app_rules
    shard_role = find(docs, "Role", "kubevela-velashard-shard")
    assert shard_role["metadata"]["namespace"] == "vela-system" and "coordination.k8s.io/leases" in rules_of(shard_role)
    master_role = find(docs, "Role", "kubevela-velashard-master")
    assert [s["name"] for s in find(docs, "RoleBinding", "kubevela-velashard-master")["subjects"]] == [
        "kubevela-velashard"]  # only the master may touch the signing key
    assert rules_of(master_role)["/secrets"] == {"get", "create", "update"}
    author = rules_of(find(docs, "ClusterRole", "kubevela-velashard-app-author"))
    assert {"create", "update", "delete"} <= author["/secrets"] and {"create"} <= author["core.oam.dev/applications"]
    assert not [r for r in author if r.startswith("rbac.authorization.k8s.io/")]
    # The default user is bound only where the values say.
    assert not [d for d in docs if d["kind"] == "RoleBinding" and d["metadata"]["name"].endswith("default-user")]
    bound = render({"authentication": {"defaultUserNamespaces": ["legacy"]}})
    binding = find(bound, "RoleBinding", "kubevela-velashard-default-user")
    assert binding["metadata"]["namespace"] == "legacy" and binding["subjects"][0]["name"] == "kubevela:vela-core"
    # Authentication off: the controller does apps' work itself, with the rights that takes.
    off = rules_of(find(render({"authentication": {"enabled": False}}), "ClusterRole",
                        "kubevela-velashard-application-controller"))
    assert "/users" not in off and "create" in off["/secrets"]


def test_least_privilege_rbac():
    docs = render({"sharding": {"enabled": True}})
    app_role = find(docs, "ClusterRole", "kubevela-velashard-application-controller")
    master_role = find(docs, "ClusterRole", "kubevela-velashard-master")

    def resources(role: dict) -> set[str]:
        return {r for rule in role["rules"] for r in rule["resources"]}

    assert "pods" not in resources(app_role) and "mutatingwebhookconfigurations" not in resources(app_role)
    # every shard reads the workflow steps' definitions (its Application controller watches them)
    assert "workflowstepdefinitions" in resources(app_role)
    assert {"pods", "mutatingwebhookconfigurations", "validatingwebhookconfigurations"} <= resources(master_role)
    master_binding = find(docs, "ClusterRoleBinding", "kubevela-velashard-master")
    assert [s["name"] for s in master_binding["subjects"]] == ["kubevela-velashard"]  # slaves do not get it
    app_binding = find(docs, "ClusterRoleBinding", "kubevela-velashard-application-controller")
    assert {s["name"] for s in app_binding["subjects"]} == {"kubevela-velashard", "kubevela-velashard-shard"}


def test_shard_admins_may_read_the_signing_key_and_nothing_else_here():
    from velashard.sharding.keys import SIGNING_KEY_SECRET

    assert not [d for d in render({"sharding": {"enabled": True}}) if d["kind"] == "Role"
                and d["metadata"]["name"].endswith("shard-admin")]
    docs = render({"sharding": {"enabled": True, "shardAdmins": {"users": ["ops"], "groups": ["sre"]}}})
    role = find(docs, "Role", "kubevela-velashard-shard-admin")
    assert role["metadata"]["namespace"] == "vela-system"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": [SIGNING_KEY_SECRET],
                              "verbs": ["get"]}]
    binding = find(docs, "RoleBinding", "kubevela-velashard-shard-admin")
    assert [(s["kind"], s["name"]) for s in binding["subjects"]] == [("User", "ops"), ("Group", "sre")]


def test_chart_crds_match_the_code():
    directory = os.path.join(CHART, "crds")
    for crd in CRDS:
        with open(os.path.join(directory, f'{crd["metadata"]["name"]}.yaml')) as fh:
            assert yaml.safe_load(fh) == crd, crd["metadata"]["name"]
    assert len(os.listdir(directory)) == len(CRDS)


def test_chart_definitions_match_the_catalog_and_are_installed():
    from velashard.core.builtins import builtin_definitions

    directory = os.path.join(CHART, "definitions")
    catalog = builtin_definitions()
    for definition in catalog:
        with open(os.path.join(directory, f'{definition["metadata"]["name"]}.yaml')) as fh:
            assert yaml.safe_load(fh) == definition, definition["metadata"]["name"]
    assert len(os.listdir(directory)) == len(catalog)
    docs = render({})
    rendered = {(d["kind"], d["metadata"]["name"]) for d in docs if d["kind"].endswith("Definition")}
    assert rendered == {(d["kind"], d["metadata"]["name"]) for d in catalog}
    assert not [d for d in render({"definitions": {"install": False}}) if d["kind"].endswith("Definition")]


def test_a_certificate_secret_is_mounted_and_served_from_where_it_is_mounted():
    docs = render({"sharding": {"enabled": True}, "webhook": {"certificate": {"secretName": "webhook-tls"}},
                   "cacheDir": {"enabled": False}})
    spec = find(docs, "Deployment")["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert "--webhook-cert-dir=/etc/k8s-webhook-certs" in container["args"]
    assert container["volumeMounts"] == [{"name": "webhook-certificate", "mountPath": "/etc/k8s-webhook-certs",
                                          "readOnly": True}]
    assert spec["volumes"] == [{"name": "webhook-certificate", "secret": {"secretName": "webhook-tls"}}]
    # Without one the master makes its own: nothing mounted; the pod's name says which replica leads.
    spec = find(render({"sharding": {"enabled": True}, "cacheDir": {"enabled": False}}),
                "Deployment")["spec"]["template"]["spec"]
    assert "volumes" not in spec and not [a for a in spec["containers"][0]["args"] if "cert-dir" in a]
    assert {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in spec["containers"][0]["env"]


def test_the_cache_dir_is_an_emptydir_where_the_flag_points_and_off_leaves_no_trace():
    spec = find(render({"sharding": {"enabled": True}}), "Deployment")["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert "--cache-dir=/var/cache/velashard" in container["args"]  # on by default
    assert container["volumeMounts"] == [{"name": "cache", "mountPath": "/var/cache/velashard"}]
    assert spec["volumes"] == [{"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}}]
    assert build_parser().parse_args(container["args"]).cache_dir == "/var/cache/velashard"
    # Beside a mounted certificate; on tmpfs; with no limit (an emptyDir of no fields, not a null one).
    both = find(render({"webhook": {"certificate": {"secretName": "webhook-tls"}},
                        "cacheDir": {"path": "/cache", "medium": "Memory", "sizeLimit": "256Mi"}}),
                "Deployment")["spec"]["template"]["spec"]
    assert [m["mountPath"] for m in both["containers"][0]["volumeMounts"]] == ["/etc/k8s-webhook-certs", "/cache"]
    assert both["volumes"][1] == {"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "256Mi"}}
    assert "--cache-dir=/cache" in both["containers"][0]["args"]
    unlimited = find(render({"cacheDir": {"sizeLimit": ""}}), "Deployment")["spec"]["template"]["spec"]
    assert unlimited["volumes"] == [{"name": "cache", "emptyDir": {}}]
    off = find(render({"cacheDir": {"enabled": False}}), "Deployment")["spec"]["template"]["spec"]
    assert "volumes" not in off and "volumeMounts" not in off["containers"][0]
    assert not [a for a in off["containers"][0]["args"] if a.startswith("--cache-dir")]
