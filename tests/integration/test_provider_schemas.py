"""The providers' schemas (velashard/workflow/providers/*.cue) through real CUE: each file is valid CUE on its own,
and what vela/query's and vela/ql's actions accept (their `app` block, shared as `_#app` by two of them) is what
real CUE says, value for value and error for error, imported as step templates import it.

Needs Node.js and `npm ci --prefix tests/cue_oracle`; skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from typing import Iterator

import pytest

from tests.cue_oracle.oracle import Oracle, available, unavailable_reason
from velashard.cue.api import compile_sources
from velashard.cue.errors import CueError
from velashard.workflow.providers import PROVIDERS, packages

if os.environ.get("CI") and not available():  # CI installs the oracle: there a missing one is a failure
    raise RuntimeError(f"real CUE is required in CI: {unavailable_reason()}")
pytestmark = pytest.mark.skipif(not available(), reason=unavailable_reason() if not available() else "")

LISTED, LIVE, ENDPOINTS = "#ListAppliedResources", "#ListResourcesInApp", "#CollectServiceEndpoints"
# (the app as a template gives it, the actions that refuse it)
APPS = [
    ('{name: "a", namespace: "n"}', set()),
    ('{name: "a", namespace: "n", filter: {cluster: "local", clusterNamespace: "ns", components: ["c"], '
     'kind: "Deployment", apiVersion: "apps/v1"}}', {ENDPOINTS}),  # endpoints are of Services and Ingresses
    ('{name: "a", namespace: "n", filter: {components: ["c"]}}', set()),
    ('{name: "a", namespace: "n", filter: {foo: 1}}', {LISTED, LIVE, ENDPOINTS}),  # the filter is closed
    ('{name: "a", namespace: "n", extra: {x: 1}}', set()),  # the app is not
    ('{name: "a", namespace: "n", withStatus: true}', set()),
    ('{name: "a", namespace: "n", withStatus: "yes"}', {LIVE}),
    ('{name: "a", namespace: "n", withTree: false}', {ENDPOINTS}),
    ('{name: 1, namespace: "n"}', {LISTED, LIVE, ENDPOINTS}),
    ('{namespace: "n"}', {LISTED, LIVE, ENDPOINTS}),
    ('{name: "a", namespace: "n", filter: {components: "c"}}', {LISTED, LIVE, ENDPOINTS}),
    ("3", {LISTED, LIVE, ENDPOINTS}),
]
PACKAGES = {"vela/query": "$params: app:", "vela/ql": "app:"}


@pytest.fixture(scope="module")
def oracle() -> Iterator[Oracle]:
    with Oracle() as o:
        yield o


def _schema(path: str) -> str:
    return resources.files("velashard.workflow.providers").joinpath(path.rpartition("/")[2] + ".cue").read_text()


def test_every_schema_is_valid_cue_to_real_cue(oracle: Oracle) -> None:
    for provider in PROVIDERS:
        answer = oracle.run({"schema.cue": provider.schema}, ["vet", "schema.cue"])
        assert answer["code"] == 0, f"{provider.path}: {answer['stderr']}"


@pytest.mark.parametrize("path", sorted(PACKAGES))
def test_the_query_actions_accept_what_real_cue_accepts(oracle: Oracle, path: str) -> None:
    """Real CUE evaluates the schema and the template's value in one file; velashard as a template imports it."""
    name, params = path.rpartition("/")[2], PACKAGES[path]
    accepted: dict[str, str] = {}  # label: the value, for one export by real CUE
    ours: dict[str, object] = {}
    for action in (LISTED, LIVE, ENDPOINTS):
        for i, (app, refused_by) in enumerate(APPS):
            label, value = f"x{action[1:]}{i}", f"{action} & {{{params} {app}}}"
            try:
                ours[label] = compile_sources({"t.cue": f'import "{path}"\n{label}: {name}.{value}\n'},
                                              packages()).evaluate().export()[label]
            except CueError as err:
                ours[label] = err
            if action in refused_by:
                real = oracle.export({"a.cue": f"{_schema(path)}\n{label}: {value}\n"})
                assert real["code"] != 0 and isinstance(ours[label], CueError), (label, app, real, ours[label])
            else:
                assert not isinstance(ours[label], CueError), (label, app, ours[label])
                accepted[label] = value
    program = "".join(f"{label}: {value}\n" for label, value in accepted.items())
    real = oracle.export({"a.cue": f"{_schema(path)}\n{program}"})
    assert real["code"] == 0, real["stderr"]
    assert json.loads(real["stdout"]) == {label: ours[label] for label in accepted}
