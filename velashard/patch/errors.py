"""The error every patch function raises for a patch that cannot apply."""


class PatchError(ValueError):
    """A malformed patch, or one that cannot be applied; the message says which operation and path."""
