"""Entry point of the `velashard` program: dispatch to a subcommand or the controller manager.

`velashard [FLAGS]` with no subcommand runs the controller manager, so container args are just
flags, as in KubeVela's chart. Subcommands live in their own modules, each exposing
`add_arguments(parser)` and `run(args) -> int`. The global flags (`--kubeconfig`, `--log-level`,
`--log-format`) are taken from anywhere on the command line and set on every subcommand's arguments.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from velashard.cli.flags import as_arguments, split_global_flags
from velashard.cli.usage import UsageError

# subcommand name -> (module, one-line help); modules are imported lazily so that
# `velashard --help` stays fast and a broken optional subcommand cannot break the others.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "apiserver": ("velashard.cli.apiserver", "run the embedded Kubernetes API server"),
    "addon": ("velashard.cli.addon", "list, enable or disable addons (e.g. vela-core-shard-manager)"),
    "cue": ("velashard.cli.cue", "CUE: export, eval or vet files as the cue tool does (velashard's own evaluator)"),
    "dashboard": ("velashard.cli.dashboard", "a web UI of shards, apps and moves on 127.0.0.1, with your own kubeconfig"),
    "def": ("velashard.cli.definitions", "write, check, apply and inspect definitions (KubeVela's vela def)"),
    "dev": ("velashard.cli.dev", "run a sharded velashard on this machine with a live view, until Ctrl-C"),
    "delete": ("velashard.cli.delete", "delete an application and wait until what it made is collected (vela delete)"),
    "dry-run": ("velashard.cli.dryrun", "print the objects an application renders to, without applying them"),
    "install": ("velashard.cli.install", "install or upgrade the CRDs and built-in definitions"),
    "ls": ("velashard.cli.ls", "list applications with their components, health and shard (vela ls)"),
    "resume": ("velashard.cli.resume", "resume an application's suspended workflow"),
    "workflow": ("velashard.cli.workflow", "suspend, resume, terminate, restart, roll back an app's workflow; its logs"),
    "reschedule": ("velashard.cli.reschedule", "move an application to another shard, with its revisions and trackers"),
    "shards": ("velashard.cli.shards", "list shards: ready pods, leader, apps, heartbeat, availability"),
    "status": ("velashard.cli.status", "an application's status, resource tree or endpoints (vela status)"),
    "up": ("velashard.cli.up", "apply an application from a file, and wait until it runs (vela up -f)"),
}


def _subcommand_parser(name: str) -> tuple[argparse.ArgumentParser, object]:
    module_name, help_text = SUBCOMMANDS[name]
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=f"velashard {name}", description=help_text,
                                     epilog="global flags, before or after the subcommand: --kubeconfig FILE, "
                                            "--log-level debug|info|warning|error, --log-format text|json")
    module.add_arguments(parser)
    return parser, module


def _print_overview() -> None:
    print("usage: velashard [FLAGS]            run the controller manager")
    print("       velashard SUBCOMMAND [ARGS]")
    print()
    print("subcommands:")
    for name, (_, help_text) in SUBCOMMANDS.items():
        print(f"  {name:<12} {help_text}")
    print()
    print("Run `velashard --help-flags` for the controller manager's flags.")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        global_flags, args = split_global_flags(sys.argv[1:] if argv is None else argv)
    except UsageError as err:
        print(f"velashard: {err}", file=sys.stderr)
        return 2
    if args and args[0] in ("-h", "--help", "help"):
        _print_overview()
        return 0
    if args and not args[0].startswith("-"):
        name = args[0]
        if name not in SUBCOMMANDS:
            print(f"velashard: unknown subcommand {name!r}; known: {', '.join(SUBCOMMANDS)}", file=sys.stderr)
            return 2
        parser, module = _subcommand_parser(name)
        # argparse exits 2 with a message on bad flags; `velashard cue` takes files and flags in any order
        parse = parser.parse_intermixed_args if getattr(module, "INTERMIXED", False) else parser.parse_args
        parsed = parse(args[1:])
        for flag, default in (("kubeconfig", None), ("log_level", "warning"), ("log_format", "text")):
            setattr(parsed, flag, global_flags.get(flag, getattr(parsed, flag, default)))
        try:
            return int(module.run(parsed) or 0)
        except UsageError as err:
            print(f"velashard {name}: {err}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            return 130
    from velashard.cli import manager

    if args and args[0] == "--help-flags":
        args = ["--help"]
    return manager.main(args + as_arguments(global_flags))


if __name__ == "__main__":
    sys.exit(main())
