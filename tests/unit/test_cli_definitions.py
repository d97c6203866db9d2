"""`velashard def` (offline: init, vet, render, get/list/show of the built-ins, apply --dry-run) and `velashard
dry-run` with the built-in definitions and definition files."""

from __future__ import annotations

import textwrap

import yaml

from velashard.cli.main import main

APP = textwrap.dedent("""
    apiVersion: core.oam.dev/v1beta1
    kind: Application
    metadata:
      name: first-vela-app
    spec:
      components:
        - name: express-server
          type: webservice
          properties:
            image: oamdev/hello-world
            ports:
             - port: 8000
               expose: true
          traits:
            - type: gateway
              properties:
                domain: testsvc.example.com
                http:
                  "/": 8000
    """)


def test_def_list_names_every_builtin(capsys):
    assert main(["def", "list", "--builtin", "-t", "trait"]) == 0
    out = capsys.readouterr().out
    assert "| gateway " in out and "| cpuscaler " in out and "| webservice " not in out


def test_def_show_prints_parameters_and_nested_tables(capsys):
    assert main(["def", "show", "webservice", "--builtin"]) == 0
    out = capsys.readouterr().out
    assert "| NAME " in out and "| REQUIRED |" in out
    image = next(line for line in out.splitlines() if line.startswith("| image "))
    assert "| true " in image
    protocol = next(line for line in out.splitlines() if line.startswith("| protocol "))
    assert '"TCP"' in protocol.split("|")[-2]  # the default column
    assert not [line for line in out.splitlines() if line.startswith("| exposeType ")]  # `// +ignore`d
    assert "## volumeMounts.pvc" in out and "## livenessProbe.httpGet" in out


KUBEVELA_STEPS = {
    "apply-component", "apply-deployment", "apply-object", "apply-terraform-config", "apply-terraform-provider",
    "build-push-image", "check-metrics", "clean-jobs", "collect-service-endpoints", "create-config", "delete-config",
    "depends-on-app", "deploy-cloud-resource", "deploy", "export-data", "export-service", "export2config",
    "export2secret", "generate-jdbc-connection", "list-config", "notification", "print-message-in-status",
    "read-config", "read-object", "request", "restart-workflow", "share-cloud-resource", "step-group", "suspend",
    "vela-cli", "webhook",
    # deprecated in KubeVela's sources, still installed by its chart
    "apply-application", "apply-application-in-parallel", "apply-remaining", "deploy2env", "deploy2runtime",
    # kubevela/workflow's, for WorkflowRuns (its vela-workflow chart installs them)
    "read-app", "apply-app"}


def test_def_list_and_show_the_built_in_workflow_steps(capsys):
    assert main(["def", "list", "--builtin", "-t", "workflow-step"]) == 0
    rows = [line.split("|")[1].strip() for line in capsys.readouterr().out.splitlines()[3:-1]]
    assert set(rows) == KUBEVELA_STEPS
    assert main(["def", "show", "notification", "--builtin"]) == 0
    out = capsys.readouterr().out
    assert "## email.from" in out and "## slack.message" in out and "## dingding.message.actionCard" in out
    port = next(line for line in out.split("## email.from")[1].splitlines() if line.startswith("| port "))
    assert "| int " in port and "| 587 " in port
    assert main(["def", "show", "read-object", "--builtin"]) == 0
    namespace = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| namespace "))
    assert '"default"' in namespace  # KubeVela's default namespace for the object read
    assert main(["def", "show", "step-group", "--builtin"]) == 0  # no parameters: an empty table
    assert "| NAME " in capsys.readouterr().out


def test_def_show_unknown_name_exits_2(capsys):
    assert main(["def", "show", "no-such-thing", "--builtin"]) == 2
    assert 'no definition named "no-such-thing"' in capsys.readouterr().err


def test_dry_run_prints_rendered_objects(tmp_path, capsys):
    path = tmp_path / "app.yaml"
    path.write_text(APP)
    assert main(["dry-run", "-f", str(path), "--offline"]) == 0
    out = capsys.readouterr().out
    assert "# Application(first-vela-app) -- Component(express-server)" in out
    objs = [d for d in yaml.safe_load_all(out) if d]
    assert [o["kind"] for o in objs] == ["Deployment", "Service", "Ingress"]
    assert objs[0]["metadata"]["labels"]["app.oam.dev/component"] == "express-server"
    assert objs[2]["spec"]["rules"][0]["host"] == "testsvc.example.com"


def test_dry_run_applies_override_policies(tmp_path, capsys):
    app = yaml.safe_load(APP)
    app["spec"]["policies"] = [{"name": "prod", "type": "override", "properties": {"components": [
        {"name": "express-server", "properties": {"image": "oamdev/hello-world:v2"},
         "traits": [{"type": "scaler", "properties": {"replicas": 3}}]}]}}]
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump(app))
    assert main(["dry-run", "-f", str(path), "--offline"]) == 0
    deploy = next(d for d in yaml.safe_load_all(capsys.readouterr().out) if d and d["kind"] == "Deployment")
    assert deploy["spec"]["replicas"] == 3
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "oamdev/hello-world:v2"


def test_dry_run_bad_input_exits_2_with_the_reason(tmp_path, capsys):
    missing = tmp_path / "missing.yaml"
    assert main(["dry-run", "-f", str(missing), "--offline"]) == 2
    assert "cannot read" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text(APP.replace("image: oamdev/hello-world", "imag: x"))
    assert main(["dry-run", "-f", str(bad), "--offline"]) == 2
    assert ('component "express-server": component definition "webservice": parameter "image" is required'
            in capsys.readouterr().err)
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: [")
    assert main(["dry-run", "-f", str(broken), "--offline"]) == 2
    assert "not valid YAML" in capsys.readouterr().err
    assert main(["dry-run", "-f", str(tmp_path / "bad.yaml"), "--kubeconfig", str(missing)]) == 2
    assert "--offline" in capsys.readouterr().err


MY_TRAIT = textwrap.dedent("""\
    import "strings"

    "shout": {
    	type: "trait"
    	description: "Puts an upper-cased greeting into the pods' annotations."
    	attributes: appliesToWorkloads: ["deployments.apps"]
    }
    template: {
    	patch: spec: template: metadata: annotations: greeting: strings.ToUpper(parameter.text)
    	parameter: {
    		// +usage=What to say
    		text: *"hello" | string
    	}
    }
    """)


def test_def_init_vet_render_and_dry_run_with_a_cue_file(tmp_path, capsys):
    (tmp_path / "defs").mkdir()
    path = tmp_path / "defs" / "my-worker.cue"
    assert main(["def", "init", "my-worker", "-t", "component", "--desc", "A worker", "-o", str(path)]) == 0
    assert main(["def", "vet", str(path)]) == 0
    assert 'ComponentDefinition "my-worker": valid' in capsys.readouterr().out
    assert main(["def", "render", str(path)]) == 0
    rendered = yaml.safe_load(capsys.readouterr().out)
    assert rendered["kind"] == "ComponentDefinition" and rendered["metadata"]["name"] == "my-worker"
    assert rendered["metadata"]["annotations"]["definition.oam.dev/description"] == "A worker"
    assert "parameter" in rendered["spec"]["schematic"]["cue"]["template"]
    trait = tmp_path / "defs" / "shout.cue"
    trait.write_text(MY_TRAIT)
    app = {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": {"name": "a"},
           "spec": {"components": [{"name": "w", "type": "my-worker", "properties": {"image": "busybox"},
                                    "traits": [{"type": "shout"}]}]}}
    app_path = tmp_path / "app.yaml"
    app_path.write_text(yaml.safe_dump(app))
    assert main(["dry-run", "-f", str(app_path), "--offline", "-d", str(path), "-d", str(trait)]) == 0
    deploy = next(d for d in yaml.safe_load_all(capsys.readouterr().out) if d)
    assert deploy["spec"]["template"]["metadata"]["annotations"] == {"greeting": "HELLO"}
    assert main(["dry-run", "-f", str(app_path), "--offline", "-d", str(tmp_path / "defs")]) == 0  # a folder


def test_def_vet_names_the_line_and_column_of_a_broken_template(tmp_path, capsys):
    path = tmp_path / "broken.cue"
    path.write_text(MY_TRAIT.replace("strings.ToUpper(parameter.text)", "strings.ToUpper(parameter.text"))
    assert main(["def", "vet", str(path)]) == 2
    err = capsys.readouterr().err
    assert "broken.cue" in err and "does not compile" not in err or "line" in err, err
    path.write_text(MY_TRAIT.replace("strings.ToUpper(parameter.text)", "parameter.text + 1"))
    assert main(["def", "vet", str(path)]) == 0  # compiles; the conflict shows when rendered
    path.write_text(MY_TRAIT.replace('type: "trait"', 'type: "gadget"'))
    assert main(["def", "vet", str(path)]) == 2
    assert "type must be one of component, trait, policy, workflow-step" in capsys.readouterr().err
    path.write_text("template: {}")
    assert main(["def", "vet", str(path)]) == 2
    assert "exactly one metadata field" in capsys.readouterr().err


def test_def_get_prints_the_vela_def_format_and_it_reads_back(tmp_path, capsys):
    assert main(["def", "get", "scaler", "--builtin"]) == 0
    text = capsys.readouterr().out
    assert text.startswith('"scaler": {') and "template: {" in text
    path = tmp_path / "scaler.cue"
    path.write_text(text)
    assert main(["def", "render", str(path)]) == 0
    from velashard.core.builtins import builtin_definitions
    builtin = next(d for d in builtin_definitions() if d["metadata"]["name"] == "scaler")
    assert yaml.safe_load(capsys.readouterr().out)["spec"] == builtin["spec"]


def test_def_show_lists_policy_parameters_and_apply_dry_run(tmp_path, capsys):
    assert main(["def", "show", "topology", "--builtin"]) == 0
    assert "| clusters " in capsys.readouterr().out
    path = tmp_path / "shout.cue"
    path.write_text(MY_TRAIT)
    assert main(["def", "apply", str(path), "--dry-run"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["kind"] == "TraitDefinition"


def test_dry_run_prints_what_a_policy_renders(tmp_path, capsys):
    policy = tmp_path / "quota.cue"
    policy.write_text(textwrap.dedent("""\
        "quota": {
        	type: "policy"
        	description: "A ResourceQuota for the app's namespace."
        }
        template: {
        	output: {apiVersion: "v1", kind: "ResourceQuota", spec: hard: pods: parameter.pods}
        	parameter: pods: *"10" | string
        }
        """))
    app = {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": {"name": "a"},
           "spec": {"components": [{"name": "w", "type": "worker", "properties": {"image": "busybox"}}],
                    "policies": [{"name": "limits", "type": "quota"}]}}
    app_path = tmp_path / "app.yaml"
    app_path.write_text(yaml.safe_dump(app))
    assert main(["dry-run", "-f", str(app_path), "--offline", "-d", str(policy)]) == 0
    out = capsys.readouterr().out
    assert "# Application(a) -- Policy(limits)" in out
    quota = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "ResourceQuota"]
    assert [(q["metadata"]["name"], q["spec"]) for q in quota] == [("limits", {"hard": {"pods": "10"}})]
