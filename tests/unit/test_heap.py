"""A process (API server or controller) freezes what survives a full collection, once however often it is asked."""

from __future__ import annotations

import gc

from velashard import heap


def test_survivors_of_a_full_collection_are_frozen():
    callbacks = list(gc.callbacks)
    try:
        heap.freeze_survivors()
        heap.freeze_survivors()
        assert len(gc.callbacks) == len(callbacks) + 1
        kept = [{"metadata": {"name": str(i)}} for i in range(100)]
        before = gc.get_freeze_count()
        gc.collect(1)
        assert gc.get_freeze_count() == before  # a young collection freezes nothing
        gc.collect()
        assert gc.get_freeze_count() >= before + len(kept)
    finally:
        gc.callbacks[:] = callbacks
        gc.unfreeze()
