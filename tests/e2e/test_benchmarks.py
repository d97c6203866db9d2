"""The multi-process benchmarks run end to end at a tiny size and print figures that hang together.

The figures themselves are measured by running the scripts at full size (docs/benchmarks.md); here
only their plumbing is checked, so that they keep working as the code changes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # deselect with -m "not slow"

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bench(name: str, *args: str) -> dict:
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "hack", f"bench_{name}.py"), *args],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["cores"] == os.cpu_count() and result["commit"]
    return result


def test_shard_memory_counts_each_shards_apps():
    result = bench("shard_memory", "--apps", "30", "--shards", "3")
    shards = result["sharded"]["shards"]
    assert sorted(shards) == ["shard-0", "shard-1", "shard-2"]
    assert sum(s["apps"] for s in shards.values()) == 30  # each reconciled its own apps, all of them
    assert result["ratio"] == pytest.approx(result["max_shard_growth_kib"]
                                            / result["unsharded_default"]["growth_kib"], abs=0.001)


def test_failover_moves_every_app_of_the_killed_and_of_the_paused_shard():
    result = bench("failover", "--apps", "30", "--shards", "3")
    for mode in ("crash", "pause"):
        # the split is even only if every shard was Ready at every placement; under load it may not be
        assert result[mode]["apps_on_failed_shard"] >= 1 and result[mode]["apps_running_after"] == 30, result
        assert 0 < result[mode]["seconds_until_all_moved"] <= result[mode]["seconds_until_all_reconciled"]
    assert result["pause"]["seconds_until_all_moved"] >= 3.5  # not before the frozen shard's lease expired


def test_master_flat_counts_the_masters_requests_at_both_sizes():
    result = bench("master_flat", "--small", "10", "--large", "30", "--window", "4", "--settle", "1")
    for size in ("small", "large"):
        assert result[size]["rss_kib"] > 10_000
        # At least its leader-election lease is renewed during the window.
        assert result[size]["by_verb_and_resource"].get("update leases", 0) >= 1, result[size]
    assert result["rss_ratio"] > 0 and result["requests_ratio"] > 0


def test_scale_out_runs_one_and_two_shards():
    result = bench("scale_out", "--apps", "40")
    assert result["one_shard"]["shards"] == 1 and result["2_shards"]["shards"] == 2
    assert result["speed_up"] > 0


def test_api_cost_counts_new_apps_steady_state_and_health_latency():
    result = bench("api_cost", "--apps", "6", "--large", "10", "--window", "3", "--settle", "1", "--probes", "2",
                   "--latency-timeout", "20")
    assert result["smoke_window"] is True
    new = result["new_apps"]
    # Each new app's own writes at least: its finalizer, revision, tracker, Deployment and status.
    assert new["per_new_app_by_verb_and_resource"].get("create applicationrevisions") == 1.0, new
    assert new["requests_per_new_app"] >= 4
    assert result["small"]["apps"] == 6 and result["large"]["apps"] == 10
    assert sum(s["apps"] for s in result["shard_memory"].values()) == 6
    for change in ("unhealthy", "healthy_again"):  # both directions were seen for every probe
        assert result["health_latency"][change]["seen"] == 2, result["health_latency"]


def test_webhook_latency_times_both_namespaces_and_the_workers_cpu():
    result = bench("webhook", "--creates", "60", "--rate", "100")
    assert result["webhook_scheduled_apps"] and result["apps_without_webhook_unscheduled"]
    assert 0 < result["without_webhook_ms_p50"] <= result["without_webhook_ms_p99"]
    assert 0 < result["with_webhook_ms_p50"] <= result["with_webhook_ms_p99"]
    assert result["added_ms_p99"] == pytest.approx(result["with_webhook_ms_p99"] - result["without_webhook_ms_p99"],
                                                   abs=0.011)
    assert result["webhook_worker_cpu_ms_per_call"] > 0  # the worker answered the measured calls


def test_definition_edits_counts_what_an_unused_and_a_used_edit_write():
    result = bench("definition_edits", "--apps", "12", "--users", "4", "--window", "3", "--settle", "2")
    assert result["unused"]["new_revisions"] == result["unused"]["writes_for_apps"] == 0, result
    assert result["used"]["new_revisions"] == 4 and result["used"]["exactly_the_users"], result
    assert result["meets_goals"], result


def test_tenant_isolation_times_a_quiet_app_beside_a_noisy_tenant():
    result = bench("tenant_isolation", "--noisy-apps", "2", "--requests", "3", "--samples", "2", "--spacing", "0.2")
    assert result["noisy_steps"] == 6 and len(result["loaded_seconds"]) == 2 and result["ratio"] > 0
