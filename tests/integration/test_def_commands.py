"""`velashard def apply|get|list|edit|del` against the embedded API server, and the TemplateValid condition the
definition checker writes where no webhook refused a definition."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from velashard.apis.oam import COMPONENT_DEFINITIONS, TRAIT_DEFINITIONS
from velashard.apiserver.http.server import APIServer
from velashard.cli.main import main
from velashard.core.defstatus import DefinitionChecker
from velashard.core.install import install
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.manager import Manager
from tests.integration.helpers import eventually

TRAIT = """\
"replicas-of": {
	type: "trait"
	description: "Sets the replicas."
	attributes: appliesToWorkloads: ["deployments.apps"]
}
template: {
	patch: spec: replicas: parameter.count
	parameter: count: *2 | int
}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    server = APIServer(port=0).start()
    kubeconfig = server.write_kubeconfig(str(tmp_path_factory.mktemp("defs") / "kubeconfig"))
    kube = KubeClient.from_kubeconfig(kubeconfig, shard_id="test")
    install(kube)
    manager = Manager(kube, "master")
    DefinitionChecker(manager)
    stop = threading.Event()
    thread = threading.Thread(target=manager.run, args=(stop,), daemon=True)
    thread.start()
    yield kubeconfig, kube
    stop.set()
    thread.join(15)
    server.stop()


def test_apply_get_list_edit_and_delete_a_definition(cluster, tmp_path, capsys, monkeypatch):
    kubeconfig, kube = cluster
    path = tmp_path / "replicas-of.cue"
    path.write_text(TRAIT)
    assert main(["def", "apply", str(path), "--kubeconfig", kubeconfig]) == 0
    assert "traitdefinition/replicas-of created" in capsys.readouterr().out
    stored = kube.get(TRAIT_DEFINITIONS, "replicas-of", "vela-system")
    assert "parameter: count: *2 | int" in stored["spec"]["schematic"]["cue"]["template"]
    assert main(["def", "get", "replicas-of", "--kubeconfig", kubeconfig]) == 0
    assert capsys.readouterr().out.startswith('"replicas-of": {')
    assert main(["def", "list", "-t", "trait", "--kubeconfig", kubeconfig]) == 0
    listed = capsys.readouterr().out
    assert "| replicas-of " in listed and "| scaler " in listed and "| webservice " not in listed
    # edit: the editor (a script here) changes the default; the change is applied
    editor = tmp_path / "editor.py"
    editor.write_text("import sys\np = sys.argv[1]\ns = open(p).read().replace('*2 | int', '*5 | int')\n"
                      "open(p, 'w').write(s)\n")
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    assert main(["def", "edit", "replicas-of", "--kubeconfig", kubeconfig]) == 0
    assert "traitdefinition/replicas-of updated" in capsys.readouterr().out
    assert "*5 | int" in kube.get(TRAIT_DEFINITIONS, "replicas-of", "vela-system")["spec"]["schematic"]["cue"][
        "template"]
    # an edit that breaks the template is refused, nothing applied
    editor.write_text("import sys\np = sys.argv[1]\ns = open(p).read().replace('*5 | int', '*5 | int +')\n"
                      "open(p, 'w').write(s)\n")
    assert main(["def", "edit", "replicas-of", "--kubeconfig", kubeconfig]) == 2
    err = capsys.readouterr().err
    assert "expected operand" in err and "nothing applied" in err, err
    assert main(["def", "del", "replicas-of", "-y", "--kubeconfig", kubeconfig]) == 0
    with pytest.raises(errors.NotFound):
        kube.get(TRAIT_DEFINITIONS, "replicas-of", "vela-system")
    assert main(["def", "del", "replicas-of", "-y", "--kubeconfig", kubeconfig]) == 2
    assert 'no definition named "replicas-of"' in capsys.readouterr().err


def test_a_broken_definition_written_without_a_webhook_says_so_in_its_status(cluster):
    _, kube = cluster
    kube.create(COMPONENT_DEFINITIONS, {
        "apiVersion": "core.oam.dev/v1beta1", "kind": "ComponentDefinition",
        "metadata": {"name": "half-done", "namespace": "vela-system"},
        "spec": {"schematic": {"cue": {"template": 'output: {\n\tapiVersion: "v1"\n\tkind: ConfigMap\n'}}}})

    def condition() -> dict | None:
        status = kube.get(COMPONENT_DEFINITIONS, "half-done", "vela-system").get("status") or {}
        return next((c for c in status.get("conditions") or [] if c["type"] == "TemplateValid"), None)

    found = eventually(condition, timeout=10)
    assert found["status"] == "False" and found["reason"] == "TemplateError"
    assert "line 4, column 1" in found["message"], found
    # the built-ins compile
    webservice = eventually(lambda: next((c for c in (kube.get(COMPONENT_DEFINITIONS, "webservice", "vela-system").get(
        "status") or {}).get("conditions") or [] if c["type"] == "TemplateValid"), None), timeout=10)
    assert webservice["status"] == "True"


def test_def_commands_without_a_cluster_exit_2(tmp_path, capsys):
    missing = os.path.join(tmp_path, "nope")
    assert main(["def", "list", "--kubeconfig", missing]) == 2
    assert "--builtin" in capsys.readouterr().err
