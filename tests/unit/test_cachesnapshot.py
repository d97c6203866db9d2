"""The render and health caches in a file across restarts: read back only by the same code, whole or not at all;
a restored slot serves only its own inputs; what no app asks for goes; an app's own new result wins."""

from __future__ import annotations

import os
import time

from velashard.core.cachesnapshot import CacheSnapshots, Kept, code_fingerprint, json_codec, read, write
from velashard.core.slotcache import SlotCache, digest

WEB, V1, V2 = digest("web"), digest("v1"), digest("v2")


def caches() -> dict[str, Kept]:
    return {"render": Kept(SlotCache(packed=True)), "health": json_codec(SlotCache(), tuple)}


def filled() -> dict[str, Kept]:
    kept = caches()
    kept["render"].cache.put("ns/a", WEB, V1, {"workload": {"kind": "Deployment", "metadata": {"name": "ü"}}})
    kept["render"].cache.put("ns/b", WEB, V1, {"workload": {"kind": "Service"}})
    kept["health"].cache.put("ns/a", WEB, V1, (True, "Ready:3/3"))
    kept["health"].cache.put("ns/b", WEB, V1, (None, None))
    return kept


def test_a_restarted_process_finds_each_slot_for_its_own_inputs_only(tmp_path):
    path = str(tmp_path / "shard-0.cache")
    assert write(path, filled(), b"f" * 32) == 4
    again = caches()
    assert read(path, again, b"f" * 32) == 4
    render, verdicts = again["render"].cache, again["health"].cache
    assert render.get("ns/a", WEB, V1) == {"workload": {"kind": "Deployment", "metadata": {"name": "ü"}}}
    assert render.get("ns/a", WEB, V2) is None  # other inputs: computed again
    assert verdicts.get("ns/a", WEB, V1) == (True, "Ready:3/3") and verdicts.get("ns/b", WEB, V1) == (None, None)
    # the packer took the snapshot's dictionary: what it packs now and what it restored both unpack
    render.put("ns/c", WEB, V1, {"workload": {"kind": "Ingress"}})
    assert render.get("ns/c", WEB, V1) == {"workload": {"kind": "Ingress"}}
    assert render.get("ns/b", WEB, V1) == {"workload": {"kind": "Service"}}


def test_a_snapshot_of_other_code_or_a_damaged_one_restores_nothing(tmp_path):
    path = str(tmp_path / "shard-0.cache")
    write(path, filled(), b"f" * 32)
    other = caches()
    assert read(path, other, b"g" * 32) == 0 and len(other["render"].cache) == 0
    data = open(path, "rb").read()
    for damaged in (data[:-3], data + b"x", data[:60]):
        with open(path, "wb") as fh:
            fh.write(damaged)
        kept = caches()
        assert read(path, kept, b"f" * 32) == 0
        assert len(kept["render"].cache) == 0 and len(kept["health"].cache) == 0
    assert read(str(tmp_path / "missing"), caches(), b"f" * 32) == 0
    # Something else in its place (the emptyDir outlives the container: an error here would be a crash loop)
    os.mkdir(tmp_path / "a-directory")
    assert read(str(tmp_path / "a-directory"), caches(), b"f" * 32) == 0


def test_a_packer_that_packed_already_takes_the_restored_results_packed_again(tmp_path):
    path = str(tmp_path / "c")
    write(path, filled(), b"f" * 32)
    kept = caches()
    render = kept["render"].cache
    render.put("ns/z", WEB, V1, {"something": "else entirely", "n": [1, 2, 3]})  # its own dictionary now
    assert read(path, kept, b"f" * 32) == 4
    assert render.get("ns/a", WEB, V1) == {"workload": {"kind": "Deployment", "metadata": {"name": "ü"}}}
    assert render.get("ns/z", WEB, V1) == {"something": "else entirely", "n": [1, 2, 3]}


def test_what_the_process_computed_wins_and_unclaimed_slots_go(tmp_path):
    path = str(tmp_path / "c")
    write(path, filled(), b"f" * 32)
    kept = caches()
    verdicts = kept["health"].cache
    verdicts.put("ns/a", WEB, V2, (False, "Ready:1/3"))  # computed before the snapshot was read
    read(path, kept, b"f" * 32)
    assert verdicts.get("ns/a", WEB, V1) is None and verdicts.get("ns/a", WEB, V2) == (False, "Ready:1/3")
    assert "ns/b" in verdicts and verdicts.get("ns/b", WEB, V1) == (None, None)  # asked for: kept
    verdicts.forget("ns/b")
    assert "ns/b" not in verdicts
    read(path, kept, b"f" * 32)
    assert verdicts.drop_restored() == 1 and "ns/b" not in verdicts  # ns/b restored again, never asked for


def test_snapshots_are_written_when_the_caches_changed_and_once_more_on_stop(tmp_path):
    path = str(tmp_path / "dir" / "shard-0.cache")
    kept = caches()
    snapshots = CacheSnapshots(path, kept, interval=3600)
    assert snapshots.load() == 0
    assert not snapshots.save() and not os.path.exists(path)  # nothing changed
    kept["health"].cache.put("ns/a", WEB, V1, (True, "ok"))
    assert snapshots.save() and not snapshots.save()
    snapshots.start()
    kept["health"].cache.put("ns/a", WEB, V2, (False, "not yet"))
    snapshots.stop()
    restarted = caches()
    assert CacheSnapshots(path, restarted).load() == 1
    assert restarted["health"].cache.get("ns/a", WEB, V2) == (False, "not yet")


def test_restored_slots_no_one_asked_for_go_after_a_while(tmp_path):
    path = str(tmp_path / "c")
    write(path, filled(), code_fingerprint())
    kept = caches()
    snapshots = CacheSnapshots(path, kept, restored_ttl=0.0)
    assert snapshots.load() == 4
    assert kept["render"].cache.get("ns/a", WEB, V1) is not None
    assert snapshots.save()  # the unclaimed ns/b went: the file says so at once
    again = caches()
    # only the rendering asked for stays (ns/a's verdict was not asked for either)
    assert read(path, again, code_fingerprint()) == 1 and "ns/b" not in again["render"].cache
    assert again["render"].cache.get("ns/a", WEB, V1) is not None


def test_the_fingerprint_covers_the_source(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    before = code_fingerprint(str(tmp_path))
    (tmp_path / "a.py").write_text("x = 2\n")
    assert code_fingerprint(str(tmp_path)) != before


def test_a_snapshot_is_written_soon_after_the_caches_stop_changing(tmp_path):
    path = str(tmp_path / "c")
    kept = caches()
    snapshots = CacheSnapshots(path, kept, interval=3600, quiet=0.05)
    snapshots.load()
    snapshots.start()
    try:
        kept["health"].cache.put("ns/a", WEB, V1, (True, "ok"))
        deadline = time.monotonic() + 10
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert os.path.exists(path)  # long before the hour is up
    finally:
        snapshots.stop()


def test_writes_are_spaced_by_what_the_last_one_cost(tmp_path, monkeypatch):
    """A write that took 20 ms of CPU is followed by the next no sooner than 20 ms / WRITE_SHARE (1 s) later,
    however fast the caches change and settle (a shard of 40,000 apps writes a file of all of them)."""
    from velashard.core import cachesnapshot
    writes: list[float] = []
    real = cachesnapshot.write

    def costly(*args, **kwargs):
        writes.append(time.monotonic())
        started = time.thread_time()
        while time.thread_time() - started < 0.02:
            pass
        return real(*args, **kwargs)
    monkeypatch.setattr(cachesnapshot, "write", costly)
    kept = caches()
    snapshots = CacheSnapshots(str(tmp_path / "c"), kept, interval=0.05, quiet=0.05)
    snapshots.load()
    snapshots.start()
    try:
        deadline = time.monotonic() + 10
        n = 0
        while len(writes) < 3 and time.monotonic() < deadline:
            n += 1
            kept["health"].cache.put("ns/a", WEB, digest(str(n)), (True, "ok"))
            time.sleep(0.01)
    finally:
        snapshots.stop()
    gaps = [b - a for a, b in zip(writes[:3], writes[1:3])]
    assert len(gaps) == 2 and all(gap >= 0.02 / cachesnapshot.WRITE_SHARE * 0.9 for gap in gaps), gaps
