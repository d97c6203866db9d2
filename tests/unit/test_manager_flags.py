"""Flag parsing: durations and booleans as KubeVela writes them, KubeVela's names, global flags, clear errors."""

from __future__ import annotations

import pytest

from velashard.cli.flags import duration, format_duration, parse_duration, split_global_flags
from velashard.cli.main import main
from velashard.cli.manager import build_parser, ignored_flags, validate
from velashard.cli.usage import UsageError
from velashard.webhook.runner import default_bind_address, host_port


@pytest.mark.parametrize("text,seconds", [("15", 15.0), ("1.5", 1.5), ("15s", 15.0), ("500ms", 0.5),
                                          ("1m30s", 90.0), ("2h", 7200.0), ("5m", 300.0), ("1h30m", 5400.0),
                                          ("1m30.5s", 90.5), ("0", 0.0), ("0s", 0.0), (".5s", 0.5),
                                          ("1.s", 1.0), ("300us", 0.0003), ("2µs", 2e-06), ("10ns", 1e-08),
                                          ("+5s", 5.0), ("1h0m0s", 3600.0)])
def test_go_durations_and_plain_seconds(text, seconds):
    assert duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["-5s", "-1", "-1m30s"])
def test_negative_durations_are_rejected_unless_asked_for(text):
    with pytest.raises(ValueError, match="must not be negative"):
        parse_duration(text)
    assert parse_duration(text, allow_negative=True) < 0


@pytest.mark.parametrize("text", ["5x", "s", "1m 30s", "", "1d", "m5", "1..5s", "--5s", "nan", "inf",
                                  "5S", "1m30"])
def test_malformed_durations_say_what_to_write(text):
    with pytest.raises(ValueError, match="use a Go duration"):
        parse_duration(text)


@pytest.mark.parametrize("seconds,text", [(300, "5m"), (90, "1m30s"), (0.5, "500ms"), (5400, "1h30m"), (0, "0s")])
def test_durations_print_as_go_writes_them(seconds, text):
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("flag,dest", [("--orphan-grace-period", "orphan_grace_period"),
                                       ("--reschedule-period", "reschedule_period"),
                                       ("--sharding-slave-discovery-resync-period",
                                        "sharding_slave_discovery_resync_period"),
                                       ("--state-keep-interval", "state_keep_interval"),
                                       ("--application-re-sync-period", "application_re_sync_period"),
                                       ("--leader-election-lease-duration", "lease_duration")])
def test_every_duration_flag_takes_go_durations(flag, dest):
    assert getattr(build_parser().parse_args([f"{flag}=1m30s"]), dest) == 90.0
    assert getattr(build_parser().parse_args([flag, "2s"]), dest) == 2.0
    assert getattr(build_parser().parse_args([flag, "7"]), dest) == 7.0


def test_application_re_sync_period_defaults_to_kubevelas_five_minutes():
    assert build_parser().parse_args([]).application_re_sync_period == 300.0


@pytest.mark.parametrize("args,value", [(["--enable-sharding"], True), (["--enable-sharding=true"], True),
                                        (["--enable-sharding=false"], False), ([], False)])
def test_boolean_flags_take_go_values(args, value):
    assert build_parser().parse_args(args).enable_sharding is value


def test_kubevela_chart_args_parse_and_the_ones_without_effect_are_named():
    chart = ["--metrics-addr=:8080", "--enable-leader-election", "--log-debug=true", "--use-webhook=true",
             "--webhook-port=9443", "--webhook-cert-dir=/etc/k8s-webhook-certs", "--health-addr=:9440",
             "--disable-caps=all", "--system-definition-namespace=vela-system", "--application-revision-limit=2",
             "--definition-revision-limit=2", "--oam-spec-ver=v0.3", "--enable-cluster-gateway",
             "--application-re-sync-period=5m", "--concurrent-reconciles=4", "--kube-api-qps=400",
             "--kube-api-burst=600", "--max-workflow-wait-backoff-time=60",
             "--max-workflow-failed-backoff-time=300", "--max-workflow-step-error-retry-times=10",
             "--informer-sync-period=10h", "--enable-sharding", "--shard-id=shard-1",
             "--sharding-slave-discovery-resync-period=5m", "--feature-gates=ValidateComponentWhenSharding=true"]
    parser = build_parser()
    args = parser.parse_args(chart)
    validate(args, parser)
    assert args.log_debug and args.use_webhook and args.enable_leader_election and args.enable_sharding
    assert (args.application_re_sync_period, args.kube_api_qps, args.application_revision_limit) == (300.0, 400.0, 2)
    assert ignored_flags(args) == ["--definition-revision-limit", "--disable-caps", "--enable-cluster-gateway",
                                   "--informer-sync-period", "--oam-spec-ver", "--system-definition-namespace"]
    assert (args.max_workflow_wait_backoff_time, args.max_workflow_failed_backoff_time,
            args.max_workflow_step_error_retry_times) == (60, 300, 10)
    assert ignored_flags(parser.parse_args([])) == []


def test_global_flags_are_found_before_and_after_the_subcommand():
    assert split_global_flags(["--kubeconfig", "K", "addon", "list"]) == ({"kubeconfig": "K"}, ["addon", "list"])
    assert split_global_flags(["addon", "list", "--kubeconfig=K", "--log-level", "debug"]) == (
        {"kubeconfig": "K", "log_level": "debug"}, ["addon", "list"])
    assert split_global_flags(["resume", "--", "--kubeconfig"]) == ({}, ["resume", "--", "--kubeconfig"])
    with pytest.raises(UsageError, match="--log-format 'xml': expected one of text, json"):
        split_global_flags(["--log-format", "xml"])
    with pytest.raises(UsageError, match="--kubeconfig needs a value"):
        split_global_flags(["addon", "list", "--kubeconfig"])


def test_addon_list_takes_kubeconfig_after_the_subcommand(tmp_path, capsys):
    assert main(["addon", "list", "--kubeconfig", str(tmp_path / "k"), "--log-level=debug"]) == 0
    assert "vela-core-shard-manager" in capsys.readouterr().out


def test_a_missing_kubeconfig_after_the_subcommand_is_a_usage_error(tmp_path, capsys):
    assert main(["shards", "--kubeconfig", str(tmp_path / "missing")]) == 2
    assert "cannot load Kubernetes configuration" in capsys.readouterr().err


def test_a_bad_global_flag_exits_2(capsys):
    assert main(["addon", "list", "--log-level", "loud"]) == 2
    assert "--log-level 'loud'" in capsys.readouterr().err


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
    parser = build_parser()
    with pytest.raises(SystemExit) as exit_:
        validate(parser.parse_args(["--reschedule-workers", "0"]), parser)
    assert exit_.value.code == 2
    assert "--reschedule-workers must be at least 1, got 0" in capsys.readouterr().err


def test_webhooks_listen_on_every_interface_only_inside_a_pod():
    assert default_bind_address({}) == "127.0.0.1"
    assert default_bind_address({"KUBERNETES_SERVICE_HOST": "10.96.0.1"}) == "0.0.0.0"
    assert build_parser().parse_args([]).webhook_bind_address is None  # resolved from the environment at start
    assert (host_port("127.0.0.1", 9443), host_port("::", 9443)) == ("127.0.0.1:9443", "[::]:9443")


@pytest.mark.parametrize("value", ["0.0.0.0:9443", "localhost", "all", ""])
def test_a_webhook_bind_address_that_is_not_an_ip_exits_2(value, capsys):
    parser = build_parser()
    with pytest.raises(SystemExit) as exit_:
        validate(parser.parse_args(["--webhook-bind-address", value]), parser)
    assert exit_.value.code == 2
    assert "--webhook-bind-address" in capsys.readouterr().err
