"""`velashard dry-run` of a workflow: what each step would do, from its template, touching no cluster."""

from __future__ import annotations

from pathlib import Path

from velashard.cli.main import main
from tests.workflowsteps import HERE

APP = """\
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: shop}
spec:
  components:
  - name: web
    type: webservice
    properties: {image: nginx}
  workflow:
    steps:
    - name: web
      type: apply-component
      properties: {component: web}
    - name: ask
      type: call-url
      properties: {url: "http://catalog.local/v1", method: POST, body: {sku: 7}}
    - name: odd
      type: nope
"""


def test_dry_run_prints_each_steps_actions(tmp_path: Path, capsys):
    path = tmp_path / "app.yaml"
    path.write_text(APP)
    assert main(["dry-run", "-f", str(path), "--offline", "-d", str(HERE / "call-url.cue")]) == 0
    out = capsys.readouterr().out
    steps = out.split("# Application(shop) -- WorkflowStep(")[1:]
    assert [s.split(")", 1)[0] for s in steps] == ["web, apply-component", "ask, call-url", "odd, nope"]
    assert "- action: oam.component-apply\n  field: apply\n" in steps[0] and "image: nginx" in steps[0]
    ask = steps[1]
    assert "- action: http.do\n  field: call\n" in ask and "url: http://catalog.local/v1" in ask
    assert "body: '{\"sku\":7}'" in ask
    # nothing is sent in a dry run: the step would wait for the answer it needs
    assert "- action: builtin.wait\n  field: answered\n  parameters:\n    continue: false\n" in ask
    assert 'no WorkflowStepDefinition "nope"' in steps[2]
