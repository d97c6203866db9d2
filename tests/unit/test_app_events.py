"""Which events of an app wake its reconcile: its own status writes do not, workflow operations do."""

from __future__ import annotations

import copy

from velashard.core.controller import app_changed


def app(status: dict | None = None, rv: str = "1") -> dict:
    obj = {"metadata": {"name": "web", "namespace": "ns", "resourceVersion": rv, "generation": 1},
           "spec": {"components": []}}
    if status is not None:
        obj["status"] = status
    return obj


def running(**workflow) -> dict:
    return {"status": "runningWorkflow", "workflow": {"appRevision": "web-v1", "mode": "StepByStep-DAG",
                                                      "suspend": False, "terminated": False, "finished": False,
                                                      **workflow}}


def test_the_first_status_of_a_run_is_our_own_write_not_an_operation():
    # suspend and terminated go from absent to false: nobody suspended or terminated anything
    assert not app_changed(app(None, "1"), app(running(), "2"))
    assert not app_changed(app({"status": "rendering"}, "1"), app(running(), "2"))


def test_a_run_finishing_wakes_nothing_but_operations_do():
    assert not app_changed(app(running(), "1"), app(running(finished=True), "2"))
    assert app_changed(app(running(), "1"), app(running(suspend=True), "2"))  # velashard workflow suspend
    assert app_changed(app(running(suspend=True), "1"), app(running(), "2"))  # resume
    assert app_changed(app(running(), "1"), app(running(terminated=True), "2"))  # terminate
    assert app_changed(app(running(finished=True), "1"), app(running(), "2"))  # restart of a finished run
    assert app_changed(app(running(), "1"), app({"status": "running"}, "2"))  # restart: the run's status dropped


def test_spec_and_metadata_changes_wake_it_and_resyncs_pass():
    old = app(running(), "1")
    new = copy.deepcopy(old)
    new["metadata"]["resourceVersion"] = "2"
    new["spec"]["components"] = [{"name": "web", "type": "webservice"}]
    assert app_changed(old, new)
    labelled = copy.deepcopy(old)
    labelled["metadata"]["labels"] = {"team": "a"}
    assert app_changed(old, labelled)
    assert app_changed(old, old) and app_changed(None, old)


def test_a_replay_after_a_fence_trip_is_never_taken_for_the_echo_of_our_finalizer_patch():
    """The finalizer patch's event came before its answer (a slow server): the event woke the app (the reconcile
    in progress would run it again), and the record of the write, made afterwards, stayed. The fence then
    tripped, the reconcile's next write was refused and the work queue dropped its key: the replay that stands
    in for it must queue the app, not be taken for that echo (an app was lost this way under load)."""
    from velashard.core.controller import app_event_wakes
    from velashard.core.echoes import OwnWrites

    writes = OwnWrites()
    before, patched = app(None, "1"), app(None, "2")
    patched["metadata"]["finalizers"] = ["app.oam.dev/resource-tracker-finalizer"]
    assert app_event_wakes(before, patched, writes)  # the event, before the answer was recorded
    writes.wrote(patched)  # the answer
    assert app_event_wakes(patched, patched, writes)  # the replay
    assert app_event_wakes(patched, patched, writes)  # and every resync after it
    # The usual order still skips our own write's event once.
    writes.wrote(patched)
    assert not app_event_wakes(before, patched, writes) and app_event_wakes(before, patched, writes)
