"""`velashard reschedule APP -n NS --shard-id ID`: move an application with its revisions and trackers."""

from velashard.cli.shards import add_reschedule_arguments as add_arguments
from velashard.cli.shards import run_reschedule as run

__all__ = ["add_arguments", "run"]
