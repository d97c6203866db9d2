"""The controller manager as real processes: flags, probes, SIGTERM, leader election between replicas."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from kubernetes import client

from tests.e2e.helpers import free_port
from tests.integration.helpers import eventually


@pytest.fixture(scope="module", autouse=True)
def crds_installed(apiserver):
    """The manager runs the Application controller, whose informers need the CRDs, as in a real cluster."""
    proc = subprocess.run([sys.executable, "-m", "velashard.cli.main", "install", "--kubeconfig", apiserver.kubeconfig],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "customresourcedefinition/applications.core.oam.dev" in proc.stdout


def start_manager(kubeconfig: str, *flags: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "velashard.cli.main", "--kubeconfig", kubeconfig, *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError:
        return 0, ""


@pytest.mark.parametrize("flags,message", [
    (["--shard-id", "bad shard!"], "--shard-id"),
    (["--kube-api-qps", "0"], "--kube-api-qps"),
    (["--no-such-flag"], "unrecognized arguments"),
    (["--lease-duration", "5", "--renew-deadline", "10"], "--lease-duration"),
])
def test_bad_flags_exit_2_with_a_message(apiserver, flags, message):
    proc = start_manager(apiserver.kubeconfig, *flags)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert message in err and "Traceback" not in err


def test_missing_kubeconfig_is_a_clear_error():
    proc = start_manager("/nonexistent/kubeconfig")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "does not exist" in err and "Traceback" not in err


def test_probes_metrics_and_sigterm(apiserver):
    metrics, health = free_port(), free_port()
    proc = start_manager(apiserver.kubeconfig, "--shard-id", "probe-test", "--metrics-addr", f"127.0.0.1:{metrics}",
                         "--health-addr", f"127.0.0.1:{health}", "--log-format", "json")
    try:
        eventually(lambda: get(f"http://127.0.0.1:{health}/readyz")[0] == 200, timeout=60)
        assert get(f"http://127.0.0.1:{health}/healthz") == (200, "ok\n")
        code, text = get(f"http://127.0.0.1:{metrics}/metrics")
        assert code == 200 and "velashard_kube_requests_total" in text
    finally:
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0 and time.monotonic() - started < 10
    assert '"shard": "probe-test"' in err


def lease_holder(api_client, namespace: str, name: str) -> str | None:
    try:
        return client.CoordinationV1Api(api_client).read_namespaced_lease(name, namespace).spec.holder_identity
    except client.exceptions.ApiException:
        return None


def test_leadership_moves_between_two_processes(apiserver, api_client, namespace):
    election = ["--enable-leader-election", "--leader-election-namespace", namespace, "--shard-id", "shard-x",
                "--metrics-addr", "127.0.0.1:0", "--health-addr", "127.0.0.1:0"]
    common = [*election, "--lease-duration", "3", "--renew-deadline", "2", "--retry-period", "0.5"]
    first = start_manager(apiserver.kubeconfig, *common, "--leader-election-identity", "first")
    second = None
    try:
        eventually(lambda: lease_holder(api_client, namespace, "velashard-shard-x") == "first", timeout=60)
        # The second holds the Lease for 15 s once it has it: only its release can hand it on sooner.
        second = start_manager(apiserver.kubeconfig, *election, "--lease-duration", "15", "--renew-deadline", "10",
                               "--retry-period", "0.5", "--leader-election-identity", "second")
        time.sleep(2)
        assert lease_holder(api_client, namespace, "velashard-shard-x") == "first"  # one active replica
        # A crash: the standby takes over once the lease has not been renewed for its duration.
        killed = time.monotonic()
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        eventually(lambda: lease_holder(api_client, namespace, "velashard-shard-x") == "second", timeout=30,
                   interval=0.1)
        # By the first's lease duration (3 s) + retry period, with slack for a busy machine (12.9 s was seen at
        # load 17), and before the 15 s a standby would wait if it went by its own lease duration instead.
        assert time.monotonic() - killed < 14.5
        # A graceful stop releases the lease at once.
        third = start_manager(apiserver.kubeconfig, *common, "--leader-election-identity", "third")
        try:
            time.sleep(1.5)
            second.send_signal(signal.SIGTERM)
            second.wait(10)
            assert second.returncode == 0
            released = time.monotonic()
            eventually(lambda: lease_holder(api_client, namespace, "velashard-shard-x") == "third", timeout=10,
                       interval=0.1)
            assert time.monotonic() - released < 10  # released, not expired (the second's lease is 15 s)
        finally:
            third.send_signal(signal.SIGTERM)
            third.wait(10)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(5)


def test_a_slave_shard_starts_with_kubevelas_flags_and_go_durations(apiserver):
    health = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "velashard.cli.main", "--enable-sharding", "--shard-id=shard-1",
                             "--sharding-slave-discovery-resync-period=5m", "--orphan-grace-period", "2s",
                             "--reschedule-period", "2s", "--application-re-sync-period=5m", "--use-webhook=true",
                             "--health-addr", f"127.0.0.1:{health}", "--metrics-addr", "127.0.0.1:0",
                             "--kubeconfig", apiserver.kubeconfig],  # a global flag after the others
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        eventually(lambda: get(f"http://127.0.0.1:{health}/readyz")[0] == 200, timeout=60)
        assert get(f"http://127.0.0.1:{health}/healthz") == (200, "ok\n")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    assert "shard=shard-1" in err and "Traceback" not in err
