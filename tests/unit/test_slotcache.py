"""One result per slot: a new digest replaces the slot's entry; the least recently used slots go first."""

from __future__ import annotations

from velashard.core.slotcache import SlotCache, digest


def test_a_slot_keeps_the_result_of_its_latest_inputs_only():
    cache = SlotCache(maxsize=2)
    web, db = digest("ns", "app", "web"), digest("ns", "app", "db")
    cache.put(web, digest("v1"), "ok")
    assert cache.get(web, digest("v1")) == "ok" and cache.get(web, digest("v2")) is None
    cache.put(web, digest("v2"), "better")
    assert cache.get(web, digest("v1")) is None and len(cache) == 1
    cache.put(db, digest("v1"), "db")
    cache.get(web, digest("v2"))  # web is now the most recently used
    cache.put(digest("other"), digest("v1"), "x")
    assert cache.get(db, digest("v1")) is None and cache.get(web, digest("v2")) == "better"


def test_packed_results_come_back_as_private_copies():
    cache = SlotCache(maxsize=4, packed=True)
    slot, inputs = digest("a"), digest("1")
    cache.put(slot, inputs, {"objects": [{"kind": "Deployment"}]})
    first = cache.get(slot, inputs)
    first["objects"].clear()
    assert cache.get(slot, inputs) == {"objects": [{"kind": "Deployment"}]}

