"""ValidatingAdmissionPolicy decisions (pure) and the shard-label guard's rule, without an API server."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from velashard.apis import labels
from velashard.apiserver.admission import cel
from velashard.apiserver.admission.attributes import Attributes
from velashard.apiserver.admission.policy import compile_policy, evaluate, request_object, resources_match
from velashard.apiserver.storage.resources import BUILTIN_TYPES
from velashard.core.authors import AuthConfig
from velashard.sharding.guard import guard_objects
from velashard.webhook import author_guard

TYPES = {rt.plural: rt for rt in BUILTIN_TYPES}


def compiled(validations, **spec):
    return compile_policy({"spec": {"validations": validations, **spec}})


def activation(obj=None, old=None, user="alice", groups=(), namespace=None, op="UPDATE"):
    return {"object": obj, "oldObject": old, "params": None, "namespaceObject": namespace,
            "request": {"operation": op, "name": "a", "namespace": "n",
                        "userInfo": {"username": user, "groups": list(groups)}}}


def test_variables_are_lazy_and_their_errors_name_them():
    policy = compiled([{"expression": "variables.ok"}, {"expression": "variables.broken == 1"}],
                      variables=[{"name": "broken", "expression": "object.missing"},
                                 {"name": "ok", "expression": "true"}])
    decisions, _ = evaluate(policy, activation({"metadata": {}}))
    assert len(decisions) == 1 and decisions[0].error
    assert decisions[0].message == ("expression 'variables.broken == 1' resulted in error: composited variable "
                                    "\"broken\" fails to evaluate: no such key: missing")
    ignoring = compiled([{"expression": "variables.broken == 1"}], failurePolicy="Ignore",
                        variables=[{"name": "broken", "expression": "object.missing"}])
    assert evaluate(ignoring, activation({"metadata": {}})) == ([], {})


def test_a_decision_evaluates_only_the_variables_it_needs():
    # As kube-apiserver's lazy variables: || and && skip a variable the outcome does not need, even one that
    # would fail; when the outcome needs it, the error still names it.
    policy = compiled([{"expression": "variables.ok || variables.broken == 1"}],
                      variables=[{"name": "broken", "expression": "object.missing"},
                                 {"name": "ok", "expression": "object.n == 1"}])
    assert policy.inlined
    assert evaluate(policy, activation({"n": 1})) == ([], {})
    decisions, _ = evaluate(policy, activation({"n": 2}))
    assert decisions[0].message == ("expression 'variables.ok || variables.broken == 1' resulted in error: "
                                    "composited variable \"broken\" fails to evaluate: no such key: missing")


@pytest.mark.parametrize("source,expected", [
    ("variables.a || variables.b", "(x) || (y)"),
    ("variables . a == 'variables.b' + \"variables.b\" + r'\\' + '''variables.b'''",
     "(x) == 'variables.b' + \"variables.b\" + r'\\' + '''variables.b'''"),
    ("variables.a // variables.b's\n&& variables.b", "(x) \n&& (y)"),
    ("object.variables.a && variables.a", "object.variables.a && (x)"),
    ("1e3 > 0x1F && variables.a", "1e3 > 0x1F && (x)"),
    ("variables['a']", None),                          # read another way
    ("items.all(variables, variables.a)", None),       # bound by a macro
    ("variables.c", None),                             # no expansion
    ("'unterminated", None),
])
def test_inline_variables(source, expected):
    assert cel.inline_variables(source, {"a": "x", "b": "y"}) == expected


def test_variables_built_on_variables_see_each_other():
    # One conversion of the activation serves every program that reads no variable computed after it; a program
    # that does sees the variables as they are then.
    policy = compiled([{"expression": "variables.b == 3 && variables.a == 2 && object.n == 1",
                        "messageExpression": "'b is ' + string(variables.b)"},
                       {"expression": "variables.c != 'x'", "messageExpression": "'c is ' + variables.c"}],
                      variables=[{"name": "a", "expression": "object.n + 1"},
                                 {"name": "b", "expression": "variables.a + 1"},
                                 {"name": "c", "expression": "'x'"}])
    assert evaluate(policy, activation({"n": 1}))[0][0].message == "c is x"
    assert [d.message for d in evaluate(policy, activation({"n": 2}))[0]] == ["b is 4", "c is x"]


def test_message_falls_back_from_a_bad_message_expression():
    policy = compiled([{"expression": "false", "message": "plain", "messageExpression": "'two\\nlines'"},
                       {"expression": "false", "messageExpression": "object.missing"},
                       {"expression": "false", "messageExpression": "'  trimmed  '", "reason": "Forbidden"}])
    messages = [(d.message, d.reason) for d in evaluate(policy, activation({}))[0]]
    assert messages == [("plain", "Invalid"), ("failed expression: false", "Invalid"), ("trimmed", "Forbidden")]


def test_a_false_match_condition_wins_over_an_erroring_one():
    conditions = [{"name": "errs", "expression": "object.missing == 1"}, {"name": "no", "expression": "false"}]
    assert evaluate(compiled([{"expression": "false"}], matchConditions=conditions), activation({})) == ([], {})
    erroring = compiled([{"expression": "false"}], matchConditions=conditions[:1])
    decisions, _ = evaluate(erroring, activation({}))
    assert decisions[0].error and "no such key: missing" in decisions[0].message


def test_audit_annotations_keep_strings_and_drop_nulls():
    policy = compiled([{"expression": "true"}], auditAnnotations=[
        {"key": "who", "valueExpression": "request.userInfo.username"},
        {"key": "none", "valueExpression": "null"}])
    assert evaluate(policy, activation({})) == ([], {"who": "alice"})


def test_compile_errors_are_configuration_errors():
    assert "undeclared reference to 'nope'" in compile_policy({"spec": {"validations": [
        {"expression": "nope(object)"}]}}).error
    assert compile_policy({"spec": {"paramKind": {"kind": "ConfigMap"},
                                    "validations": [{"expression": "true"}]}}).error.startswith("paramKind")
    with pytest.raises(cel.CompileError):
        cel.compile_expression("object.metadata.name.lowerAscii()", ("BOOL",))
    assert cel.compile_expression("'A,B'.lowerAscii().split(',') == ['a', 'b']").evaluate({}) is True


@pytest.mark.parametrize("source,expected", [
    ("[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3", True),
    ("object.replicas.sum()", 6),
    ("['a', 'b'].isSorted() && ![2, 1].isSorted()", True),
    ("'v1.25.3'.find('[0-9]+')", "1"),
    ("'a1b22c333'.findAll('[0-9]+')", ["1", "22", "333"]),
    ("'a1b22c333'.findAll('[0-9]+', 2)", ["1", "22"]),
    ("'Hello'.lowerAscii().startsWith('he')", True),
])
def test_kubernetes_library_functions(source, expected):
    assert cel.compile_expression(source).evaluate({"object": {"replicas": [1, 2, 3]}}) == expected


@pytest.mark.parametrize("source,fragment", [("[].min()", "min called on empty list"),
                                             ("'x'.find('(')", "unterminated subpattern")])
def test_kubernetes_library_errors_are_evaluation_errors(source, fragment):
    with pytest.raises(cel.EvaluationError) as err:
        cel.compile_expression(source).evaluate({})
    assert fragment in str(err.value)


def attrs(plural, obj=None, old=None, op="CREATE", name="a", namespace="n"):
    return Attributes(op, TYPES[plural], None, namespace if TYPES[plural].namespaced else "", name, obj, old,
                      {"username": "alice", "groups": ["g"]})


def test_selectors_for_namespaced_cluster_scoped_and_namespace_objects():
    match = {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}],
             "namespaceSelector": {"matchLabels": {"env": "prod"}}}
    prod = {"metadata": {"labels": {"env": "prod"}}}
    assert resources_match(match, attrs("configmaps", {}), prod)
    assert not resources_match(match, attrs("configmaps", {}), {"metadata": {}})
    assert resources_match(match, attrs("customresourcedefinitions", {}), None)  # cluster-scoped: not filtered
    assert resources_match(match, attrs("namespaces", prod), None)  # a Namespace matches by its own labels
    assert not resources_match(match, attrs("namespaces", {"metadata": {}}), None)
    on_old = {"resourceRules": match["resourceRules"], "objectSelector": {"matchLabels": {"k": "v"}}}
    assert resources_match(on_old, attrs("configmaps", {"metadata": {}}, {"metadata": {"labels": {"k": "v"}}},
                                         "UPDATE"), None)  # the old object may match
    assert request_object(attrs("customresourcedefinitions", {}))["namespace"] == ""


# The guard's rule, one row per case: (op, new label, old label, user, namespace pin, webhook mark, allowed).
SHARD, MARK, PIN, DRAIN = labels.SCHEDULED_SHARD_ID, labels.ASSIGNED_BY_WEBHOOK, labels.SHARD_ID, labels.DRAIN
GUARD_CASES = [
    ("UPDATE", "b", "a", "alice", None, None, False),    # a tenant's move
    ("UPDATE", "b", "a", "controller", None, None, True),
    ("UPDATE", "b", "a", "ops", None, None, True),       # a shard admin
    ("UPDATE", "b", "a", "alice", "b", "b", False),      # pin and mark do not make a move legal
    ("UPDATE", "a", "a", "alice", None, None, True),     # unchanged
    ("UPDATE", None, "a", "alice", None, None, True),    # removed: the webhook puts it back
    ("CREATE", None, None, "alice", None, None, True),
    ("CREATE", "b", None, "alice", None, None, False),   # a user's choice
    ("CREATE", "b", None, "alice", None, "c", False),    # a mark for another shard
    ("CREATE", "b", None, "alice", None, "b", True),     # the webhook's choice
    ("CREATE", "b", None, "alice", "b", None, True),     # the namespace's pin
    ("UPDATE", "b", None, "alice", None, "b", True),     # scheduling an app created while the master was down
    ("UPDATE", "b", "drain", "alice", None, "b", False),  # an app being drained waits for the scheduler
]


@pytest.mark.parametrize("op,new,old,user,pin,mark,allowed", GUARD_CASES)
def test_shard_label_guard(op, new, old, user, pin, mark, allowed):
    policy, _ = guard_objects(["controller"], ["shard-admins"])
    compiled_guard = compile_policy(policy)
    assert compiled_guard.error is None
    obj = {"metadata": {"name": "a", "labels": {SHARD: new} if new else {},
                        **({"annotations": {MARK: mark}} if mark else {})}}
    old_obj = None if op == "CREATE" else {"metadata": {"name": "a", "labels": (
        {DRAIN: "x"} if old == "drain" else {SHARD: old} if old else {})}}
    groups = ["shard-admins"] if user == "ops" else ["system:authenticated"]
    namespace = {"metadata": {"name": "n", **({"labels": {PIN: pin}} if pin else {})}}
    decisions, _ = evaluate(compiled_guard, activation(obj, old_obj, user, groups, namespace, op))
    assert (decisions == []) is allowed, decisions
    assert all(not d.error for d in decisions)


def _decisions_both_ways(compiled_policy, act):
    """The decisions with the variables written out, checked against evaluating every variable a validation
    reads: the same, except where one of those fails though the outcome does not need it (kube-apiserver's lazy
    variables skip it, as the written-out program does)."""
    written_out = evaluate(compiled_policy, act)
    one_by_one = evaluate(replace(compiled_policy, inlined={}), act)
    if written_out != one_by_one:
        assert any(d.error and "composited variable" in d.message for d in one_by_one[0]), one_by_one
        assert not any(d.error for d in written_out[0]), written_out
    return written_out


@pytest.mark.parametrize("op,new,old,user,pin,mark,allowed", GUARD_CASES)
def test_guards_decide_the_same_with_variables_written_out(op, new, old, user, pin, mark, allowed):
    """Both guards the chart installs run every validation with its variables written out, and decide as they do
    variable by variable."""
    guards = [compile_policy(guard_objects(["controller"], ["shard-admins"])[0]),
              compile_policy(author_guard.guard_objects(AuthConfig(), ["controller"], ["shard-admins"])[0])]
    for guard in guards:
        assert set(guard.inlined) == {v.program.source for v in guard.validations}
    annotations = {MARK: mark} if mark else {}
    if user == "alice" and op == "UPDATE":
        annotations["app.oam.dev/username"] = "alice"
    obj = {"metadata": {"name": "a", "labels": {SHARD: new} if new else {}, "annotations": annotations},
           "spec": {"components": [{"name": "c", "type": op.lower()}]}}
    old_obj = None if op == "CREATE" else {"metadata": {"name": "a", "labels": {SHARD: old} if old else {}},
                                           "spec": {}}
    groups = ["shard-admins"] if user == "ops" else ["system:authenticated"]
    namespace = {"metadata": {"name": "n", **({"labels": {PIN: pin}} if pin else {})}}
    seen = [_decisions_both_ways(guard, activation(obj, old_obj, user, groups, namespace, op))[0] for guard in guards]
    assert (seen[0] == []) is allowed


json_values = st.recursive(st.none() | st.booleans() | st.integers(min_value=-2**80, max_value=2**80) |
                           st.floats(allow_nan=True) | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                        max_size=3), max_leaves=10)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(["labels", "annotations", "name"]), json_values, max_size=3), json_values)
def test_odd_objects_get_decisions_never_exceptions(meta, spec):
    """Whatever a stored or submitted object holds, the guard answers with decisions (invariant 7)."""
    policy, _ = guard_objects(["controller"])
    decisions, _ = _decisions_both_ways(compile_policy(policy), activation({"metadata": meta, "spec": spec},
                                                                           {"metadata": meta}))
    assert all(d.deny for d in decisions)
