"""The shard-assignment proofs this process verified (sharding/keys.py's AssignmentCheck), one slot per app: kept
in a snapshot (core/cachesnapshot.py) so that a restarted shard does not verify 40,000 signatures again."""

from __future__ import annotations

from velashard.core.slotcache import SlotCache

_VERDICTS = SlotCache()


def verdicts() -> SlotCache:
    return _VERDICTS
