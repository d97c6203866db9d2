"""One result per slot: a new digest replaces the slot's entry; an app's slots go with it; the least recently used
owners go first beyond the bound."""

from __future__ import annotations

from velashard.core.slotcache import SlotCache, digest


def test_a_slot_keeps_the_result_of_its_latest_inputs_only():
    cache = SlotCache(maxsize=2)
    web, db = digest("web"), digest("db")
    cache.put("ns/app", web, digest("v1"), "ok")
    assert cache.get("ns/app", web, digest("v1")) == "ok" and cache.get("ns/app", web, digest("v2")) is None
    cache.put("ns/app", web, digest("v2"), "better")
    assert cache.get("ns/app", web, digest("v1")) is None and len(cache) == 1
    cache.put("ns/other", db, digest("v1"), "db")
    cache.get("ns/app", web, digest("v2"))  # ns/app is now the most recently used
    cache.put("ns/third", web, digest("v1"), "x")
    assert cache.get("ns/other", db, digest("v1")) is None and cache.get("ns/app", web, digest("v2")) == "better"


def test_an_app_leaving_takes_its_slots_and_no_other():
    cache = SlotCache()
    for owner in ("ns/a", "ns/b"):
        cache.put(owner, digest("web"), digest("v1"), owner)
        cache.put(owner, digest("db"), digest("v1"), owner)
    cache.forget("ns/a")
    assert cache.get("ns/a", digest("web"), digest("v1")) is None and len(cache) == 2
    assert cache.get("ns/b", digest("db"), digest("v1")) == "ns/b"


def test_a_shard_of_many_apps_keeps_every_apps_slots():
    """65,536 slots once held every entry; a shard of 40,000 apps of two components thrashed them at each re-sync."""
    cache = SlotCache()
    for i in range(40_000):
        for part in ("web", "worker"):
            cache.put(f"ns/app-{i}", digest(part), digest("v1"), i)
    assert len(cache) == 80_000 and cache.get("ns/app-0", digest("web"), digest("v1")) == 0


def test_packed_results_come_back_as_private_copies():
    cache = SlotCache(maxsize=4, packed=True)
    slot, inputs = digest("a"), digest("1")
    cache.put("ns/app", slot, inputs, {"objects": [{"kind": "Deployment"}]})
    first = cache.get("ns/app", slot, inputs)
    first["objects"].clear()
    assert cache.get("ns/app", slot, inputs) == {"objects": [{"kind": "Deployment"}]}
