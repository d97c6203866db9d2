"""What makes placements, moves and convergence visible outside the dashboard: the Events of a placement or a
move, the workflow's deadline condition, the per-shard phase metrics. Pure."""

from __future__ import annotations

from datetime import datetime, timezone

from velashard.apis import labels
from velashard.core.appmetrics import PhaseBook, unconverged_since
from velashard.core.appworkflow import deadline
from velashard.sharding.move import placement_event

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


def test_placements_and_moves_say_from_where_to_where_and_why():
    assert placement_event(None, "shard-1", "unscheduled") == (
        "Scheduled", "scheduled to shard shard-1: it had no shard",
        {labels.EVENT_TO_SHARD: "shard-1", labels.EVENT_MOVE_REASON: "unscheduled"})
    reason, message, data = placement_event("shard-0", "shard-1", "orphaned", "2026-01-01T11:59:00Z")
    assert reason == "Rescheduled" and message == \
        "rescheduled from shard shard-0 to shard shard-1: shard shard-0 unavailable since 2026-01-01T11:59:00Z"
    assert data == {labels.EVENT_TO_SHARD: "shard-1", labels.EVENT_FROM_SHARD: "shard-0",
                    labels.EVENT_MOVE_REASON: "orphaned", labels.EVENT_SHARD_LOST_AT: "2026-01-01T11:59:00Z"}
    assert placement_event("shard-0", "shard-2", "manual")[1].endswith("rescheduled by hand")


def test_an_unfinished_workflow_gets_a_deadline_by_default_or_by_annotation():
    running = {"startTime": "2026-01-01T11:00:00Z", "suspend": True}
    ok, reason, message, due_in = deadline(running, None, 7200, NOW)
    assert (ok, reason, due_in) == (True, "WithinDeadline", 3600.0) and "--workflow-deadline 7200s" in message
    ok, reason, message, due_in = deadline(running, "30m", 7200, NOW)
    assert (ok, reason, due_in) == (False, "DeadlineExceeded", None) and "annotation 30m" in message
    assert deadline(running, "soon", 7200, NOW)[1] == "WithinDeadline"  # not a duration: the default holds
    assert deadline({**running, "finished": True}, "1s", 1, NOW) is None
    assert deadline({**running, "terminated": True}, "1s", 1, NOW) is None
    assert deadline(running, None, 0, NOW) is None and deadline({}, "1s", 1, NOW) is None


def app(name, phase, healthy=True, conditions=()):
    return {"metadata": {"name": name, "namespace": "default", "creationTimestamp": "2026-01-01T11:00:00Z"},
            "status": {"status": phase, "services": [{"healthy": healthy}], "conditions": list(conditions)}}


def test_phases_and_apps_not_converged_are_counted_per_shard():
    assert unconverged_since(app("a", "running")) is None
    stuck = app("b", "runningWorkflow", conditions=[{"status": "False", "lastTransitionTime": "2026-01-01T11:50:00Z"}])
    assert unconverged_since(stuck) == datetime(2026, 1, 1, 11, 50, tzinfo=timezone.utc).timestamp()
    book = PhaseBook(clock=lambda: NOW.timestamp())
    book.threshold("shard-0", 300)
    for a in (app("a", "running"), stuck, app("c", "runningWorkflow", healthy=False, conditions=[
            {"status": "False", "lastTransitionTime": "2026-01-01T11:58:00Z"}])):
        book.observe("shard-0", a)
    book.observe("shard-1", app("d", "running"))
    book.forget("shard-1", app("d", "running"))
    phases, late = book.collect()
    assert {tuple(s.labels.values()): s.value for s in phases.samples} == {
        ("shard-0", "running"): 1, ("shard-0", "runningWorkflow"): 2}
    assert [(s.labels, s.value) for s in late.samples] == [({"shard": "shard-0"}, 1)]


def test_an_app_observed_again_moves_between_the_counts():
    book = PhaseBook(clock=lambda: NOW.timestamp())
    book.threshold("shard-0", 300)
    stuck = app("b", "runningWorkflow", conditions=[{"status": "False", "lastTransitionTime": "2026-01-01T11:50:00Z"}])
    book.observe("shard-0", stuck)
    book.observe("shard-0", app("a", "running"))
    book.observe("shard-0", app("b", "running"))  # b converged
    phases, late = book.collect()
    assert {tuple(s.labels.values()): s.value for s in phases.samples} == {("shard-0", "running"): 2}
    assert [(s.labels, s.value) for s in late.samples] == [({"shard": "shard-0"}, 0)]
    book.forget("shard-0", app("b", "running"))
    book.forget("shard-0", app("b", "running"))  # a second delete event changes nothing
    phases, _ = book.collect()
    assert {tuple(s.labels.values()): s.value for s in phases.samples} == {("shard-0", "running"): 1}
