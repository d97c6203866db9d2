"""`velashard dashboard` in a real browser (Playwright driving Debian's chromium-headless-shell) on one
`velashard dev` cluster, and the CLI commands KubeVela users type (`status`, `ls`, `up`, `delete`) on the same
cluster. Screenshots of each page go to the test's tmp directory (`dashboard-*.png`)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
import yaml

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS
from velashard.kube.client import KubeClient
from velashard.kube.resources import EVENTS
from tests.integration.helpers import eventually

ROOT = pathlib.Path(__file__).resolve().parents[2]
BROWSER = "/usr/bin/chromium-headless-shell"
sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright comes with the test extra (setup.py)")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not os.path.exists(BROWSER),
                                                     reason=f"{BROWSER} (Debian's chromium-headless-shell; .ci/run "
                                                            "installs it)")]

APPROVAL = """apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: gated, namespace: %s, annotations: {velashard.io/workflow-deadline: 3s}}
spec:
  components:
  - name: gated
    type: webservice
    properties: {image: "nginx:1.25", ports: [{port: 80, expose: true}]}
  workflow:
    steps:
    - {name: approve, type: suspend}
    - {name: deploy, type: deploy, properties: {policies: []}}
"""


def velashard(*args: str, kubeconfig: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "velashard.cli.main", *args, "--kubeconfig", kubeconfig],
                          capture_output=True, text=True, timeout=120, input=stdin, cwd=ROOT)


class Dev:
    def __init__(self, directory: pathlib.Path):
        self.directory = directory
        self.proc = subprocess.Popen([sys.executable, "-m", "velashard.cli.main", "dev", "--shards", "2", "--apps",
                                      "20", "--dir", str(directory)], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, cwd=ROOT)
        self.output: list[str] = []
        threading.Thread(target=lambda: self.output.extend(iter(self.proc.stdout.readline, "")), daemon=True).start()
        line = eventually(lambda: next((l for l in self.output if l.startswith("velashard dev: dashboard ")), None),
                          timeout=180, interval=0.2)
        self.url = line.split()[-1]
        assert self.url.startswith("http://127.0.0.1:"), line
        self.kubeconfig = str(directory / "kubeconfig")
        self.kube = KubeClient.from_kubeconfig(self.kubeconfig, shard_id="test")

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=60)
        return "".join(self.output)


@pytest.fixture(scope="module")
def dev(tmp_path_factory):
    cluster = Dev(tmp_path_factory.mktemp("dashboard") / "dev")
    try:
        yield cluster
    finally:
        out = cluster.stop()
        assert cluster.proc.returncode == 0 and "Traceback" not in out, out


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=BROWSER)
        yield chromium
        chromium.close()


def new_page(browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    # a page's JavaScript errors; the answers' status codes are the tests' own to check
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" and
            not m.text.startswith("Failed to load resource") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return page, errors


def running(kube: KubeClient, namespace: str = "default") -> int:
    return sum((a.get("status") or {}).get("status") == "running" for a in kube.list(APPLICATIONS, namespace)["items"])


def test_the_fleet_shows_the_shards_and_the_apps(dev, browser, shots):
    eventually(lambda: running(dev.kube) == 20, timeout=120, interval=0.5)
    page, errors = new_page(browser)
    page.goto(dev.url)
    cards = page.locator("article.card")
    eventually(lambda: cards.count() == 3 and sum(int(page.locator(f"article.card[data-shard=shard-{i}] dd.apps")
                                                        .inner_text().split()[0]) for i in (0, 1)) == 20,
               timeout=30, interval=0.5)  # live: the page follows the apps without a reload
    assert [c.get_attribute("data-shard") for c in cards.all()] == ["master", "shard-0", "shard-1"]
    assert page.locator("article.card .badge.available").count() == 3
    page.screenshot(path=str(shots / "dashboard-fleet.png"), full_page=True)
    page.goto(dev.url + "apps?shard=shard-1")
    shown = page.locator("table.apps tbody tr")
    assert 0 < shown.count() < 20 and all(t == "shard-1" for t in page.locator("table.apps tbody td:nth-child(3)")
                                         .all_inner_texts())
    page.select_option("select[name=shard]", "")  # the filters reload the table in place
    eventually(lambda: page.locator("table.apps tbody tr").count() == 21, timeout=10)  # and the addon's app
    page.screenshot(path=str(shots / "dashboard-apps.png"), full_page=True)
    assert not errors, errors
    # Placements at admission are Events on the apps; each shard counts its apps by phase for Prometheus.
    scheduled = dev.kube.list(EVENTS, "default", field_selector="reason=Scheduled")["items"]
    assert {e["involvedObject"]["name"] for e in scheduled} >= {f"sample-{i}" for i in range(20)}
    assert {(e["metadata"].get("annotations") or {}).get(labels.EVENT_MOVE_REASON) for e in scheduled} == {"admission"}
    shard = next(p for p in json.loads((dev.directory / "processes.json").read_text())
                 if p["name"].startswith("velashard-shard-0-"))
    with urllib.request.urlopen(f'http://127.0.0.1:{shard["ports"]["metrics"]}/metrics', timeout=10) as resp:
        metrics = resp.read().decode()
    in_phase = re.search(r'^velashard_application_phase\{phase="running",shard="shard-0"\} (\d+)', metrics, re.M)
    assert in_phase and int(float(in_phase.group(1))) >= 1, metrics
    assert re.search(r'^velashard_applications_not_converged\{shard="shard-0"\} 0', metrics, re.M)


def test_cli_status_ls_up_and_delete_as_kubevela_users_type_them(dev):
    tree = velashard("status", "sample-0", "--tree", kubeconfig=dev.kubeconfig)
    assert tree.returncode == 0, tree.stderr
    assert tree.stdout.splitlines()[0].split() == ["CLUSTER", "NAMESPACE", "RESOURCE", "STATUS"]
    assert re.search(r"^local +─── default +─┬─ Service/sample-0 +updated", tree.stdout, re.M), tree.stdout
    assert re.search(r"^ +└─ Deployment/sample-0 +updated", tree.stdout, re.M), tree.stdout
    status = velashard("status", "sample-0", kubeconfig=dev.kubeconfig)
    assert status.returncode == 0 and re.search(r"^  Healthy: +\t✅$", status.stdout, re.M), status.stdout
    assert re.search(r"Shard:\s+shard-[01]", status.stdout) and "    Type: webservice" in status.stdout
    endpoint = velashard("status", "sample-0", "--endpoint", kubeconfig=dev.kubeconfig)
    assert "Service/default/sample-0" in endpoint.stdout and "http://sample-0.default" in endpoint.stdout, \
        endpoint.stdout
    missing = velashard("status", "nope", kubeconfig=dev.kubeconfig)
    assert missing.returncode == 1 and 'applications.core.oam.dev "nope" not found' in missing.stderr
    listed = velashard("ls", "-A", kubeconfig=dev.kubeconfig)
    header = listed.stdout.splitlines()[0].split()
    assert header == ["NAMESPACE", "APP", "COMPONENT", "TYPE", "TRAITS", "PHASE", "HEALTHY", "STATUS",
                      "CREATED-TIME", "SHARD"], listed.stdout
    assert sum(line.split()[-1].startswith("shard-") for line in listed.stdout.splitlines()
               if line.startswith("default")) == 20, listed.stdout
    app = APPROVAL.replace("name: gated", "name: short-lived") % "default"
    up = velashard("up", "-f", "-", kubeconfig=dev.kubeconfig, stdin=app.replace(
        "    - {name: approve, type: suspend}\n", ""))
    assert up.returncode == 0 and "Application default/short-lived applied." in up.stdout, up.stdout + up.stderr
    waited = velashard("up", "-f", "-", "--wait", kubeconfig=dev.kubeconfig, stdin=app.replace(
        "    - {name: approve, type: suspend}\n", ""))
    assert waited.returncode == 0 and "Application Deployed Successfully!" in waited.stdout, waited.stdout
    deleted = velashard("delete", "short-lived", "-y", kubeconfig=dev.kubeconfig)
    assert deleted.returncode == 0 and "Delete application default/short-lived succeeded" in deleted.stdout
    # --wait (the default) returned once the app was gone: its finalizer held it until its resources were collected
    assert "short-lived" not in {a["metadata"]["name"] for a in dev.kube.list(APPLICATIONS, "default")["items"]}
    assert not [d for d in dev.kube.request("list", "GET", "/apis/apps/v1/namespaces/default/deployments")["items"]
                if d["metadata"]["name"] == "short-lived"]
    again = velashard("delete", "short-lived", "-y", kubeconfig=dev.kubeconfig)
    assert again.returncode == 0 and "application default/short-lived already deleted" in again.stdout
    bad = velashard("up", "-f", "-", kubeconfig=dev.kubeconfig, stdin="kind: Deployment\n")
    assert bad.returncode == 2 and "expected one Application" in bad.stderr


def test_a_suspended_app_is_resumed_from_its_page(dev, browser, shots):
    up = velashard("up", "-f", "-", kubeconfig=dev.kubeconfig, stdin=APPROVAL % "default")
    assert up.returncode == 0, up.stdout + up.stderr

    def phase() -> str:
        return (dev.kube.get(APPLICATIONS, "gated", "default").get("status") or {}).get("status") or ""
    eventually(lambda: phase() == "workflowSuspending", timeout=60, interval=0.5)

    def deadline() -> dict | None:
        return next((c for c in dev.kube.get(APPLICATIONS, "gated", "default")["status"].get("conditions") or []
                     if c["type"] == "WorkflowDeadline"), None)
    # suspended past its annotation's deadline (3s): the app says so, without anything else waking it
    eventually(lambda: (deadline() or {}).get("reason") == "DeadlineExceeded", timeout=60, interval=0.5)
    assert deadline()["status"] == "False" and "annotation 3s" in deadline()["message"]
    page, errors = new_page(browser)
    page.goto(dev.url)  # it needs attention, with a link to its page
    eventually(lambda: page.locator("table.attention a", has_text="default/gated").count() == 1, timeout=15)
    page.click("table.attention a >> text=default/gated")
    assert page.locator(".timeline").inner_text().count("approve") == 1
    page.screenshot(path=str(shots / "dashboard-app.png"), full_page=True)
    page.click("a.button:text-is('Resume')")
    assert "Resume the workflow?" in page.inner_text("h1")
    page.click("button[type=submit]")  # the confirmation
    assert page.inner_text("#result") == "workflow resumed"
    eventually(lambda: phase() == "running", timeout=60, interval=0.5)
    assert deadline() is None  # finished: no deadline left to miss
    page.goto(dev.url + "app/default/gated")
    eventually(lambda: "succeeded" in page.locator(".timeline").inner_text(), timeout=15)
    assert not errors, errors
    # Actions need this process's token and this host: another site's form or a rebound name gets nothing.
    port = dev.url.rsplit(":", 1)[1].strip("/")
    for headers, data in (({}, b"action=terminate"), ({"Host": f"evil.example:{port}"}, b"")):
        request = urllib.request.Request(dev.url + "app/default/gated/action", data=data, headers=headers)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code in (403, 421)


def tenant_kubeconfig(dev: Dev, namespace: str) -> str:
    """A ServiceAccount that may read apps and Events in `namespace` only, and update nothing."""
    kube = dev.kube
    kube.request("create", "POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
    kube.request("create", "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts",
                 body={"metadata": {"name": "viewer"}})
    kube.request("create", "POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles", body={
        "metadata": {"name": "viewer"}, "rules": [
            {"apiGroups": ["core.oam.dev"], "resources": ["applications", "applicationrevisions"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch"]}]})
    kube.request("create", "POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings", body={
        "metadata": {"name": "viewer"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                    "name": "viewer"},
        "subjects": [{"kind": "ServiceAccount", "name": "viewer", "namespace": namespace}]})
    token = kube.request("create", "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/viewer/token",
                         body={"spec": {"expirationSeconds": 3600}})["status"]["token"]
    doc = yaml.safe_load(open(dev.kubeconfig))
    doc["users"] = [{"name": "viewer", "user": {"token": token}}]
    for context in doc["contexts"]:
        context["context"]["user"] = "viewer"
    path = dev.directory / f"kubeconfig-{namespace}-viewer"
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return str(path)


def test_a_tenant_sees_only_what_it_may_list(dev, browser, shots):
    kubeconfig = tenant_kubeconfig(dev, "team-a")
    assert velashard("up", "-f", "-", kubeconfig=dev.kubeconfig, stdin=APPROVAL % "team-a").returncode == 0
    everywhere = velashard("dashboard", "--port", "0", kubeconfig=kubeconfig)
    assert everywhere.returncode == 2 and "--namespace" in everywhere.stderr
    proc = subprocess.Popen([sys.executable, "-m", "velashard.cli.main", "dashboard", "--kubeconfig", kubeconfig,
                             "--namespace", "team-a", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        url = proc.stdout.readline().split()[-1]
        page, errors = new_page(browser)
        page.goto(url + "apps")
        eventually(lambda: page.locator("table.apps tbody tr").count() == 1, timeout=30)
        assert page.locator("table.apps tbody td:nth-child(2)").all_inner_texts() == ["gated"]
        page.goto(url)
        assert "You may not read the shard pods and Leases" in page.inner_text("main")
        assert {c.get_attribute("class").split()[-1] for c in page.locator("article.card").all()} == {"unknown"}
        page.screenshot(path=str(shots / "dashboard-tenant.png"), full_page=True)
        missing = page.goto(url + "app/default/sample-0")
        assert missing.status == 404
        # an action goes as the tenant, who may not write: the API server's refusal is what the tenant sees
        page.goto(url + "app/team-a/gated")
        page.click("a.button:text-is('Restart')")
        page.click("button[type=submit]")
        assert "the API server refused" in page.inner_text("#result") and "forbidden" in \
            page.inner_text("#result").lower()
        assert not errors, errors
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_killed_shard_is_an_episode_with_its_apps_moved(dev, browser, shots):
    page, errors = new_page(browser)
    page.goto(dev.url + "moves")
    killed = subprocess.run([sys.executable, "hack/kill_shard.py", "--dir", str(dev.directory), "--shard",
                             "shard-0"], capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert killed.returncode == 0, killed.stderr

    def moved() -> list[dict]:
        return [e for e in dev.kube.list(EVENTS, field_selector="reason=Rescheduled")["items"]
                if (e["metadata"].get("annotations") or {}).get(labels.EVENT_FROM_SHARD) == "shard-0"]
    on_shard_0 = sum((a["metadata"].get("labels") or {}).get(labels.SCHEDULED_SHARD_ID) == "shard-0"
                     for a in dev.kube.list(APPLICATIONS)["items"])
    events = eventually(lambda: (lambda found: found if len(found) == on_shard_0 else None)(moved()), timeout=60,
                        interval=0.2)
    last_move = time.monotonic()
    assert {e["metadata"]["annotations"][labels.EVENT_MOVE_REASON] for e in events} == {"orphaned"}
    # The page it was on shows the episode without a reload, within 10 s of the move
    episode = page.locator("article.episode[data-shard=shard-0]")
    eventually(lambda: episode.count() == 1 and f"{on_shard_0} app{'' if on_shard_0 == 1 else 's'} moved to shard-1"
               in episode.inner_text(),
               timeout=10, interval=0.1)
    assert time.monotonic() - last_move <= 10
    eventually(lambda: "failover" in episode.inner_text(), timeout=30, interval=0.5)
    page.screenshot(path=str(shots / "dashboard-moves.png"), full_page=True)
    assert not errors, errors
    if os.environ.get("VELASHARD_DOCS_SCREENSHOT"):  # how docs/dashboard.png is made
        shutil.copy(shots / "dashboard-fleet.png", os.environ["VELASHARD_DOCS_SCREENSHOT"])
