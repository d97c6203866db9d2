"""A user's own CUE definitions, applied with kubectl (and `velashard def apply`), run an app end to end in
`velashard dev` with sharding on: the chart's master and a shard as processes, under their ServiceAccounts; a
definition whose template does not compile is refused with its line and column."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import threading

import pytest
import yaml

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS, COMPONENT_DEFINITIONS, WORKFLOW_STEP_DEFINITIONS
from velashard.kube.client import KubeClient
from velashard.kube.resources import DEPLOYMENTS, SERVICES
from tests.e2e.test_dev import read_lines
from tests.integration.helpers import eventually

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

COMPONENT = """\
apiVersion: core.oam.dev/v1beta1
kind: ComponentDefinition
metadata:
  name: small-web
  namespace: vela-system
  annotations:
    definition.oam.dev/description: A Deployment and a Service, written by a user in CUE.
spec:
  workload:
    definition: {apiVersion: apps/v1, kind: Deployment}
    type: deployments.apps
  status:
    healthPolicy: |
      isHealth: context.output.status.readyReplicas == context.output.spec.replicas
    customStatus: |
      message: "\\(context.output.status.readyReplicas) of \\(context.output.spec.replicas) ready, port \\(context.output.spec.template.spec.containers[0].ports[0].containerPort)"
  schematic:
    cue:
      template: |
        import "strings"

        output: {
          apiVersion: "apps/v1"
          kind: "Deployment"
          spec: {
            replicas: parameter.replicas
            selector: matchLabels: "app.oam.dev/component": context.name
            template: {
              metadata: labels: "app.oam.dev/component": context.name
              spec: containers: [{
                name: context.name
                image: strings.ToLower(parameter.image)
                ports: [{containerPort: parameter.port}]
              }]
            }
          }
        }
        outputs: service: {
          apiVersion: "v1"
          kind: "Service"
          metadata: name: "\\(context.name)-svc"
          spec: {
            selector: "app.oam.dev/component": context.name
            ports: [{port: parameter.port}]
          }
        }
        parameter: {
          // +usage=Image to run
          image: string
          // +usage=Port the container listens on
          port: *8080 | int & >0 & <65536
          replicas: *1 | int
        }
"""

TRAIT = """\
"team-owner": {
	type: "trait"
	description: "Labels the pods with their owning team and sets an environment variable."
	attributes: {
		appliesToWorkloads: ["deployments.apps"]
		podDisruptive: true
	}
}
template: {
	patch: spec: template: {
		metadata: labels: team: parameter.team
		spec: {
			// +patchKey=name
			containers: [{name: context.name, env: [{name: "TEAM", value: parameter.team}]}]
		}
	}
	parameter: team: string
}
"""

BROKEN = """\
apiVersion: core.oam.dev/v1beta1
kind: ComponentDefinition
metadata: {name: broken, namespace: vela-system}
spec:
  schematic:
    cue:
      template: |
        output: {
          apiVersion: "v1"
          kind: "ConfigMap"
          data: a: 1 +
        }
"""

STEP = """\
apiVersion: core.oam.dev/v1beta1
kind: WorkflowStepDefinition
metadata: {name: my-step, namespace: vela-system}
spec:
  schematic:
    cue:
      template: |
        import "vela/op"
        apply: op.#Apply & {value: parameter.value}
        parameter: value: {...}
"""

BROKEN_STEP = """\
apiVersion: core.oam.dev/v1beta1
kind: WorkflowStepDefinition
metadata: {name: broken-step, namespace: vela-system}
spec:
  schematic:
    cue:
      template: |
        import "vela/op"
        apply: op.#Apply & {value: parameter.value}
        parameter: value: {...}}
"""

APP = """\
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: owned, namespace: default}
spec:
  components:
  - name: front
    type: small-web
    properties: {image: NGINX:1.25, replicas: 2}
    traits:
    - type: team-owner
      properties: {team: payments}
"""


def kubectl(directory, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["kubectl", "--kubeconfig", str(directory / "kubeconfig"), "--cache-dir",
                           str(directory / "kubectl-cache"), *args], input=stdin, capture_output=True, text=True,
                          timeout=60)


def test_users_cue_definitions_run_an_app_with_sharding_on(tmp_path):
    directory = tmp_path / "dev"
    proc = subprocess.Popen([sys.executable, "-m", "velashard.cli.main", "dev", "--shards", "1", "--apps", "0",
                             "--dir", str(directory)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output: list[str] = []
    reader = threading.Thread(target=read_lines, args=(proc.stdout, output), daemon=True)
    reader.start()
    try:
        eventually(lambda: any("velashard dev: API server" in line for line in output) or proc.poll() is not None,
                   timeout=120, interval=0.1)
        assert proc.poll() is None, "".join(output)
        kube = KubeClient.from_kubeconfig(str(directory / "kubeconfig"), shard_id="test")

        def webhook_serving() -> bool:  # the master registers the definitions webhook once it serves
            hooks = kube.request("get", "GET", "/apis/admissionregistration.k8s.io/v1/"
                                               "validatingwebhookconfigurations").get("items") or []
            return any(h["name"].endswith(".definitions") and h.get("clientConfig", {}).get("caBundle")
                       for c in hooks for h in c.get("webhooks") or [])

        eventually(webhook_serving, timeout=120, interval=0.5)
        # A definition that does not compile is refused, naming the line and column of the mistake.
        broken = eventually(lambda: (lambda r: r if r.returncode != 0 else None)(
            kubectl(directory, "apply", "-f", "-", stdin=BROKEN)), timeout=30, interval=1)
        assert "does not compile" in broken.stderr and "line 5, column 1" in broken.stderr, broken.stderr
        assert not [d for d in kube.list(COMPONENT_DEFINITIONS, "vela-system")["items"]
                    if d["metadata"]["name"] == "broken"]
        # A CUE workflow step compiles with the providers' packages (vela/op) and is stored; one that does not
        # compile is refused, naming where.
        assert kubectl(directory, "apply", "-f", "-", stdin=STEP).returncode == 0
        broken_step = kubectl(directory, "apply", "-f", "-", stdin=BROKEN_STEP)
        assert broken_step.returncode != 0 and "does not compile" in broken_step.stderr, broken_step.stderr
        assert "line 3, column 24" in broken_step.stderr, broken_step.stderr

        def step_condition() -> dict | None:
            conditions = (kube.get(WORKFLOW_STEP_DEFINITIONS, "my-step", "vela-system").get("status") or {}).get(
                "conditions") or []
            return next((c for c in conditions if c["type"] == "TemplateValid"), None)

        condition = eventually(step_condition, timeout=30, interval=0.5)
        assert (condition["status"], condition["reason"]) == ("True", "Compiled")
        # The user's component (kubectl, X-Definition YAML) and trait (velashard def apply, vela def file).
        applied = kubectl(directory, "apply", "-f", "-", stdin=COMPONENT)
        assert applied.returncode == 0, applied.stderr
        trait_file = tmp_path / "team-owner.cue"
        trait_file.write_text(TRAIT)
        done = subprocess.run([sys.executable, "-m", "velashard.cli.main", "def", "apply", str(trait_file),
                               "--kubeconfig", str(directory / "kubeconfig")], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0 and "traitdefinition/team-owner created" in done.stdout, done.stderr
        assert kubectl(directory, "apply", "-f", "-", stdin=APP).returncode == 0

        def running() -> dict | None:
            app = kube.get(APPLICATIONS, "owned", "default")
            return app if (app.get("status") or {}).get("status") == "running" else None

        app = eventually(running, timeout=90, interval=0.5)
        assert (app["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID) in ("master", "shard-0")
        service = app["status"]["services"][0]
        assert service["healthy"] is True and service["message"] == "2 of 2 ready, port 8080", service
        deploy = kube.get(DEPLOYMENTS, "front", "default")
        pod = deploy["spec"]["template"]
        assert pod["metadata"]["labels"]["team"] == "payments"
        assert pod["spec"]["containers"][0]["image"] == "nginx:1.25"
        assert pod["spec"]["containers"][0]["env"] == [{"name": "TEAM", "value": "payments"}]
        assert kube.get(SERVICES, "front-svc", "default")["spec"]["ports"][0]["port"] == 8080
        # A parameter error becomes the Rendered condition naming the component, definition and field.
        bad = yaml.safe_load(APP)
        bad["metadata"]["name"] = "wrong"
        bad["spec"]["components"][0]["properties"]["port"] = 70000
        assert kubectl(directory, "apply", "-f", "-", stdin=yaml.safe_dump(bad)).returncode == 0

        def rendered_condition() -> dict | None:
            conditions = (kube.get(APPLICATIONS, "wrong", "default").get("status") or {}).get("conditions") or []
            return next((c for c in conditions if c["type"] == "Rendered" and c["status"] == "False"), None)

        condition = eventually(rendered_condition, timeout=60, interval=0.5)
        assert 'component "front"' in condition["message"] and 'definition "small-web"' in condition["message"]
        assert 'parameter "port"' in condition["message"], condition
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        reader.join(timeout=10)
    assert proc.returncode == 0, "".join(output)
