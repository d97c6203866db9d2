"""hack/cue_corpus_assemble.py reads definitions with velashard.cue's parser: the `vela def` split, the parameter
values it synthesizes and the feature census (expected values are what its former, separate CUE parser gave),
and a corpus from the built-in catalog whose every program compiles."""

from __future__ import annotations

import json
import pathlib

from hack import cue_corpus_assemble as asm
from velashard.cue import compile_sources

ROOT = pathlib.Path(__file__).resolve().parents[2]

TEMPLATE = '''
import "strings"
#Port: {port: int & >=1 & <=65535, name?: string, protocol: *"TCP" | "UDP"}
parameter: {
    image: string
    replicas: *1 | int & >0
    ports?: [...#Port]
    env?: [...{name: string, value?: string}]
    labels?: [string]: string
    type: *"emptyDir" | "pvc"
    if type == "pvc" {
        claimName: string
    }
    cpu?: =~"^[0-9]+m$"
    config?: string
}
_c: json.Unmarshal(parameter.config)
output: {kind: "Deployment", spec: replicas: parameter.replicas}
'''

DEF_FILE = '''import (
\t"strconv"
)

"my-worker": {
\ttype: "component"
\tattributes: {
\t\tworkload: definition: {apiVersion: "apps/v1", kind: "Deployment"}
\t\tstatus: healthPolicy: #"""
\t\t\tisHealth: context.output.status.readyReplicas == context.output.spec.replicas
\t\t\t"""#
\t}
}
template: {
\toutput: {
\t\tapiVersion: "apps/v1"
\t\tkind:       "Deployment"
\t\tspec: replicas: strconv.Atoi(parameter.replicas)
\t}
\tparameter: replicas: *"1" | string
}
'''


def decls(text: str) -> list:
    return asm.Source(text).tree.body.decls


def test_the_schema_gives_required_fields_in_min_and_every_field_in_full():
    assert asm.Schema(decls(TEMPLATE), "min").value() == {"image": "nginx:1.25"}
    assert asm.Schema(decls(TEMPLATE), "full").value() == {
        "claimName": "demo", "config": '{"title": "demo", "uid": "demo"}', "cpu": "500m",
        "env": [{"name": "demo", "value": "value1"}], "image": "nginx:1.25", "labels": {"app": "demo"},
        "ports": [{"name": "demo", "port": 8080, "protocol": "UDP"}], "replicas": 2, "type": "pvc"}


def test_the_census_names_the_features_a_template_uses():
    assert asm.features_of(TEMPLATE) == {
        "... (open list/struct)", "== comparison", 'bound =~"re"', "bound >=, <= ...",
        "comprehension in struct {for/if ...{}}", "conjunction &", "default *x", "definition #X:",
        "definition reference #X", "disjunction |", "hidden field _x:", "hidden reference _x", "if comprehension",
        'import "strings"', "optional field x?:", "pattern [string]: T"}


def test_a_vela_def_file_splits_into_imports_metadata_and_template(tmp_path):
    (tmp_path / "my-worker.cue").write_text(DEF_FILE)
    d = asm.read_definition(str(tmp_path / "my-worker.cue"), str(tmp_path))
    assert (d.name, d.kind, d.origin) == ("my-worker", "component", "cat")
    assert d.imports == 'import (\n\t"strconv"\n)'
    assert d.template.startswith("output: {\n\tapiVersion:")
    assert d.template.endswith('parameter: replicas: *"1" | string\n')
    assert d.status == {"healthPolicy": "isHealth: context.output.status.readyReplicas == "
                                        "context.output.spec.replicas"}
    assert d.metadata["attributes"]["workload"]["definition"]["kind"] == "Deployment"
    program = asm.assemble_program(d, {"replicas": "3"}, {"name": "web"})
    assert compile_sources({"case.cue": program}).evaluate().export("output")["spec"] == {"replicas": 3}


def test_a_corpus_of_the_built_in_catalog_compiles(tmp_path, capsys):
    out = tmp_path / "cases"
    assert asm.main(["--defs", str(ROOT / "velashard" / "definitions"), "--out", str(out),
                     "--examples", str(ROOT / "tests" / "integration" / "corpus")]) == 0
    summary = json.loads(capsys.readouterr().out)
    index = json.loads((out / "index.json").read_text())
    assert summary["cases"] == len(index) > 100 and not summary["schema_not_read"]
    assert {c["kind"] for c in index} >= {"component", "trait", "policy", "component-status"}
    for case in index:
        compile_sources({case["file"]: (out / case["file"]).read_text()})
