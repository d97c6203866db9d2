"""Kill a random shard process of a running `velashard dev` (from DIR/processes.json), as a chaos step.

The local kubelet marks its pod NotReady within 2 s and restarts it with backoff; if it stays
down longer than the master's --orphan-grace-period, its applications move to other shards.

    python hack/kill_shard.py [--dir .velashard] [--shard shard-0] [--signal KILL]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default=".velashard")
    parser.add_argument("--shard", help="the shard id whose process to kill, e.g. shard-0 (default: any slave shard)")
    parser.add_argument("--signal", default="KILL", choices=["KILL", "TERM", "INT"])
    args = parser.parse_args()
    try:
        with open(os.path.join(args.dir, "processes.json")) as fh:
            processes = json.load(fh)
    except OSError as err:
        print(f"cannot read {args.dir}/processes.json ({err.strerror}); is velashard dev running?", file=sys.stderr)
        return 2
    # Pod names start with their Deployment's name: the addon's shards are velashard-shard-<i>-<hash>-<n>. The id
    # is matched between dashes: the master's pod, velashard-<hash>-<n>, holds "shard-0" when its hash starts with 0.
    wanted = f"-{args.shard}-" if args.shard else "-shard-"
    candidates = [p for p in processes if p.get("pid") and wanted in p["name"]]
    if not candidates:
        print("no shard process to kill", file=sys.stderr)
        return 2
    victim = random.choice(candidates)
    os.kill(victim["pid"], getattr(signal, f"SIG{args.signal}"))
    print(f"sent SIG{args.signal} to {victim['name']} (pid {victim['pid']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
