"""KubeVela's resource policies as decisions: selectors, garbage-collect, apply-once, read-only, shared,
take-over and resource-update."""

from __future__ import annotations

from velashard.core.resourcepolicies import (ResourceInfo, apply_once, deletion_order, gc_strategy,
                                             is_read_only, is_shared, keep_legacy_resources, keep_live_paths,
                                             may_take_over, selects, update_op, validate)

DEPLOY = ResourceInfo("web", "webservice", "COMPONENT", "", "Deployment", "web")
SERVICE = ResourceInfo("web", "webservice", "TRAIT", "gateway", "Service", "web")


def spec(*policies):
    return {"policies": [{"name": f"p{i}", "type": t, "properties": p} for i, (t, p) in enumerate(policies)]}


def test_selectors_and_fields_or_values():
    assert selects({"resourceTypes": ["Deployment", "StatefulSet"]}, DEPLOY)
    assert not selects({"resourceTypes": ["Deployment"], "oamTypes": ["TRAIT"]}, DEPLOY)
    assert selects({"traitTypes": ["gateway"], "componentNames": ["web"]}, SERVICE)
    assert not selects({}, DEPLOY)


def test_garbage_collect_rules_and_options():
    s = spec(("garbage-collect", {"keepLegacyResource": True, "order": "dependency",
                                  "rules": [{"selector": {"traitTypes": ["gateway"]}, "strategy": "never"}]}))
    assert gc_strategy(s, SERVICE) == "never" and gc_strategy(s, DEPLOY) == "onAppUpdate"
    assert keep_legacy_resources(s) and not keep_legacy_resources(spec())
    assert deletion_order([("db", []), ("api", ["db"]), ("web", ["api"])]) == ["web", "api", "db"]


def test_apply_once_by_rule_and_affect():
    s = spec(("apply-once", {"enable": True, "rules": [{"selector": {"resourceTypes": ["Deployment"]},
                                                        "strategy": {"path": ["spec.replicas"],
                                                                     "affect": "onStateKeep"}}]}))
    assert apply_once(s, DEPLOY, state_keep=True) == ["spec.replicas"]
    assert apply_once(s, DEPLOY, state_keep=False) is None
    s["policies"][0]["properties"]["rules"][0]["strategy"].pop("affect")  # default: always
    assert apply_once(s, DEPLOY, state_keep=False) == ["spec.replicas"]
    assert apply_once(s, SERVICE, state_keep=True) is None
    assert apply_once(spec(("apply-once", {"enable": True})), SERVICE, state_keep=True) == ["*"]
    assert apply_once(spec(("apply-once", {"enable": False})), SERVICE, state_keep=True) is None
    merged = keep_live_paths({"spec": {"replicas": 1, "x": 1}}, {"spec": {"replicas": 5, "x": 2}}, ["spec.replicas"])
    assert merged == {"spec": {"replicas": 5, "x": 1}}


def test_read_only_shared_take_over_and_update_op():
    rule = {"rules": [{"selector": {"resourceTypes": ["Service"]}}]}
    for policy, check in (("read-only", is_read_only), ("shared-resource", is_shared), ("take-over", may_take_over)):
        assert check(spec((policy, rule)), SERVICE) and not check(spec((policy, rule)), DEPLOY)
    replace = spec(("resource-update", {"rules": [{"selector": {"componentNames": ["web"]},
                                                   "strategy": {"op": "replace"}}]}))
    assert update_op(replace, DEPLOY) == "replace" and update_op(spec(), DEPLOY) == "patch"


def test_validation_names_the_policy_and_rule():
    bad = {"name": "gc", "type": "garbage-collect", "properties": {"rules": [{"strategy": "sometimes"}]}}
    assert "rules[0].strategy" in validate(bad)
    assert "unknown field" in validate({"type": "read-only", "properties": {"rules": [{"selector": {"kinds": []}}]}})
    assert validate({"type": "take-over", "properties": {"rules": [{"selector": {"resourceTypes": ["X"]}}]}}) is None
