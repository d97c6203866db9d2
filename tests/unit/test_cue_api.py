"""velashard.cue as the controller uses it: compile once, evaluate many times (from many threads), clear
errors, and limits that keep any template from hanging the process or reaching outside it."""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from velashard.cue import CueError, compile_sources, export_files

TEMPLATE = """
output: {
	kind: "Deployment"
	metadata: name: context.name
	spec: {
		replicas: parameter.replicas
		template: spec: containers: [{name: context.name, image: parameter.image}]
	}
}
parameter: {image: string, replicas: *1 | int & >=0}
context: name: string
"""


def test_a_compiled_program_evaluates_many_times_with_different_data() -> None:
    program = compile_sources({"t.cue": TEMPLATE})
    a = program.evaluate({"parameter": {"image": "a:1"}, "context": {"name": "a"}}).export("output")
    b = program.evaluate({"parameter": {"image": "b:2", "replicas": 3}, "context": {"name": "b"}}).export("output")
    assert a["spec"] == {"replicas": 1, "template": {"spec": {"containers": [{"name": "a", "image": "a:1"}]}}}
    assert b["metadata"] == {"name": "b"} and b["spec"]["replicas"] == 3


def test_one_program_is_shared_by_threads() -> None:
    program = compile_sources({"t.cue": TEMPLATE})

    def render(i: int) -> tuple[int, dict]:
        data = {"parameter": {"image": f"img:{i}", "replicas": i}, "context": {"name": f"app-{i}"}}
        return i, program.evaluate(data).export("output")

    with ThreadPoolExecutor(8) as pool:
        for i, out in pool.map(render, range(200)):
            assert out["metadata"]["name"] == f"app-{i}" and out["spec"]["replicas"] == i
            assert out["spec"]["template"]["spec"]["containers"][0]["image"] == f"img:{i}"


def test_a_syntax_error_names_file_line_and_column() -> None:
    with pytest.raises(CueError) as err:
        compile_sources({"broken.cue": "a: 1\nb: {\n  c: ]\n}\n"})
    assert err.value.kind == "syntax"
    assert "broken.cue:3:6" in str(err.value)


def test_a_conflict_names_the_path_and_both_values() -> None:
    program = compile_sources({"t.cue": TEMPLATE})
    with pytest.raises(CueError) as err:
        program.evaluate({"parameter": {"image": "x", "replicas": "two"}, "context": {"name": "a"}}).export("output")
    assert err.value.kind == "conflict"
    assert err.value.path.startswith("parameter.replicas") or err.value.path.startswith("output.spec.replicas")
    assert '"two"' in str(err.value) and "int" in str(err.value)


def test_a_missing_parameter_is_incomplete_and_says_where() -> None:
    with pytest.raises(CueError) as err:
        compile_sources({"t.cue": TEMPLATE}).evaluate({"context": {"name": "a"}}).export("output")
    assert err.value.kind == "incomplete" and "image" in str(err.value)


@pytest.mark.parametrize("source, kind", [
    # a comprehension that would build a billion elements
    ("x: [for a in list.Range(0, 1000, 1) for b in list.Range(0, 1000, 1) for c in list.Range(0, 1000, 1) {1}]\n"
     'import "list"', "limit"),
    ('import "strings"\nx: strings.Repeat("0123456789", 1024 * 1024 * 2)', "limit"),
    ("a: b: a", "limit"),  # a structural cycle
    ('x: "a" * (1024 * 1024 * 64)', "limit"),
])
def test_limits_stop_runaway_templates_quickly(source: str, kind: str) -> None:
    if source.endswith('import "list"'):
        source = 'import "list"\n' + source[: -len('import "list"')]
    started = time.monotonic()
    with pytest.raises(CueError) as err:
        export_files({"t.cue": source})
    assert err.value.kind in (kind, "eval")
    assert "limit" in err.value.kind or "too" in str(err.value) or "longer" in str(err.value) \
        or "more than" in str(err.value)
    assert time.monotonic() - started < 30


def test_a_reference_cycle_is_an_error_not_a_hang() -> None:
    with pytest.raises(CueError):
        export_files({"t.cue": "a: b + 1\nb: a - 1\n"})


@pytest.mark.parametrize("package", ["tool/file", "tool/exec", "tool/http", "tool/os", "os"])
def test_nothing_in_a_template_reaches_files_processes_the_network_or_the_environment(package: str) -> None:
    with pytest.raises(CueError) as err:
        compile_sources({"t.cue": f'import "{package}"\nx: 1\n'})
    assert "not supported" in str(err.value)


def test_deeply_nested_input_is_refused_not_a_recursion_error() -> None:
    with pytest.raises(CueError):
        compile_sources({"t.cue": "a: " + "[" * 5000 + "]" * 5000})


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "velashard.cli.main", "cue", *args], input=stdin,
                          capture_output=True, text=True, timeout=60)


def test_cli_export_eval_vet_and_exit_codes(tmp_path) -> None:
    (tmp_path / "t.cue").write_text(TEMPLATE)
    (tmp_path / "p.yaml").write_text("image: nginx\nreplicas: 2\n")
    (tmp_path / "bad.yaml").write_text("image: nginx\nreplicas: -1\n")
    (tmp_path / "c.cue").write_text('context: name: "web"\n')
    ok = _cli("export", str(tmp_path / "t.cue"), "-l", "parameter", str(tmp_path / "p.yaml"),
              str(tmp_path / "c.cue"), "-e", "output.spec.replicas")
    assert (ok.returncode, ok.stdout) == (0, "2\n"), ok.stderr
    yaml_out = _cli("export", str(tmp_path / "t.cue"), str(tmp_path / "p.yaml"), "-l", "parameter",
                    str(tmp_path / "c.cue"), "-e", "output.metadata", "--out", "yaml")
    assert yaml_out.stdout == "name: web\n", yaml_out.stderr
    incomplete = _cli("export", str(tmp_path / "t.cue"), "-e", "output")
    assert incomplete.returncode == 1 and "incomplete" in incomplete.stderr
    assert "Traceback" not in incomplete.stderr
    evaluated = _cli("eval", str(tmp_path / "t.cue"))
    assert evaluated.returncode == 0 and "replicas: *1 | int & >=0" in evaluated.stdout
    assert _cli("vet", str(tmp_path / "t.cue"), str(tmp_path / "p.yaml"), "-l", "parameter").returncode == 0
    bad = _cli("vet", str(tmp_path / "t.cue"), str(tmp_path / "bad.yaml"), "-l", "parameter")
    assert bad.returncode == 1 and "replicas" in bad.stderr and "-1" in bad.stderr
    assert _cli("export").returncode == 2
    assert _cli("frobnicate", "x.cue").returncode == 2
    missing = _cli("export", str(tmp_path / "missing.cue"))
    assert missing.returncode == 1 and "cannot read" in missing.stderr


def test_data_embedded_in_a_definition_keeps_its_fields() -> None:
    # `{c}` under a definition, c from the data unified with the program (KubeVela's context.output): the
    # embedded fields are allowed, whichever order the fields are evaluated in.
    program = compile_sources({"a.cue": '''
#P: {
    _found: [for c in context.containers if c.name == "w" {c}]
    _start: *[] | [...string]
    if _found[0].args != _|_ {_start: _found[0].args}
    args: _start
}
p: x: [#P & {}]
context: _
'''})
    data = {"context": {"containers": [{"name": "w", "args": ["a"]}]}}
    assert program.evaluate(data).export("p", check=False) == {"x": [{"args": ["a"]}]}
    assert program.evaluate(data).export("p") == {"x": [{"args": ["a"]}]}


def test_data_becomes_values_only_where_evaluation_reaches() -> None:
    program = compile_sources({"t.cue": 'out: "\\(context.output.metadata.name): \\(parameter.n * 2)"\n'
                                        "parameter: n: int\ncontext: _\n"})
    live = {"metadata": {"name": "web"}, "spec": {"template": {"containers": [{"name": str(i)} for i in range(500)]}}}
    instance = program.evaluate({"context": {"output": live, "other": {"a": [1, 2]}}, "parameter": {"n": 21}})
    assert instance.export("out", check=False) == "web: 42"  # as rendering reads its outputs
    context = instance.root.arcs["context"]
    assert context.arcs["output"].arcs["spec"].arcs == {} and context.arcs["other"].arcs == {}
    assert live["spec"]["template"]["containers"][499] == {"name": "499"}  # read, never changed
    assert instance.export()["context"]["output"] == live  # a full export reaches everything
    # what is reached unifies as data always did: types, closedness and conflicts apply to it
    with pytest.raises(CueError) as err:
        program.evaluate({"parameter": {"n": "21"}}).export("parameter")
    assert "parameter.n" in str(err.value)


def test_labels_that_read_like_definitions_reach_callers_as_their_text():
    from velashard.cue import label_text
    program = compile_sources({"t.cue": '''
outputs: {"#a": {v: 1}, _b: {v: 2}, "_c": {v: 3}, d: {v: 4}}
steps: {"#run": {#do: "x"}, _hidden: {#do: "y"}}
'''})
    instance = program.evaluate()
    keys = instance.fields("outputs")
    assert keys == ["#a", "_c", "d"] and all(type(k) is str for k in keys)
    data = instance.export("outputs")
    assert data == {"#a": {"v": 1}, "_c": {"v": 3}, "d": {"v": 4}} and all(type(k) is str for k in data)
    # the walk to actions: the quoted field is a regular one, the hidden one is walked too; its keys, as text
    first = instance.find_task("#do")
    assert [label_text(k) for k in first] == ["steps", "#run"] and instance.string_at(first + ("#do",)) == "x"
    assert instance.find_task("#do", {first}) == ("steps", "_hidden")
    assert type(label_text(first[1])) is str and label_text(3) == "3"
    filled = program.evaluate(None, [(first + ("out",), 7)])
    assert filled.export('steps["#run"].out') == 7


def test_packages_written_in_cue_fills_and_the_walk_to_actions():
    from velashard.cue.api import compile_package
    pkg = compile_package("acme/ops", '''
#Get: {
	#do: "get"
	$params: {name: string, tries: *1 | int}
	$returns?: {...}
}
#Post: #Get & {#do: "get", $params: tries: 3}
''')
    program = compile_sources({"t.cue": '''
import "acme/ops"
first: ops.#Get & {$params: name: parameter.who}
_quiet: ops.#Post & {$params: name: first.$returns.greeting}
after: "said \\(_quiet.$returns.greeting)"
parameter: who: string
'''}, {"acme/ops": pkg})
    data = {"parameter": {"who": "ann"}}
    one = program.evaluate(data)
    assert one.find_task("#do") == ("first",)
    assert one.export_at(("first", "$params")) == {"name": "ann", "tries": 1}
    assert one.string_at(("first", "#do")) == "get"
    # the hidden action needs the first one's result: not concrete until it is filled back
    assert one.find_task("#do", {("first",)}) == ("_quiet",)
    with pytest.raises(CueError):
        one.export_at(("_quiet", "$params"))
    two = program.evaluate(data, [(("first", "$returns"), {"greeting": "hi ann"})])
    assert two.export_at(("_quiet", "$params")) == {"name": "hi ann", "tries": 3}
    three = program.evaluate(data, [(("first", "$returns"), {"greeting": "hi ann"}),
                                    (("_quiet", "$returns"), {"greeting": "bye"})])
    assert three.export("after") == "said bye" and three.error() is None
    assert three.find_task("#do", {("first",), ("_quiet",)}) is None
    clash = program.evaluate(data, [(("first", "$params", "name"), "bob")])
    assert "conflicting values" in str(clash.error())
    with pytest.raises(CueError, match='package "acme/other" is not supported'):
        compile_sources({"t.cue": 'import "acme/other"\nx: 1\n'}, {"acme/ops": pkg})


def test_a_packages_hidden_fields_are_its_own():
    from velashard.cue.api import compile_package
    pkg = compile_package("acme/ops", '_#who: {name: string, ...}\n#Get: {who: _#who}\n_n: 1\n')
    program = compile_sources({"t.cue": 'import "acme/ops"\nx: ops.#Get & {who: {name: "a", age: 3}}\n'},
                              {"acme/ops": pkg})
    assert program.evaluate().export() == {"x": {"who": {"name": "a", "age": 3}}}
    # as in real CUE, where an importer's ops._h is an undefined field
    for hidden in ("_#who", "_n"):
        program = compile_sources({"t.cue": f'import "acme/ops"\ny: ops.{hidden}\n'}, {"acme/ops": pkg})
        with pytest.raises(CueError, match=f"ops.{hidden} is not defined in package acme/ops"):
            program.evaluate().export()


def test_a_program_cache_compiles_a_text_once_and_remembers_an_error():
    from velashard.cue import ProgramCache
    from velashard.cue.api import compile_package
    cache = ProgramCache(maxsize=2)
    first = cache.program({"a.cue": "x: 1\n"})
    assert cache.program({"b.cue": "x: 1\n"}) is first  # the text is the key; names only label positions
    with pytest.raises(CueError) as broken:
        cache.program({"c.cue": "x: \n"})
    with pytest.raises(CueError) as again:
        cache.program({"c.cue": "x: \n"})
    assert again.value is broken.value and "c.cue" in str(again.value)  # remembered, not compiled again
    pkg = compile_package("acme/p", "y: 2\n")
    with_package = cache.program({"a.cue": "x: 1\n"}, {"acme/p": pkg})
    assert with_package is not first and with_package.packages == {"acme/p": pkg}
    assert cache.info() == (2, 2)  # bounded: the least recently used went
    assert cache.program({"a.cue": "x: 1\n"}) is not first
