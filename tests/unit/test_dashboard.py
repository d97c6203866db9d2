"""The dashboard's view models (pure), its live stream, its request guards and its vendored files."""

from __future__ import annotations

import hashlib
import pathlib
from datetime import datetime, timezone

from velashard.apis import labels
from velashard.dashboard.appsview import Filters, page_of
from velashard.dashboard.appview import app_view
from velashard.dashboard.fleet import attention, cards
from velashard.dashboard.live import Hub
from velashard.dashboard.moves import episodes, history, is_done, move_of, others
from velashard.dashboard.rows import row_of
from velashard.sharding.membership import AVAILABLE, DEAD, Member

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
STATIC = pathlib.Path(__file__).resolve().parents[2] / "velashard" / "dashboard" / "static"


def app(name, shard="shard-0", phase="running", healthy=True, ns="default", proof=True, conditions=(), **extra):
    notes = {labels.ASSIGNMENT_PROOF: "sig"} if proof else {}
    return {"metadata": {"name": name, "namespace": ns, "creationTimestamp": "2026-01-01T11:00:00Z",
                         "labels": {labels.SCHEDULED_SHARD_ID: shard} if shard else {}, "annotations": notes},
            "status": {"status": phase, "services": [{"name": name, "healthy": healthy, "message": "Ready:0/1"}],
                       "conditions": list(conditions), **extra}}


def event(name, reason, at, frm="", to="", why="", lost=""):
    notes = {labels.EVENT_TO_SHARD: to, labels.EVENT_MOVE_REASON: why}
    if frm:
        notes[labels.EVENT_FROM_SHARD] = frm
    if lost:
        notes[labels.EVENT_SHARD_LOST_AT] = lost
    return {"metadata": {"name": f"{name}.{at}", "namespace": "default", "annotations": notes}, "reason": reason,
            "lastTimestamp": at, "message": reason, "involvedObject": {"namespace": "default", "name": name}}


def test_rows_say_health_proof_and_since_when_an_app_has_not_converged():
    ok = row_of(app("a"))
    assert (ok.key, ok.shard, ok.health, ok.proven, ok.since) == ("default/a", "shard-0", "healthy", True, "")
    sick = row_of(app("b", phase="unhealthy", healthy=False, conditions=[
        {"type": "Healthy", "status": "False", "lastTransitionTime": "2026-01-01T11:30:00Z", "message": "x"}]))
    assert sick.health == "unhealthy" and sick.since == "2026-01-01T11:30:00Z" and sick.message == "b: Ready:0/1"
    assert not row_of(app("c", proof=False)).proven and row_of(app("d", shard="", proof=False)).proven


def test_attention_lists_what_needs_someone_most_urgent_first():
    rows = [row_of(a) for a in (
        app("fine"), app("lost", shard=""), app("forged", proof=False), app("orphan", shard="shard-1"),
        app("failed", phase="workflowFailed"), app("waiting", phase="workflowSuspending"),
        app("refused", phase="rendering", conditions=[{"type": "Authorized", "status": "False", "message": "no"}]),
        app("stuck", phase="runningWorkflow", healthy=False), app("young", phase="runningWorkflow", healthy=False,
                                                                  conditions=[{"type": "Healthy", "status": "False",
                                                                               "lastTransitionTime": "2026-01-01T11:59:00Z"}]))]
    members = {"shard-0": Member(AVAILABLE, False), "shard-1": Member(DEAD, True)}
    found, total = attention(rows, members, NOW, stuck_after=300)
    whys = {a.key.split("/")[1]: a.why for a in found}
    assert total == len(found) == 7 and "fine" not in whys and "young" not in whys
    assert whys["orphan"] == "on an unavailable shard (dead)" and whys["lost"] == "unscheduled"
    assert whys["stuck"].startswith("not converged for 60m00s")
    assert whys["refused"].startswith("Authorized=False") and "approval" in whys["waiting"]
    assert [a.key for a in found][:2] == ["default/lost", "default/orphan"]
    # without the right to read membership, no shard is judged
    assert "orphan" not in {a.key.split("/")[1] for a in attention(rows, None, NOW, 300)[0]}


def test_cards_use_the_membership_rule_and_count_the_apps():
    rows = [row_of(app("a")), row_of(app("b", phase="workflowFailed")), row_of(app("c", shard="shard-1"))]
    pods = [{"metadata": {"labels": {labels.SHARD_ID: "shard-0"}},
             "status": {"conditions": [{"type": "Ready", "status": "True"}]}}]
    leases = [{"metadata": {"labels": {labels.SHARD_ID: "shard-0"}, "annotations": {labels.APPS_ANNOTATION: "2"}},
               "spec": {"holderIdentity": "pod-0", "renewTime": "2026-01-01T11:59:58.000000Z"}}]
    out = cards(rows, {"shard-0": Member(AVAILABLE, False)}, pods, leases, {"shard-0": "moved"}, NOW)
    assert [c.shard for c in out] == ["master", "shard-0", "shard-1"]
    zero = out[1]
    assert (zero.status, zero.pods, zero.leader, zero.lease_age, zero.apps, zero.reported, zero.last_move) == \
        (AVAILABLE, "1/1", "pod-0", "2s", 2, "2", "moved")
    assert zero.counts == {"healthy": 1, "unhealthy": 0, "failed": 1, "suspended": 0} and out[2].status == "dead"
    assert {c.status for c in cards(rows, None, [], [], {}, NOW)} == {"unknown"}


def test_apps_are_filtered_and_paged_on_the_server():
    rows = [row_of(app(f"app-{i:03}", shard=f"shard-{i % 3}", ns="team" if i % 2 else "default")) for i in range(120)]
    page = page_of(rows, Filters.from_args({"shard": "shard-1", "namespace": "team", "page": "2"}), size=10)
    assert page.total == 20 and page.pages == 2 and page.page == 2 and len(page.rows) == 10
    assert all(r.shard == "shard-1" and r.namespace == "team" for r in page.rows)
    assert page_of(rows, Filters.from_args({"q": "APP-01"})).total == 10
    assert page_of(rows, Filters.from_args({"page": "x"})).page == 1
    assert Filters.from_args({"shard": "a b", "page": "3"}).query(page=1) == "shard=a+b"


def test_a_shard_failure_is_an_episode_with_its_failover_time():
    lost = "2026-01-01T11:00:00Z"
    events = [event("a", "Rescheduled", "2026-01-01T11:00:03Z", "shard-0", "shard-1", "orphaned", lost),
              event("b", "Rescheduled", "2026-01-01T11:00:04Z", "shard-0", "shard-2", "orphaned", lost),
              event("c", "Rescheduled", "2026-01-01T11:10:00Z", "shard-1", "shard-2", "manual"),
              event("c", "Scheduled", "2026-01-01T10:00:00Z", "", "shard-1", "admission"),
              event("d", "Draining", "2026-01-01T11:20:00Z", "shard-1", "shard-3", "rebalance"),
              {"metadata": {"name": "x"}, "reason": "ResourceConflict"}]
    moves = [m for m in map(move_of, events) if m is not None]
    assert len(moves) == 5
    (episode,) = episodes(moves, {("shard-0", lost): "2026-01-01T11:00:06Z"})
    assert (episode.shard, len(episode.moves), episode.targets, episode.moved_in, episode.failover) == \
        ("shard-0", 2, ["shard-1", "shard-2"], 4.0, 6.0)
    assert [m.event for m in others(moves)] == ["Draining", "Rescheduled"]
    assert history(moves, "default/c", "shard-2") == [("shard-1", "2026-01-01T10:00:00Z"),
                                                      ("shard-2", "2026-01-01T11:10:00Z")]
    moved = datetime(2026, 1, 1, 11, 0, 4, tzinfo=timezone.utc)
    later = datetime(2026, 1, 1, 11, 0, 6, tzinfo=timezone.utc)
    reports = {"shard-1": (later, 5, 5), "shard-2": (later, 3, 3)}
    assert is_done(["shard-1", "shard-2"], moved, reports, {"shard-1": 5, "shard-2": 3}) == later
    assert is_done(["shard-1", "shard-2"], moved, {**reports, "shard-2": (later, 3, 2)}, {}) is None  # one left
    assert is_done(["shard-1"], moved, reports, {"shard-1": 6}) is None  # its report predates the moved app


def test_an_apps_page_shows_steps_tree_events_and_what_may_be_done():
    workflow = {"suspend": True, "steps": [
        {"name": "approve", "type": "suspend", "phase": "suspending", "firstExecuteTime": "2026-01-01T11:00:00Z",
         "lastExecuteTime": "2026-01-01T11:01:30Z"}]}
    tracker = {"spec": {"managedResources": [
        {"kind": "Deployment", "namespace": "default", "name": "a", "component": "a"},
        {"kind": "Service", "namespace": "default", "name": "gone", "deleted": True},
        {"kind": "Secret", "namespace": "default", "name": "s"}]}}
    live = {("Deployment", "default", "a"): {"kind": "Deployment", "metadata": {"generation": 1}, "spec": {},
                                             "status": {"observedGeneration": 1}},
            ("Secret", "default", "s"): "cannot read: forbidden"}
    view = app_view(app("a", phase="workflowSuspending", workflow=workflow), tracker, live, "", [
        event("a", "Scheduled", "2026-01-01T10:00:00Z", "", "shard-0", "admission")], [], [])
    assert [(s.name, s.phase, s.duration) for s in view.steps] == [("approve", "suspending", "1m30s")]
    assert [(r.kind, r.health) for r in view.resources] == [("Deployment", "unhealthy"), ("Secret", "unknown")]
    assert view.actions == ["resume", "terminate", "restart", "reschedule"]
    assert view.events[0]["reason"] == "Scheduled"


def test_the_live_stream_sends_each_page_its_own_topics_once_per_burst():
    hub = Hub(debounce=0.05).start()
    try:
        fleet, one = hub.stream(["fleet"]), hub.stream([], app="default/a")
        assert next(fleet) == next(one) == ": connected\n\n"
        for _ in range(5):
            hub.touch("fleet", "apps", "app:default/a", "app:default/b")
        assert next(fleet) == "event: fleet\ndata: changed\n\n"
        assert next(one) == "event: app\ndata: changed\n\n"
    finally:
        hub.stop()


def test_the_vendored_javascript_is_the_released_files():
    readme = (STATIC / "README.md").read_text()
    for name in ("htmx.min.js", "sse.min.js"):
        digest = hashlib.sha256((STATIC / name).read_bytes()).hexdigest()
        assert f"`{name}`" in readme and digest in readme, name
