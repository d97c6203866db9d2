"""Flag values as KubeVela's Go flags take them, the flags every command accepts, and the CLI's client.

Durations are Go durations ("500ms", "15s", "1h30m", "1m30.5s") or plain seconds; booleans may be
given as `--flag`, `--flag=true` or `--flag=false`, as pflag allows; `--kubeconfig`, `--log-level`
and `--log-format` may come before or after a subcommand.
"""

from __future__ import annotations

import argparse
import re
from typing import Any, Sequence

from velashard.cli.usage import UsageError
from velashard.durations import go_duration
from velashard.kube.client import KubeClient

_PLAIN_SECONDS = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)")


def parse_duration(text: str, allow_negative: bool = False) -> float:
    """Seconds from a Go duration or a plain number of seconds; ValueError says what is wrong."""
    value = text.strip()
    if _PLAIN_SECONDS.fullmatch(value):
        seconds = float(value)
    else:
        try:
            seconds = go_duration(value)
        except ValueError:
            raise ValueError(f"invalid duration {text!r}: use a Go duration (500ms, 15s, 5m, 1h30m) or seconds (15)")
    if seconds < 0 and not allow_negative:
        raise ValueError(f"invalid duration {text!r}: must not be negative")
    return seconds


def duration(text: str) -> float:
    """argparse type for a non-negative duration."""
    try:
        return parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err))


def format_duration(seconds: float) -> str:
    """Seconds as the shortest Go duration for help texts: 300 -> '5m', 90 -> '1m30s', 0.5 -> '500ms'."""
    if seconds and seconds < 1:
        return f"{seconds * 1000:g}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours:g}h" if hours else "") + (f"{minutes:g}m" if minutes else "") + (f"{secs:g}s" if secs else "")
    return text or "0s"


def parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "t", "1"):
        return True
    if lowered in ("false", "f", "0"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean {text!r}: use true or false")


class GoBool(argparse.Action):
    """A boolean flag that, as in Go, also takes an explicit value: `--x`, `--x=true`, `--x=false`."""

    def __init__(self, option_strings: Sequence[str], dest: str, default: Any = False, **kwargs: Any):
        kwargs.setdefault("metavar", "true|false")
        super().__init__(option_strings, dest, nargs="?", const=True, default=default, type=parse_bool, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)


# The flags every command takes, wherever they appear: name -> allowed values (None: any).
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")
GLOBAL_FLAGS: dict[str, tuple[str, ...] | None] = {
    "--kubeconfig": None, "--log-level": LOG_LEVELS, "--log-format": LOG_FORMATS}


def split_global_flags(argv: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """The global flags found anywhere before `--` (as `--flag V` or `--flag=V`), and the other arguments."""
    found: dict[str, str] = {}
    rest: list[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        name, eq, value = arg.partition("=")
        if name in GLOBAL_FLAGS:
            if not eq:
                if i + 1 >= len(args):
                    raise UsageError(f"{name} needs a value")
                value = args[i + 1]
                i += 1
            allowed = GLOBAL_FLAGS[name]
            if allowed is not None and value not in allowed:
                raise UsageError(f"{name} {value!r}: expected one of {', '.join(allowed)}")
            found[name[2:].replace("-", "_")] = value
        else:
            rest.append(arg)
        i += 1
    return found, rest


def as_arguments(found: dict[str, str]) -> list[str]:
    """Global flags back as arguments, for a parser that declares them itself."""
    return [f"--{name.replace('_', '-')}={value}" for name, value in found.items()]


def client(kubeconfig: str | None, shard_id: str = "cli") -> KubeClient:
    """The client of a CLI command, from `--kubeconfig` (else in-cluster, $KUBECONFIG or ~/.kube/config)."""
    try:
        return KubeClient.from_kubeconfig(kubeconfig, shard_id=shard_id, component="velashard-cli")
    except Exception as err:  # any configuration problem is the user's to fix
        raise UsageError(f"cannot load Kubernetes configuration: {err}")
