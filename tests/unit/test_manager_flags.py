"""Flag parsing of the controller manager: durations as KubeVela writes them, clear errors."""

from __future__ import annotations

import pytest

from velashard.cli.manager import build_parser, duration


@pytest.mark.parametrize("text,seconds", [("15", 15.0), ("1.5", 1.5), ("15s", 15.0), ("500ms", 0.5),
                                          ("1m30s", 90.0), ("2h", 7200.0)])
def test_durations(text, seconds):
    assert duration(text) == seconds


def test_kubevela_leader_election_flag_names_and_the_short_ones_mean_the_same():
    args = build_parser().parse_args(["--leader-election-lease-duration", "20s", "--renew-deadline", "12",
                                      "--leader-election-retry-period", "500ms"])
    assert (args.lease_duration, args.renew_deadline, args.retry_period) == (20.0, 12.0, 0.5)


@pytest.mark.parametrize("text", ["5x", "s", "1m 30s", ""])
def test_a_bad_duration_exits_2_naming_the_flag(text, capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["--lease-duration", text])
    assert exit_.value.code == 2
    assert "--leader-election-lease-duration/--lease-duration: invalid duration" in capsys.readouterr().err


def test_reschedule_workers_below_one_exits_2_naming_the_flag(capsys):
    from velashard.cli.manager import validate
    parser = build_parser()
    with pytest.raises(SystemExit) as exit_:
        validate(parser.parse_args(["--reschedule-workers", "0"]), parser)
    assert exit_.value.code == 2
    assert "--reschedule-workers must be at least 1, got 0" in capsys.readouterr().err
