"""The error every subcommand raises for bad input: printed on stderr with exit code 2."""


class UsageError(Exception):
    """A bad flag or argument, or something the user must fix first."""
