"""`velashard def list|show` and `velashard dry-run` with the built-in definitions (no cluster)."""

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
    expose_type = next(line for line in out.splitlines() if line.startswith("| exposeType "))
    assert '"ClusterIP"' in expose_type.split("|")[-2]  # the default column
    assert "## volumeMounts.pvc" in out and "## livenessProbe.httpGet" in out


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
    assert 'component "express-server": unknown parameter "imag"' in capsys.readouterr().err
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: [")
    assert main(["dry-run", "-f", str(broken), "--offline"]) == 2
    assert "not valid YAML" in capsys.readouterr().err
    assert main(["dry-run", "-f", str(tmp_path / "bad.yaml"), "--kubeconfig", str(missing)]) == 2
    assert "--offline" in capsys.readouterr().err
