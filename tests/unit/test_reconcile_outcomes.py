"""The one error model: how the controller runner treats each way a reconcile can end."""

from __future__ import annotations

import logging

import pytest

from velashard.kube import errors
from velashard.kube.controller import DONE, Controller, Retry, Terminal, requeue_after
from velashard.kube.workqueue import WorkQueue


class SpyQueue(WorkQueue):
    """A real queue that also records the delays it was asked for."""

    def __init__(self, name: str):
        super().__init__(name)
        self.delays: list[float] = []

    def add_after(self, item, delay: float) -> None:
        self.delays.append(delay)
        super().add_after(item, delay)


def run_once(outcome) -> tuple[SpyQueue, Controller]:
    def reconcile(_key: str):
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    queue = SpyQueue("unit-outcomes")
    controller = Controller("unit-outcomes", reconcile, queue=queue)
    queue.add_rate_limited("k")  # an earlier failure, so forgetting it shows
    queue.delays.clear()
    controller._process("k")
    return queue, controller


@pytest.mark.parametrize("outcome,delays,failures", [
    (DONE, [], 0),
    (requeue_after(30), [30], 0),
    (Retry("waiting for a dependency", after=7), [7], 0),
    (Terminal("bad input, reported in status"), [], 0),
])
def test_each_outcome_schedules_what_it_says(outcome, delays, failures):
    queue, _ = run_once(outcome)
    assert queue.delays == delays
    assert queue.num_requeues("k") == failures
    queue.shutdown()


@pytest.mark.parametrize("outcome", [Retry("the app changed meanwhile"), errors.Conflict(409, "Conflict", "stale"),
                                     errors.AlreadyExists(409, "AlreadyExists", "exists")])
def test_races_back_off_and_log_one_line_without_a_traceback(outcome, caplog):
    caplog.set_level(logging.INFO, logger="velashard.kube.controller")
    queue, _ = run_once(outcome)
    assert queue.num_requeues("k") == 2  # backoff grows with each failure
    lines = [r for r in caplog.records if r.name == "velashard.kube.controller"]
    assert [r.getMessage() for r in lines] == ["reconcile did not complete"]
    assert not lines[0].exc_info and lines[0].fields["result"] == "retry"
    queue.shutdown()


def test_a_terminal_outcome_is_logged_once_and_not_retried(caplog):
    caplog.set_level(logging.INFO, logger="velashard.kube.controller")
    queue, _ = run_once(Terminal("policy type foo is unknown"))
    lines = [r for r in caplog.records if r.name == "velashard.kube.controller"]
    assert [(r.getMessage(), r.fields["error"]) for r in lines] == [("reconcile stopped", "policy type foo is unknown")]
    # Not retried: no delayed add asked for and its failures forgotten. (The queue's length would race with the
    # delayed add run_once's earlier failure scheduled, on a loaded machine.)
    assert queue.delays == [] and queue.num_requeues("k") == 0
    queue.shutdown()
