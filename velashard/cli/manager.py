"""`velashard [FLAGS]`: the controller manager."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import signal
import socket
import sys
import threading
import uuid
from urllib.parse import urlsplit

from velashard.apis import labels
from velashard.apis.oam import APPLICATIONS, WORKFLOW_RUNS
from velashard.apis.validation import is_valid_label_value
from velashard.cli.flags import LOG_FORMATS, LOG_LEVELS, GoBool, duration
from velashard.core.authors import DEFAULT_GROUP_PATTERN, DEFAULT_USER, AuthConfig, author_of
from velashard.core.cachesnapshot import CacheSnapshots, app_caches
from velashard.core.controller import ApplicationController
from velashard.core.controller import Options as AppOptions
from velashard.core.defstatus import DefinitionChecker
from velashard.core.runcontroller import run_controller
from velashard.kube.client import KubeClient, load_configuration
from velashard.kube.identity import whoami
from velashard.kube.manager import LeaderElectionConfig, Manager
from velashard.heap import freeze_survivors
from velashard.observability import fields, parse_addr, setup_logging, time_garbage_collections
from velashard.sharding.discovery import ShardDiscovery
from velashard.sharding.keys import SigningKey
from velashard.sharding.loads import load_annotations
from velashard.sharding.scheduler import BackgroundScheduler
from velashard.webhook.runner import WebhookOptions, WebhookRunner, default_bind_address
from velashard.workflow.backoff import Settings as WorkflowSettings
from velashard.workflow.egress import EgressPolicy, parse_allowed

log = logging.getLogger("velashard.manager")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="velashard", description="velashard controller manager")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config, else $KUBECONFIG or "
                                        "~/.kube/config)")
    p.add_argument("--kube-api-qps", type=float, default=50.0, help="client-side requests per second (default 50)")
    p.add_argument("--kube-api-burst", type=int, default=100, help="client-side burst (default 100)")
    p.add_argument("--concurrent-reconciles", type=int, default=4, help="worker threads per controller (default 4)")
    p.add_argument("--shard-id", default="master", help="this process's shard id (default master)")
    p.add_argument("--enable-leader-election", action=GoBool,
                   help="run one active replica per shard, elected on a Lease")
    p.add_argument("--leader-election-namespace", default=None,
                   help="namespace of the shard's Lease (default: --namespace)")
    p.add_argument("--leader-election-id", default="velashard",
                   help="lease name prefix; the shard id is appended (default velashard)")
    p.add_argument("--leader-election-identity", default="",
                   help="this replica's identity (default hostname plus a random suffix)")
    p.add_argument("--leader-election-lease-duration", "--lease-duration", dest="lease_duration", type=duration,
                   default=15.0, help="how long a standby waits for an unrenewed lease, e.g. 15s (default 15s)")
    p.add_argument("--leader-election-renew-deadline", "--renew-deadline", dest="renew_deadline", type=duration,
                   default=10.0, help="the leader gives up if it cannot renew for this long (default 10s)")
    p.add_argument("--leader-election-retry-period", "--retry-period", dest="retry_period", type=duration,
                   default=2.0, help="time between lease reads and renewals (default 2s)")
    p.add_argument("--metrics-addr", default=":8080", help="Prometheus metrics address (default :8080)")
    p.add_argument("--health-addr", default=":9440", help="/healthz and /readyz address (default :9440)")
    p.add_argument("--enable-sharding", action=GoBool,
                   help="run as a shard: the master (--shard-id=master) or a slave (any other id)")
    p.add_argument("--schedulable-shards", default=None,
                   help="comma-separated shard ids to schedule to, instead of discovering ready shard pods")
    p.add_argument("--sharding-slave-discovery-resync-period", type=duration, default=300.0,
                   help="time between full re-reads of the shard pods, e.g. 5m (default 5m)")
    p.add_argument("--shard-scheduler", default="round-robin",
                   choices=["round-robin", "random", "consistent-hash", "least-loaded"])
    p.add_argument("--namespace", default=os.environ.get("POD_NAMESPACE", "vela-system"),
                   help="the controller's runtime namespace: shard pods and load reports live here")
    p.add_argument("--reschedule-period", type=duration, default=30.0,
                   help="time between background scheduling passes, e.g. 30s (default 30s)")
    p.add_argument("--reschedule-workers", type=int, default=8,
                   help="applications the background scheduler moves at once (default 8)")
    p.add_argument("--orphan-grace-period", type=duration, default=60.0,
                   help="how long a shard may be unavailable before its apps move, e.g. 1m (default 1m)")
    p.add_argument("--feature-gates", default="",
                   help="comma-separated Gate=true|false (AuthenticateApplication, default true; "
                        "DisableWebhookAutoSchedule, ValidateComponentWhenSharding)")
    p.add_argument("--authentication-with-user", action=GoBool, default=True,
                   help="record who writes an application and act as that user (default true; false: every app "
                        "acts as --authentication-default-user with its recorded groups)")
    p.add_argument("--authentication-default-user", default=DEFAULT_USER,
                   help=f"the user an application with no recorded author acts as (default {DEFAULT_USER})")
    p.add_argument("--authentication-group-pattern", default=DEFAULT_GROUP_PATTERN,
                   help="which of the writer's groups are recorded and acted as: * matches any text, | separates "
                        f"alternatives (default {DEFAULT_GROUP_PATTERN})")
    p.add_argument("--webhook-port", type=int, default=9443, help="HTTPS port of the admission webhooks (master)")
    p.add_argument("--webhook-bind-address", default=None, metavar="IP",
                   help="address the admission webhooks listen on (default: 0.0.0.0 inside a pod, i.e. when "
                        "KUBERNETES_SERVICE_HOST is set, else 127.0.0.1)")
    p.add_argument("--webhook-url", default=None,
                   help="out of cluster: create the webhook configurations pointing at this https://HOST:PORT")
    p.add_argument("--webhook-cert-dir", default=None,
                   help="ca.crt, tls.crt and tls.key to serve, read where they are, again when they change (e.g. a "
                        "cert-manager Secret's volume; default: made by the leader, shared by every replica in the "
                        "Secret <webhook service>-certs, renewed before they expire)")
    p.add_argument("--webhook-service-name", default="velashard-webhook")
    p.add_argument("--mutating-webhook-configuration-name", default="velashard-mutating")
    p.add_argument("--validating-webhook-configuration-name", default="velashard-validating")
    p.add_argument("--validating-failure-policy", choices=["Fail", "Ignore"], default="Fail")
    p.add_argument("--disable-webhooks", action=GoBool, help="master without admission webhooks")
    p.add_argument("--use-webhook", action=GoBool, default=None,
                   help="KubeVela's switch for the admission webhooks: without sharding they are served only with "
                        "--use-webhook; --use-webhook=false is --disable-webhooks "
                        "(default: a sharded master serves them)")
    p.add_argument("--controller-identity", default=None,
                   help="the user this controller acts as (default: who a SelfSubjectReview says we are, else "
                        "system:serviceaccount:<namespace>:vela-core); it may move applications between shards")
    p.add_argument("--shard-admin-users", default="", help="comma-separated users who may move applications")
    p.add_argument("--application-revision-limit", type=int, default=10,
                   help="ApplicationRevisions kept per application (default 10)")
    p.add_argument("--state-keep-interval", type=duration, default=60.0,
                   help="time between re-applies that undo drift of managed resources when they are not cached, "
                        "e.g. 1m (default 1m)")
    p.add_argument("--workflow-deadline", type=duration, default=1800.0,
                   help="an app whose workflow has not finished this long after it started gets the condition "
                        "WorkflowDeadline=False; per app: annotation velashard.io/workflow-deadline (default 30m; "
                        "0: none)")
    p.add_argument("--unconverged-threshold", type=duration, default=600.0,
                   help="apps not converged for longer count in velashard_applications_not_converged (default 10m)")
    p.add_argument("--application-re-sync-period", type=duration, default=300.0,
                   help="time between periodic re-syncs of every application, from the caches, e.g. 5m (default 5m)")
    p.add_argument("--cache-managed-resources", action=GoBool, default=True,
                   help="watch and cache the resources apps manage, selected by this process's shard label; their "
                        "changes wake their app at once (default: yes; without, they are read from the API and "
                        "settled apps polled every --state-keep-interval)")
    p.add_argument("--no-cache-managed-resources", dest="cache_managed_resources", action="store_false",
                   help=argparse.SUPPRESS)  # the same as --cache-managed-resources=false
    p.add_argument("--cache-dir", default="", metavar="DIR",
                   help="where the Application controller keeps its caches (renderings, health verdicts, objects found "
                        "in sync) across restarts, one file per shard id (e.g. on an emptyDir); empty (the default): "
                        "in memory only")
    p.add_argument("--log-format", choices=LOG_FORMATS, default="text")
    p.add_argument("--log-level", choices=LOG_LEVELS, default="info")
    p.add_argument("--log-debug", action=GoBool, help="KubeVela's switch for debug logs: --log-level=debug")
    kubevela = p.add_argument_group("KubeVela flags accepted so that its chart's args work; they have no effect here")
    for flag in ("--log-file-path", "--disable-caps", "--system-definition-namespace", "--oam-spec-ver",
                 "--storage-driver"):
        kubevela.add_argument(flag, dest=_ignored(flag), default=None, metavar="VALUE")
    p.add_argument("--max-workflow-wait-backoff-time", type=int, default=60, metavar="SECONDS",
                   help="the longest a workflow waits before it runs a waiting step again (default 60)")
    p.add_argument("--max-workflow-failed-backoff-time", type=int, default=300, metavar="SECONDS",
                   help="the longest a workflow with a failed step waits before it runs again (default 300)")
    p.add_argument("--max-workflow-step-error-retry-times", type=int, default=10, metavar="N",
                   help="how often a step that errs is run again before it fails for good (default 10)")
    p.add_argument("--workflow-http-block-loopback", action=GoBool, default=True,
                   help="refuse steps' requests to loopback addresses (default true); link-local and cloud metadata "
                        "addresses, this pod's addresses and the controller's own ports are refused always")
    p.add_argument("--workflow-http-block-private", action=GoBool, default=False,
                   help="refuse steps' requests to private addresses (10/8, 172.16/12, 192.168/16, fc00::/7; "
                        "default false: in-cluster services live there)")
    p.add_argument("--workflow-http-allow", default="", metavar="ADDRESS[:PORT],...",
                   help="comma-separated addresses or networks, each with an optional :PORT, that steps may call "
                        "even where the two flags above refuse (e.g. 127.0.0.1:8080 or [::1]:8080)")
    for flag in ("--log-file-max-size", "--definition-revision-limit", "--revision-limit"):
        kubevela.add_argument(flag, dest=_ignored(flag), type=int, default=None, metavar="N")
    for flag in ("--enable-cluster-gateway", "--enable-cluster-metrics", "--perf-enabled",
                 "--autogen-workload-definition"):
        kubevela.add_argument(flag, dest=_ignored(flag), action=GoBool, default=None)
    for flag in ("--informer-sync-period", "--cluster-metrics-interval"):
        kubevela.add_argument(flag, dest=_ignored(flag), type=duration, default=None, metavar="DURATION")
    return p


_IGNORED_PREFIX = "kubevela_ignored__"


def _ignored(flag: str) -> str:
    return _IGNORED_PREFIX + flag[2:].replace("-", "_")


def ignored_flags(args: argparse.Namespace) -> list[str]:
    """The KubeVela-only flags given, which this controller accepts and ignores."""
    return sorted("--" + name[len(_IGNORED_PREFIX):].replace("_", "-") for name, value in vars(args).items()
                  if name.startswith(_IGNORED_PREFIX) and value is not None)


FEATURE_GATES = ("AuthenticateApplication", "DisableWebhookAutoSchedule", "ValidateComponentWhenSharding")


def parse_feature_gates(text: str) -> dict[str, bool]:
    gates = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if name not in FEATURE_GATES or not sep or value.lower() not in ("true", "false"):
            raise ValueError(f"{item!r}: expected one of {', '.join(FEATURE_GATES)} =true|false")
        gates[name] = value.lower() == "true"
    return gates


def lease_name(prefix: str, shard_id: str) -> str:
    return f"{prefix}-{shard_id}"


def validate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    problems = is_valid_label_value(args.shard_id) if args.shard_id else ["must not be empty"]
    if problems:
        parser.error(f"--shard-id {args.shard_id!r}: {problems[0]}")
    if args.kube_api_qps <= 0 or args.kube_api_burst < 1:
        parser.error("--kube-api-qps must be > 0 and --kube-api-burst >= 1")
    if args.application_revision_limit < 1 or args.state_keep_interval <= 0:
        parser.error("--application-revision-limit must be >= 1 and --state-keep-interval > 0")
    if args.concurrent_reconciles < 1:
        parser.error("--concurrent-reconciles must be at least 1")
    if args.application_re_sync_period <= 0:
        parser.error("--application-re-sync-period must be > 0")
    if not args.lease_duration > args.renew_deadline > args.retry_period > 0:
        parser.error("need --lease-duration > --renew-deadline > --retry-period > 0")
    try:
        parse_feature_gates(args.feature_gates)
    except ValueError as err:
        parser.error(f"--feature-gates {err}")
    if args.schedulable_shards is not None:
        for shard in filter(None, args.schedulable_shards.split(",")):
            if is_valid_label_value(shard):
                parser.error(f"--schedulable-shards: {shard!r} is not a valid shard id")
    if args.webhook_url and not args.webhook_url.startswith("https://"):
        parser.error(f"--webhook-url {args.webhook_url!r}: must be https://HOST:PORT")
    if not 0 < args.webhook_port < 65536:
        parser.error("--webhook-port must be between 1 and 65535")
    if args.webhook_bind_address is not None:
        try:
            ipaddress.ip_address(args.webhook_bind_address)
        except ValueError:
            parser.error(f"--webhook-bind-address {args.webhook_bind_address!r}: must be an IP address, "
                         f"e.g. 127.0.0.1 or 0.0.0.0")
    if args.reschedule_period <= 0 or args.orphan_grace_period < 0:
        parser.error("--reschedule-period must be > 0 and --orphan-grace-period >= 0")
    if args.reschedule_workers < 1:
        parser.error(f"--reschedule-workers must be at least 1, got {args.reschedule_workers}")
    for item in filter(None, (i.strip() for i in args.workflow_http_allow.split(","))):
        try:
            parse_allowed(item)
        except ValueError as err:
            parser.error(f"--workflow-http-allow: {err}")
    for flag in ("metrics_addr", "health_addr"):
        value = getattr(args, flag)
        if value:
            try:
                parse_addr(value)
            except ValueError as err:
                parser.error(f"--{flag.replace('_', '-')}: {err}")


def _is_loopback_ip(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def auth_config(args: argparse.Namespace) -> AuthConfig:
    """KubeVela's authentication flags; the AuthenticateApplication gate is on unless turned off."""
    return AuthConfig(enabled=parse_feature_gates(args.feature_gates).get("AuthenticateApplication", True),
                      with_user=args.authentication_with_user, default_user=args.authentication_default_user,
                      group_pattern=args.authentication_group_pattern)


def own_addresses() -> frozenset:
    """This pod's addresses (POD_IP from the downward API, and what its host name resolves to), loopback aside."""
    found = set()
    names = [os.environ.get("POD_IP", ""), socket.gethostname()]
    for name in filter(None, names):
        try:
            infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError):
            continue
        for info in infos:
            address = ipaddress.ip_address(info[4][0].split("%")[0])
            if not address.is_loopback:
                found.add(address)
    return frozenset(found)


def egress_policy(args: argparse.Namespace, manager: Manager) -> EgressPolicy:
    """Where steps may send requests: the flags, the ports this process listens on, this pod's addresses."""
    ports = {p.port for p in (manager.metrics_server, manager.health_server) if p is not None}
    if args.shard_id == labels.MASTER_SHARD_ID or not args.enable_sharding:
        ports.add(args.webhook_port)
    return EgressPolicy(args.workflow_http_block_loopback, args.workflow_http_block_private,
                        tuple(parse_allowed(i) for i in args.workflow_http_allow.split(",") if i.strip()),
                        frozenset(ports), own_addresses())


def setup_controllers(manager: Manager, client: KubeClient, args: argparse.Namespace) -> None:
    """Without sharding one process serves every app (and, with --use-webhook, the webhooks that record authors
    and check definitions); a slave runs only the Application controller for its shard; the master also
    discovers shards, schedules apps in the background and serves the webhooks."""
    selector = f"{labels.SCHEDULED_SHARD_ID}={args.shard_id}" if args.enable_sharding else None
    auth = auth_config(args)
    apps = ApplicationController(manager, AppOptions(workers=args.concurrent_reconciles,
                                                     revision_limit=args.application_revision_limit,
                                                     state_keep_interval=args.state_keep_interval,
                                                     shard_selector=selector,
                                                     cache_managed=args.cache_managed_resources,
                                                     resync_period=args.application_re_sync_period,
                                                     workflow_deadline=args.workflow_deadline,
                                                     unconverged_threshold=args.unconverged_threshold,
                                                     assignment_key_namespace=args.namespace if args.enable_sharding
                                                     else None, auth=auth,
                                                     workflow=WorkflowSettings(
                                                         args.max_workflow_wait_backoff_time,
                                                         args.max_workflow_failed_backoff_time,
                                                         args.max_workflow_step_error_retry_times),
                                                     egress=egress_policy(args, manager)))
    if args.cache_dir:
        # read back before the workers start; written while this process leads (and once more as it stops)
        snapshots = CacheSnapshots(os.path.join(args.cache_dir, f"{args.shard_id}.cache"), app_caches())
        snapshots.load()
        manager.add_runnable(snapshots.start, snapshots.stop)
    runs = run_controller(manager, apps, apps.options)  # WorkflowRuns, beside the apps, on the same shard
    if not args.enable_sharding or args.shard_id == labels.MASTER_SHARD_ID:
        DefinitionChecker(manager)
    if args.enable_sharding:
        # The load report rides on the shard's Lease, renewed every retry period.
        manager.lease_annotations = lambda: load_annotations(len(apps.apps.store), apps.reconciled.count())
        if args.shard_id != labels.MASTER_SHARD_ID:
            return
    static = [s for s in (args.schedulable_shards or "").split(",") if s] or None  # empty means discover
    keys = None
    if args.enable_sharding:
        discovery = ShardDiscovery(manager, args.namespace, static, args.sharding_slave_discovery_resync_period)
        # Loaded (or made) once this master leads; the scheduler and the webhook sign what they assign with it.
        keys = SigningKey(client, args.namespace)
        manager.add_runnable(keys.start, keys.stop)
        for resource in (APPLICATIONS, WORKFLOW_RUNS) if runs is not None else (APPLICATIONS,):
            background = BackgroundScheduler(manager, discovery, args.shard_scheduler, args.namespace, keys,
                                             args.reschedule_period, args.orphan_grace_period,
                                             args.reschedule_workers, author=lambda app: client.acting_as(
                                                 author_of(app, auth)) if auth.enabled else client,
                                             resource=resource)
            manager.add_runnable(background.start, background.stop, background.heartbeat)
    # KubeVela serves its webhooks with --use-webhook; a sharded master serves them unless told not to.
    if args.disable_webhooks or (not args.enable_sharding and not args.use_webhook):
        return
    gates = parse_feature_gates(args.feature_gates)
    # The guard must trust whoever this master runs as: ask the API server unless told.
    identity = (args.controller_identity or whoami(client)
                or f"system:serviceaccount:{args.namespace}:vela-core")
    log.info("controller identity", extra=fields(identity=identity))
    bind_address = args.webhook_bind_address or default_bind_address(os.environ)
    url_host = urlsplit(args.webhook_url or "").hostname
    if url_host and url_host != "localhost" and not _is_loopback_ip(url_host) and _is_loopback_ip(bind_address):
        log.warning("the webhooks listen on loopback only but --webhook-url names another address; set "
                    "--webhook-bind-address", extra=fields(url=args.webhook_url, bind_address=bind_address))
    webhooks = WebhookRunner(client, WebhookOptions(
        port=args.webhook_port, bind_address=bind_address,
        namespace=args.namespace, service_name=args.webhook_service_name,
        mutating_name=args.mutating_webhook_configuration_name,
        validating_name=args.validating_webhook_configuration_name, url=args.webhook_url,
        cert_dir=args.webhook_cert_dir, validating_failure_policy=args.validating_failure_policy,
        schedulable_shards=",".join(static or []), strategy=args.shard_scheduler,
        privileged_users=tuple([identity] + [u for u in args.shard_admin_users.split(",") if u]),
        auto_schedule=not gates.get("DisableWebhookAutoSchedule", False),
        validate_components=gates.get("ValidateComponentWhenSharding", False), kubeconfig=args.kubeconfig,
        log_format=args.log_format, sharding=args.enable_sharding, auth=auth), keys)
    # Every replica serves admission; the leader registers the webhooks and renews the certificates every replica
    # serves. Readiness is the webhook's (the Service routes admission calls to every Ready replica): a replica
    # whose webhook does not answer is not ready, and a new leader still syncing its caches keeps admitting.
    manager.add_runnable(webhooks.start, webhooks.stop, leader_only=False)
    manager.add_runnable(webhooks.lead, lambda: None)
    manager.add_readiness_check(webhooks.readiness, instead_of_caches=args.enable_sharding)


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 with a message on bad flags
    validate(args, parser)
    if args.use_webhook is False:
        args.disable_webhooks = True
    if args.log_debug:
        args.log_level = "debug"
    setup_logging(args.shard_id, args.log_format, args.log_level)
    time_garbage_collections()
    freeze_survivors()  # full collections walk only what is new (velashard/heap.py)
    if ignored_flags(args):
        log.warning("KubeVela flags accepted but without effect here", extra=fields(
            flags=",".join(ignored_flags(args))))
    try:
        configuration = load_configuration(args.kubeconfig)
    except Exception as err:  # any config problem is the user's to fix: say so, exit 2
        print(f"velashard: cannot load Kubernetes configuration: {err}", file=sys.stderr)
        return 2
    client = KubeClient(configuration, shard_id=args.shard_id, qps=args.kube_api_qps, burst=args.kube_api_burst)
    # Every process holds its shard's Lease, and writes only while it does (kube/fence.py). With leader
    # election replicas compete for it; without, the one process takes it under a stable identity, so that a
    # restarted process need not wait out its predecessor's lease.
    if args.enable_leader_election:
        # The pod's name (the chart passes POD_NAME; a pod's hostname is its name too) says which replica leads.
        host = os.environ.get("POD_NAME") or socket.gethostname()
        identity = args.leader_election_identity or f"{host}_{uuid.uuid4().hex[:8]}"
    else:
        identity = args.leader_election_identity or args.shard_id
    election = LeaderElectionConfig(lease_name(args.leader_election_id, args.shard_id),
                                    args.leader_election_namespace or args.namespace, identity, args.lease_duration,
                                    args.renew_deadline, args.retry_period, labels={labels.SHARD_ID: args.shard_id})
    try:
        manager = Manager(client, args.shard_id, election, args.metrics_addr, args.health_addr)
    except OSError as err:
        print(f"velashard: cannot listen: {err}", file=sys.stderr)
        return 2
    setup_controllers(manager, client, args)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    log.info("starting manager", extra=fields(shard=args.shard_id, leader_election=args.enable_leader_election))
    return manager.run(stop)
