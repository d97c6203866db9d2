"""The collector's pauses are counted per generation, so that an operator (and a benchmark) sees what a large
shard's heap costs in collections, which profiles attribute to whatever allocated."""

from __future__ import annotations

import gc

from velashard.observability import REGISTRY, metrics_text, time_garbage_collections


def seconds(generation: int) -> float:
    return REGISTRY.get_sample_value("velashard_gc_seconds_total", {"generation": str(generation)}) or 0.0


def test_collections_are_counted_by_generation_once_installed() -> None:
    time_garbage_collections()
    time_garbage_collections()  # installed once, however often asked
    assert sum(1 for cb in gc.callbacks if getattr(cb, "__qualname__", "").startswith("_gc_timer")) == 1
    before = seconds(2), seconds(0)
    junk = [[i] for i in range(200_000)]  # something for a full collection to walk
    gc.collect(2)
    gc.collect(0)
    del junk
    assert seconds(2) > before[0] and seconds(0) > before[1]
    assert b'velashard_gc_seconds_total{generation="2"}' in metrics_text()
