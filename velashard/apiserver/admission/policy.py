"""ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1) as kube-apiserver runs it.

Checking policies and bindings when they are written (expressions compile, fields valid), matching a
request (matchConstraints, then each binding's matchResources), compiling a policy once per
generation, and turning its validations into decisions: Deny (422 Invalid with Kubernetes' message),
Warn (a `Warning` response header) and Audit (an audit annotation). paramKind and paramRef are not
supported and are refused when written, with a message that says so.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from velashard.apiserver import errors
from velashard.apiserver.admission import cel
from velashard.apiserver.admission.attributes import Attributes, rule_matches
from velashard.apiserver.ids import new_uid
from velashard.apiserver.storage.selectors import SelectorError, label_selector_from_dict, stored_label_selector
from velashard.apiserver.storage.store import Store
from velashard.apiserver.storage.validation import Cause

log = logging.getLogger("velashard.apiserver.admission.policy")

GROUP = "admissionregistration.k8s.io"
POLICIES = (GROUP, "validatingadmissionpolicies")
BINDINGS = (GROUP, "validatingadmissionpolicybindings")
FAILURE_ANNOTATION = "validation.policy.admission.k8s.io/validation_failure"
_REASON_CODES = {"Unauthorized": 401, "Forbidden": 403, "Invalid": 422, "RequestEntityTooLarge": 413}
_OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT", "*")
_ACTIONS = ("Deny", "Warn", "Audit")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_QUALIFIED_NAME = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                             r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_MAX_MESSAGE = 5 * 1024
_MAX_ANNOTATION_VALUE = 10 * 1024
NOT_SUPPORTED = "is not supported by this API server (policies take no parameters here)"


# --- defaults and checks when a policy or binding is written ---------------------------------------

def _default_match(match: Any) -> None:
    if not isinstance(match, dict):
        return
    match.setdefault("matchPolicy", "Equivalent")
    match.setdefault("namespaceSelector", {})
    match.setdefault("objectSelector", {})
    for key in ("resourceRules", "excludeResourceRules"):
        for rule in match.get(key) or []:
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")


def apply_defaults(kind: str, obj: dict[str, Any]) -> None:
    """kube-apiserver's defaults for policies and bindings (what `kubectl get -o yaml` shows)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    if kind == "ValidatingAdmissionPolicy":
        spec.setdefault("failurePolicy", "Fail")
        _default_match(spec.get("matchConstraints"))
    elif kind == "ValidatingAdmissionPolicyBinding":
        _default_match(spec.get("matchResources"))


def _spec(obj: dict[str, Any], causes: list[Cause]) -> dict[str, Any]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        causes.append(Cause("spec", "Required value", "FieldValueRequired"))
        return {}
    return spec


def _check_expression(path: str, source: Any, returns: tuple[str, ...], causes: list[Cause],
                      variables: tuple[str, ...] | None = ()) -> None:
    if not isinstance(source, str) or not source.strip():
        causes.append(Cause(path, "Required value", "FieldValueRequired"))
        return
    try:
        cel.compile_expression(source, returns, variables)
    except cel.CompileError as err:
        causes.append(Cause(path, f"Invalid value: {json.dumps(source)}: {err}"))


def _check_selector(path: str, selector: Any, causes: list[Cause]) -> None:
    try:
        label_selector_from_dict(selector)
    except SelectorError as err:
        causes.append(Cause(path, f"Invalid value: {json.dumps(selector)}: {err}"))


def _check_match_resources(path: str, match: Any, causes: list[Cause], rules_required: bool) -> None:
    if not isinstance(match, dict):
        causes.append(Cause(path, "Required value", "FieldValueRequired"))
        return
    for key in ("resourceRules", "excludeResourceRules"):
        rules = match.get(key)
        if rules is None:
            if key == "resourceRules" and rules_required:
                causes.append(Cause(f"{path}.resourceRules", "Required value", "FieldValueRequired"))
            continue
        if not isinstance(rules, list) or (key == "resourceRules" and rules_required and not rules):
            causes.append(Cause(f"{path}.{key}", "Required value: must be a non-empty list", "FieldValueRequired"))
            continue
        for i, rule in enumerate(rules):
            where = f"{path}.{key}[{i}]"
            if not isinstance(rule, dict):
                causes.append(Cause(where, "Invalid value: must be an object"))
                continue
            for part in ("operations", "apiGroups", "apiVersions", "resources"):
                if not isinstance(rule.get(part), list) or not rule[part]:
                    causes.append(Cause(f"{where}.{part}", "Required value", "FieldValueRequired"))
            for op in rule.get("operations") or []:
                if op not in _OPERATIONS:
                    causes.append(Cause(f"{where}.operations", f'Unsupported value: {json.dumps(op)}: supported '
                                        f'values: {", ".join(json.dumps(o) for o in _OPERATIONS)}',
                                        "FieldValueNotSupported"))
            if rule.get("scope", "*") not in ("*", "Cluster", "Namespaced"):
                causes.append(Cause(f"{where}.scope", f'Unsupported value: {json.dumps(rule["scope"])}: supported '
                                    'values: "*", "Cluster", "Namespaced"', "FieldValueNotSupported"))
    if match.get("matchPolicy", "Equivalent") not in ("Equivalent", "Exact"):
        causes.append(Cause(f"{path}.matchPolicy", f'Unsupported value: {json.dumps(match["matchPolicy"])}: '
                            'supported values: "Equivalent", "Exact"', "FieldValueNotSupported"))
    _check_selector(f"{path}.namespaceSelector", match.get("namespaceSelector"), causes)
    _check_selector(f"{path}.objectSelector", match.get("objectSelector"), causes)


def status_update(policy: dict[str, Any]) -> dict[str, Any] | None:
    """The status kube-apiserver's policy controller would write once it has seen this generation (there
    is no type checking against schemas here, so typeChecking stays empty), or None when it is current."""
    generation = (policy.get("metadata") or {}).get("generation")
    status = policy.get("status") or {}
    if generation is None or status.get("observedGeneration") == generation:
        return None
    return {"observedGeneration": generation, "typeChecking": {}}


def validate_policy(obj: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    spec = _spec(obj, causes)
    if not spec:
        return causes
    if spec.get("paramKind") is not None:
        causes.append(Cause("spec.paramKind", f"Forbidden: paramKind {NOT_SUPPORTED}", "FieldValueForbidden"))
    if spec.get("failurePolicy", "Fail") not in ("Fail", "Ignore"):
        causes.append(Cause("spec.failurePolicy", f'Unsupported value: {json.dumps(spec["failurePolicy"])}: '
                            'supported values: "Fail", "Ignore"', "FieldValueNotSupported"))
    _check_match_resources("spec.matchConstraints", spec.get("matchConstraints"), causes, rules_required=True)
    declared: list[str] = []
    for i, var in enumerate(_list(spec, "variables", causes)):
        name = var.get("name") if isinstance(var, dict) else None
        if not isinstance(name, str) or not _IDENTIFIER.match(name):
            causes.append(Cause(f"spec.variables[{i}].name", f"Invalid value: {json.dumps(name)}: must be a valid "
                                "CEL identifier"))
        elif name in declared:
            causes.append(Cause(f"spec.variables[{i}].name", f"Duplicate value: {json.dumps(name)}",
                                "FieldValueDuplicate"))
        _check_expression(f"spec.variables[{i}].expression", (var or {}).get("expression") if isinstance(var, dict)
                          else None, (), causes, tuple(declared))
        if isinstance(name, str):
            declared.append(name)
    names: set[str] = set()
    for i, cond in enumerate(_list(spec, "matchConditions", causes)):
        name = cond.get("name") if isinstance(cond, dict) else None
        if not isinstance(name, str) or not _QUALIFIED_NAME.match(name):
            causes.append(Cause(f"spec.matchConditions[{i}].name", f"Invalid value: {json.dumps(name)}: must be a "
                                "qualified name"))
        elif name in names:
            causes.append(Cause(f"spec.matchConditions[{i}].name", f"Duplicate value: {json.dumps(name)}",
                                "FieldValueDuplicate"))
        names.add(str(name))
        _check_expression(f"spec.matchConditions[{i}].expression", cond.get("expression") if isinstance(cond, dict)
                          else None, ("BOOL",), causes, tuple(declared))
    validations = _list(spec, "validations", causes)
    annotations = _list(spec, "auditAnnotations", causes)
    if not validations and not annotations:
        causes.append(Cause("spec.validations", "Required value: validations or auditAnnotations must contain at "
                            "least one item", "FieldValueRequired"))
    for i, v in enumerate(validations):
        where = f"spec.validations[{i}]"
        if not isinstance(v, dict):
            causes.append(Cause(where, "Invalid value: must be an object"))
            continue
        _check_expression(f"{where}.expression", v.get("expression"), ("BOOL",), causes, tuple(declared))
        if v.get("messageExpression") is not None:
            _check_expression(f"{where}.messageExpression", v["messageExpression"], ("STRING",), causes,
                              tuple(declared))
        message = v.get("message")
        if message is not None and (not isinstance(message, str) or "\n" in message):
            causes.append(Cause(f"{where}.message", f"Invalid value: {json.dumps(message)}: message must not "
                                "contain line breaks"))
        if v.get("reason") is not None and v["reason"] not in _REASON_CODES:
            causes.append(Cause(f"{where}.reason", f'Unsupported value: {json.dumps(v["reason"])}: supported values: '
                                + ", ".join(json.dumps(r) for r in _REASON_CODES), "FieldValueNotSupported"))
    keys: set[str] = set()
    for i, a in enumerate(annotations):
        where = f"spec.auditAnnotations[{i}]"
        key = a.get("key") if isinstance(a, dict) else None
        if not isinstance(key, str) or not key or len(key) > 63:
            causes.append(Cause(f"{where}.key", f"Invalid value: {json.dumps(key)}: must be a non-empty name of at "
                                "most 63 characters"))
        elif key in keys:
            causes.append(Cause(f"{where}.key", f"Duplicate value: {json.dumps(key)}", "FieldValueDuplicate"))
        keys.add(str(key))
        _check_expression(f"{where}.valueExpression", a.get("valueExpression") if isinstance(a, dict) else None,
                          ("STRING", "NULL"), causes, tuple(declared))
    return causes


def validate_binding(obj: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    spec = _spec(obj, causes)
    if not spec:
        return causes
    if not isinstance(spec.get("policyName"), str) or not spec["policyName"]:
        causes.append(Cause("spec.policyName", "Required value", "FieldValueRequired"))
    if spec.get("paramRef") is not None:
        causes.append(Cause("spec.paramRef", f"Forbidden: paramRef {NOT_SUPPORTED}", "FieldValueForbidden"))
    actions = spec.get("validationActions")
    if not isinstance(actions, list) or not actions:
        causes.append(Cause("spec.validationActions", "Required value: at least one validation action is required",
                            "FieldValueRequired"))
    else:
        for i, action in enumerate(actions):
            if action not in _ACTIONS:
                causes.append(Cause(f"spec.validationActions[{i}]", f'Unsupported value: {json.dumps(action)}: '
                                    'supported values: "Audit", "Deny", "Warn"', "FieldValueNotSupported"))
            elif action in actions[:i]:
                causes.append(Cause(f"spec.validationActions[{i}]", f"Duplicate value: {json.dumps(action)}",
                                    "FieldValueDuplicate"))
        if "Deny" in actions and "Warn" in actions:
            causes.append(Cause("spec.validationActions", "Invalid value: " + json.dumps(actions) +
                                ": must not contain both Deny and Warn (repeating the same validation failure "
                                "information in the API response and headers serves no purpose)"))
    if spec.get("matchResources") is not None:
        _check_match_resources("spec.matchResources", spec["matchResources"], causes, rules_required=False)
    return causes


def _list(spec: dict[str, Any], key: str, causes: list[Cause]) -> list[Any]:
    value = spec.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        causes.append(Cause(f"spec.{key}", f"Invalid value: {json.dumps(value)}: must be a list"))
        return []
    return value


# --- compiled policies -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Validation:
    program: cel.Program
    message: str
    message_program: cel.Program | None
    reason: str


@dataclass(frozen=True)
class CompiledPolicy:
    """Everything a request needs from one policy generation; `error` is a configuration error."""

    failure_policy: str = "Fail"
    variables: tuple[tuple[str, cel.Program], ...] = ()
    match_conditions: tuple[tuple[str, cel.Program], ...] = ()
    validations: tuple[Validation, ...] = ()
    audit_annotations: tuple[tuple[str, cel.Program], ...] = ()
    error: str | None = None
    # By source, the programs that read variables with those variables written out (cel.inline_variables): one
    # evaluation over the request, whose && and || skip what the outcome does not need.
    inlined: dict[str, cel.Program] = field(default_factory=dict, hash=False, compare=False)


def compile_policy(policy: dict[str, Any]) -> CompiledPolicy:
    spec = policy.get("spec") or {}
    failure = spec.get("failurePolicy") or "Fail"
    if spec.get("paramKind") is not None:
        return CompiledPolicy(failure, error=f"paramKind {NOT_SUPPORTED}")
    try:
        declared: list[str] = []
        variables = []
        for var in spec.get("variables") or []:
            variables.append((var["name"], cel.compile_expression(var["expression"], (), tuple(declared))))
            declared.append(var["name"])
        known = tuple(declared)
        conditions = tuple((c["name"], cel.compile_expression(c["expression"], ("BOOL",), known))
                           for c in spec.get("matchConditions") or [])
        validations = tuple(Validation(cel.compile_expression(v["expression"], ("BOOL",), known),
                                       (v.get("message") or "").strip(),
                                       cel.compile_expression(v["messageExpression"], ("STRING",), known)
                                       if v.get("messageExpression") else None,
                                       v.get("reason") or "Invalid")
                            for v in spec.get("validations") or [])
        annotations = tuple((a["key"], cel.compile_expression(a["valueExpression"], ("STRING", "NULL"), known))
                            for a in spec.get("auditAnnotations") or [])
    except (cel.CompileError, KeyError, TypeError) as err:
        return CompiledPolicy(failure, error=str(err) if isinstance(err, cel.CompileError) else f"invalid spec: {err}")
    programs = [(p, ("BOOL",)) for _, p in conditions] + [(v.program, ("BOOL",)) for v in validations] + [
        (p, ("STRING", "NULL")) for _, p in annotations]
    return CompiledPolicy(failure, tuple(variables), conditions, validations, annotations,
                          inlined=_inlined(spec.get("variables") or [], programs))


def _inlined(variables: list[dict[str, Any]], programs: list[tuple[cel.Program, tuple[str, ...]]]
             ) -> dict[str, cel.Program]:
    expansions: dict[str, str] = {}
    for var in variables:
        expanded = cel.inline_variables(var["expression"], expansions)
        if expanded is not None:
            expansions[var["name"]] = expanded
    out: dict[str, cel.Program] = {}
    for program, returns in programs:
        if not program.variables_used or program.source in out:
            continue
        source = cel.inline_variables(program.source, expansions)
        if source is None:
            continue
        try:
            out[program.source] = cel.compile_expression(source, returns, ())
        except cel.CompileError:
            continue  # e.g. a macro that needs a field selection where the variable stood: evaluated as written
    return out


# --- matching --------------------------------------------------------------------------------------

def _named_rule_matches(rule: dict[str, Any], attrs: Attributes) -> bool:
    names = rule.get("resourceNames") or []
    return rule_matches(rule, attrs) and (not names or attrs.name in names)


def _labels(obj: dict[str, Any] | None) -> dict[str, str]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def resources_match(match: dict[str, Any], attrs: Attributes, namespace: dict[str, Any] | None) -> bool:
    """matchConstraints or a binding's matchResources against a request (selectors, rules, exclusions)."""
    ns_selector = stored_label_selector(match.get("namespaceSelector"))
    if not ns_selector.empty:
        if attrs.rt.namespaced:
            if not ns_selector.matches(_labels(namespace)):
                return False
        elif attrs.rt.group == "" and attrs.rt.kind == "Namespace":
            if not ns_selector.matches(_labels(attrs.obj if attrs.obj is not None else attrs.old)):
                return False
    obj_selector = stored_label_selector(match.get("objectSelector"))
    if not obj_selector.empty:
        # As for webhooks: on UPDATE the old or the new object may match; a missing one never does.
        candidates = [o for o in (attrs.obj, attrs.old) if o is not None]
        if not any(obj_selector.matches(_labels(o)) for o in candidates):
            return False
    if any(_named_rule_matches(rule, attrs) for rule in match.get("excludeResourceRules") or []):
        return False
    rules = match.get("resourceRules") or []
    return not rules or any(_named_rule_matches(rule, attrs) for rule in rules)


# --- what CEL sees ---------------------------------------------------------------------------------

def request_object(attrs: Attributes) -> dict[str, Any]:
    """`request`: the AdmissionRequest's fields, every one present (absent ones as zero values)."""
    rt = attrs.rt
    kind = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    resource = {"group": rt.group, "version": rt.version, "resource": rt.plural}
    user = attrs.user or {}
    return {
        "uid": new_uid(), "kind": kind, "resource": resource, "subResource": attrs.subresource or "",
        "requestKind": kind, "requestResource": resource, "requestSubResource": attrs.subresource or "",
        "name": attrs.name or "", "namespace": attrs.namespace or "", "operation": attrs.operation,
        "userInfo": {"username": user.get("username", ""), "uid": user.get("uid", ""),
                     "groups": list(user.get("groups") or []), "extra": dict(user.get("extra") or {})},
        "dryRun": bool(attrs.dry_run),
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions",
                                                             "DELETE": "DeleteOptions"}.get(attrs.operation, "")},
    }


def namespace_object(namespace: dict[str, Any] | None) -> dict[str, Any] | None:
    """`namespaceObject`: the request's Namespace with the metadata kube-apiserver exposes, spec and status."""
    if namespace is None:
        return None
    meta = namespace.get("metadata") or {}
    kept = {k: meta[k] for k in ("name", "generateName", "uid", "resourceVersion", "labels", "annotations",
                                 "creationTimestamp", "deletionTimestamp", "finalizers") if meta.get(k)}
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Namespace", "metadata": kept}
    for key in ("spec", "status"):
        if namespace.get(key):
            out[key] = namespace[key]
    return out


class _Evaluation:
    """One policy's expressions over one request. A program that reads variables runs first with them written
    out (`CompiledPolicy.inlined`), so that only what its outcome needs is evaluated, as kube-apiserver's lazy
    variables are; where that fails, the variables are evaluated one by one (each once) for kube-apiserver's
    message naming the variable that failed."""

    def __init__(self, compiled: CompiledPolicy, activation: dict[str, Any], prepared: Any = None):
        self._compiled = compiled
        self._activation = activation
        self._values: dict[str, Any] = {}
        self._errors: dict[str, str] = {}
        self._variables = dict(compiled.variables)
        activation["variables"] = self._values
        # The activation as CEL values, and the variables it holds: reused by every program that reads no
        # variable computed since (a policy's variables and validations read the same objects). `prepared`, the
        # request's without variables, is shared by the policies of one request.
        self._prepared: Any = prepared
        self._prepared_with: frozenset[str] = frozenset()
        self._base: Any = prepared

    def _cel_activation(self, program: cel.Program) -> Any:
        if self._prepared is None or not program.variables_used <= self._prepared_with:
            self._prepared = cel.prepare(self._activation)
            self._prepared_with = frozenset(self._values)
        return self._prepared

    def _resolve(self, names: frozenset[str]) -> None:
        for name, program in self._compiled.variables:
            if name in self._values or name in self._errors or not self._needs(name, names):
                continue
            try:
                self._values[name] = program.evaluate(self._cel_activation(program))
            except cel.EvaluationError as err:
                self._errors[name] = str(err)

    def _needs(self, name: str, names: frozenset[str]) -> bool:
        seen, todo = set(), list(names)
        while todo:
            current = todo.pop()
            if current == name:
                return True
            if current in seen or current not in self._variables:
                continue
            seen.add(current)
            todo.extend(self._variables[current].variables_used)
        return False

    def run(self, program: cel.Program) -> Any:
        """The expression's value; raises EvaluationError with kube-apiserver's wording."""
        inlined = self._compiled.inlined.get(program.source) if program.variables_used else None
        if inlined is not None:
            try:
                if self._base is None:
                    self._base = cel.prepare({k: v for k, v in self._activation.items() if k != "variables"})
                return inlined.evaluate(self._base)
            except cel.EvaluationError:
                pass  # evaluated again below, variable by variable, for kube-apiserver's message
        if program.variables_used:
            self._resolve(program.variables_used)
            for name in sorted(program.variables_used):
                if name in self._errors:
                    raise cel.EvaluationError(f"expression '{program.source}' resulted in error: composited "
                                              f"variable \"{name}\" fails to evaluate: {self._errors[name]}")
        try:
            return program.evaluate(self._cel_activation(program))
        except cel.EvaluationError as err:
            raise cel.EvaluationError(f"expression '{program.source}' resulted in error: {err}")


@dataclass
class Decision:
    deny: bool
    message: str
    reason: str = "Invalid"
    error: bool = False


def evaluate(compiled: CompiledPolicy, activation: dict[str, Any], prepared: Any = None
             ) -> tuple[list[Decision], dict[str, str]]:
    """(decisions of the validations, audit annotations) for one policy and binding; [] when matchConditions
    exclude the request. Errors follow the failure policy (Ignore admits). `prepared`: `activation` as CEL values
    (cel.prepare), when the caller has it."""
    ignore = compiled.failure_policy == "Ignore"
    run = _Evaluation(compiled, dict(activation), prepared)
    errors_seen: list[str] = []
    for _name, program in compiled.match_conditions:
        try:
            if run.run(program) is False:
                return [], {}
        except cel.EvaluationError as err:
            errors_seen.append(str(err))
    if errors_seen:
        return ([] if ignore else [Decision(True, errors_seen[0], error=True)]), {}
    decisions = []
    for v in compiled.validations:
        try:
            ok = run.run(v.program)
        except cel.EvaluationError as err:
            if not ignore:
                decisions.append(Decision(True, str(err), error=True))
            continue
        if ok is True:
            continue
        message = ""
        if v.message_program is not None:
            try:
                value = run.run(v.message_program)
            except cel.EvaluationError as err:
                log.info("messageExpression failed err=%s", err)
                value = None
            if isinstance(value, str):
                message = value.strip()
                if len(message) > _MAX_MESSAGE or "\n" in message:
                    message = ""
        message = message or v.message or f"failed expression: {v.program.source.strip()}"
        decisions.append(Decision(True, message, v.reason))
    annotations: dict[str, str] = {}
    for key, program in compiled.audit_annotations:
        try:
            value = run.run(program)
        except cel.EvaluationError as err:
            if not ignore:
                decisions.append(Decision(True, str(err), error=True))
            continue
        if isinstance(value, str) and value.strip():
            annotations[key] = value.strip()[:_MAX_ANNOTATION_VALUE]
        elif value is not None and not isinstance(value, str):
            if not ignore:
                decisions.append(Decision(True, f"valueExpression '{program.source}' resulted in unsupported return "
                                                f"type: {type(value).__name__}. Return type must be either string "
                                                f"or null.", error=True))
    return decisions, annotations


# --- the admission step ----------------------------------------------------------------------------

@dataclass
class _Denial:
    policy: str
    binding: str | None
    message: str
    reason: str = "Invalid"


@dataclass
class PolicyAdmission:
    """Runs the stored policies on each request; compiled policies are kept per (uid, generation)."""

    store: Store
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _compiled: dict[tuple[str, Any], CompiledPolicy] = field(default_factory=dict)

    def active(self) -> bool:
        return bool(self.store.snapshot(POLICIES))

    def _compile(self, policy: dict[str, Any]) -> CompiledPolicy:
        meta = policy.get("metadata") or {}
        key = (meta.get("uid", ""), meta.get("generation") or meta.get("resourceVersion"))
        with self._lock:
            found = self._compiled.get(key)
        if found is None:
            found = compile_policy(policy)
            with self._lock:
                self._compiled[key] = found
        return found

    def _forget_others(self, policies: tuple[dict[str, Any], ...]) -> None:
        live = {((p.get("metadata") or {}).get("uid", ""), (p.get("metadata") or {}).get("generation")
                 or (p.get("metadata") or {}).get("resourceVersion")) for p in policies}
        with self._lock:
            for key in [k for k in self._compiled if k not in live]:
                del self._compiled[key]

    def validate(self, attrs: Attributes) -> None:
        """Raise the first denial (422 unless the validation names another reason); record warnings and
        audit annotations on `attrs`."""
        if attrs.rt.group == GROUP:
            return  # admission configuration is exempt, so that a broken policy can always be fixed
        policies = self.store.snapshot(POLICIES)  # cluster-scoped: in name order
        if not policies:
            return
        if len(self._compiled) > 2 * len(policies):
            self._forget_others(policies)
        bindings = self.store.snapshot(BINDINGS)
        namespace = self.store.get(("", "namespaces"), ("", attrs.namespace)) \
            if attrs.rt.namespaced and attrs.namespace else None
        denials: list[_Denial] = []
        activation: dict[str, Any] | None = None
        prepared: Any = None
        for policy in policies:
            name = policy["metadata"]["name"]
            spec = policy.get("spec") or {}
            try:
                if not resources_match(spec.get("matchConstraints") or {}, attrs, namespace):
                    continue
            except SelectorError as err:
                self._config_error(denials, spec, name, None, str(err))
                continue
            compiled = self._compile(policy)
            if compiled.error:
                self._config_error(denials, spec, name, None, compiled.error)
                continue
            for binding in bindings:
                bspec = binding.get("spec") or {}
                if bspec.get("policyName") != name:
                    continue
                bname = binding["metadata"]["name"]
                try:
                    if bspec.get("matchResources") is not None and not resources_match(
                            bspec["matchResources"], attrs, namespace):
                        continue
                except SelectorError as err:
                    self._config_error(denials, spec, name, bname, str(err))
                    continue
                if bspec.get("paramRef") is not None:
                    self._config_error(denials, spec, name, bname, f"paramRef {NOT_SUPPORTED}")
                    continue
                if activation is None:
                    activation = {"object": attrs.obj, "oldObject": attrs.old, "request": request_object(attrs),
                                  "params": None, "namespaceObject": namespace_object(namespace)}
                    try:
                        prepared = cel.prepare(activation)
                    except cel.EvaluationError:
                        prepared = None  # each program reports it in its own words
                decisions, annotations = evaluate(compiled, activation, prepared)
                for key, value in annotations.items():
                    attrs.annotations[f"{name}/{key}"] = value
                for index, decision in enumerate(decisions):
                    self._act(attrs, denials, name, bname, bspec.get("validationActions") or [], index, decision)
        if denials:
            raise _denial_error(attrs, denials[0])

    @staticmethod
    def _config_error(denials: list[_Denial], spec: dict[str, Any], policy: str, binding: str | None,
                      err: str) -> None:
        if spec.get("failurePolicy", "Fail") == "Ignore":
            return
        what = "binding" if binding else "policy"
        denials.append(_Denial(policy, binding, f"failed to configure {what}: {err}"))

    @staticmethod
    def _act(attrs: Attributes, denials: list[_Denial], policy: str, binding: str, actions: list[str], index: int,
             decision: Decision) -> None:
        for action in actions:
            if action == "Deny":
                denials.append(_Denial(policy, binding, decision.message, decision.reason))
            elif action == "Warn":
                attrs.warnings.append(f"Validation failed for ValidatingAdmissionPolicy '{policy}' with binding "
                                      f"'{binding}': {decision.message}")
            elif action == "Audit":
                attrs.annotations[FAILURE_ANNOTATION] = json.dumps([{
                    "message": decision.message, "policy": policy, "binding": binding, "expressionIndex": index,
                    "validationActions": actions}], separators=(",", ":"))


def _denial_error(attrs: Attributes, denial: _Denial) -> errors.APIError:
    """kube-apiserver's answer: admission.NewForbidden's message, with the validation's reason and code."""
    if denial.binding is not None:
        text = (f"ValidatingAdmissionPolicy '{denial.policy}' with binding '{denial.binding}' denied request: "
                f"{denial.message}")
    else:
        text = f"ValidatingAdmissionPolicy '{denial.policy}' denied request: {denial.message}"
    rt = attrs.rt
    resource = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
    message = f'{resource} "{attrs.name}" is forbidden: {text}' if attrs.name else f"{resource} is forbidden: {text}"
    details: dict[str, Any] = {"kind": rt.plural, "causes": [{"message": text}]}
    if rt.group:
        details["group"] = rt.group
    if attrs.name:
        details["name"] = attrs.name
    return errors.APIError(_REASON_CODES.get(denial.reason, 422), denial.reason, message, details)
