"""The render and health caches (and the in-sync verdicts of apply, the settled passes and the proven shard
assignments) kept in a file across restarts, so that a restarted shard finds what it computed.

A shard's caches live in its process: after a restart every settled app was rendered and its health programs
evaluated again, which was nine tenths of what the restart cost (some 20 ms of CUE per load-test app; a shard of
40,000 apps needed 20 minutes). The process now writes its caches to a file now and then (only when something
changed) and when it stops, and reads them back when it starts (`--cache-dir`; an emptyDir keeps the file across
container restarts).

Nothing read back can be stale: every slot keeps the digest of the inputs its result was computed from (the app's
spec and metadata, the definitions' generations, the live objects' versions, ...), and a result is used only for
the same inputs. What computes the results is part of the inputs too: a file written by other code (another
version of velashard, another Python) is ignored, as is one that cannot be read. The file is written to a
temporary name and renamed, so a process killed while it writes leaves the previous one.

Format: MAGIC, the code's fingerprint (32 bytes), then per cache its name, the packer's dictionary and its slots
(owner, slot, inputs, result), each field prefixed with its length (little-endian).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import struct
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from velashard.core import health, ownership, proven, render_cache, settled
from velashard.core.slotcache import Entry, SlotCache
from velashard.observability import fields

log = logging.getLogger("velashard.core.cachesnapshot")

MAGIC = b"VSCACHE1"
SAVE_INTERVAL = 60.0  # seconds at most between writes while the caches keep changing
QUIET = 10.0  # and they are written once they have not changed for this long (a snapshot soon after apps settle)
RESTORED_TTL = 900.0  # what was restored and not asked for within this long belongs to apps that left
# A write costs in proportion to the apps held (1.7 s of CPU at 40,000 load-test apps): writes are spaced so that
# they take at most this share of a core, else a shard converging 40,000 apps for an hour spent 4% of its CPU
# writing the file every minute (a cost growing with the square of the app count).
WRITE_SHARE = 0.02
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ENTRY = struct.Struct("<HBHI")  # lengths of owner, slot, inputs, result


def code_fingerprint(root: str = _PACKAGE) -> bytes:
    """A digest of velashard's own source (its .py and .cue files) and of Python's version."""
    sha = hashlib.sha256(sys.version.encode())
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".py", ".cue")):
                path = os.path.join(directory, name)
                sha.update(os.path.relpath(path, root).encode() + b"\x00")
                with open(path, "rb") as fh:
                    sha.update(hashlib.sha256(fh.read()).digest())
    return sha.digest()


@dataclass
class Kept:
    """One cache in the snapshot, with how its (unpacked) results become bytes and back."""
    cache: SlotCache
    encode: Callable[[Any], bytes] = lambda value: value
    decode: Callable[[bytes], Any] = bytes


def json_codec(cache: SlotCache, decode: Callable[[Any], Any] = lambda value: value) -> Kept:
    """A cache of small JSON-able results, hashable and often equal (verdicts): `decode` turns the decoded JSON
    back into a result (e.g. a list into a tuple). Both ways are memoized: 40,000 apps have some 300,000 of them."""
    @functools.lru_cache(maxsize=4096)
    def encode(value: Any) -> bytes:
        return json.dumps(value, separators=(",", ":")).encode()

    @functools.lru_cache(maxsize=4096)
    def decoded(blob: bytes) -> Any:
        return decode(json.loads(blob))
    return Kept(cache, encode, decoded)


def app_caches() -> dict[str, Kept]:
    """The Application controller's caches: renderings (packed already), health verdicts, which managed
    objects were found in sync with what the app applies, settled passes (core/settled.py) and proven shard
    assignments (core/proven.py)."""
    return {"render": Kept(render_cache.cache()), "health": json_codec(health.verdicts(), tuple),
            "in-sync": json_codec(ownership.in_sync()),
            "settled": Kept(settled.passes()), "proven": Kept(proven.verdicts())}


def _chunk(data: bytes) -> bytes:
    return struct.pack("<I", len(data)) + data


def write(path: str, caches: dict[str, Kept], fingerprint: bytes) -> int:
    """Write the caches to `path` (atomically); returns the slots written."""
    tmp = f"{path}.tmp"
    count = 0
    with open(tmp, "wb") as fh:
        fh.write(MAGIC + fingerprint)
        fh.write(struct.pack("<I", len(caches)))
        for name, kept in caches.items():
            dictionary, entries = kept.cache.entries()
            fh.write(_chunk(name.encode()) + _chunk(dictionary or b"") + struct.pack("<I", len(entries)))
            pack, encode = _ENTRY.pack, kept.encode
            parts: list[bytes] = []
            for owner, slot, inputs, value in entries:
                owner_bytes, blob = owner.encode(), encode(value)
                parts += (pack(len(owner_bytes), len(slot), len(inputs), len(blob)), owner_bytes, slot, inputs, blob)
                if len(parts) >= 50_000:
                    fh.write(b"".join(parts))
                    parts.clear()
            fh.write(b"".join(parts))
            count += len(entries)
    os.replace(tmp, path)
    return count


def read(path: str, caches: dict[str, Kept], fingerprint: bytes) -> int:
    """Restore the caches from `path` when it was written by this code; returns the slots restored (0 when the
    file is missing, another code's, or damaged: nothing is restored of a damaged file)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return 0
    except OSError as err:  # a directory or an unreadable file in its place: starting cold beats a crash loop
        log.warning("cache snapshot unreadable; starting without it", extra=fields(path=path, error=str(err)))
        return 0
    head = len(MAGIC) + len(fingerprint)
    if data[:len(MAGIC)] != MAGIC or data[len(MAGIC):head] != fingerprint:
        log.info("cache snapshot of other code; starting without it", extra=fields(path=path))
        return 0
    try:
        parsed = _parse(memoryview(data), head, caches)
    except (struct.error, ValueError, UnicodeDecodeError, IndexError) as err:
        log.warning("cache snapshot unreadable; starting without it", extra=fields(path=path, error=str(err)))
        return 0
    return sum(caches[name].cache.restore(dictionary, entries) for name, (dictionary, entries) in parsed.items())


def _parse(data: memoryview, at: int, caches: dict[str, Kept]) -> dict[str, tuple[bytes | None, list[Entry]]]:
    def take(size: int) -> bytes:
        nonlocal at
        if at + size > len(data):
            raise ValueError("truncated")
        chunk = bytes(data[at:at + size])
        at += size
        return chunk

    def chunk() -> bytes:
        return take(struct.unpack("<I", take(4))[0])

    parsed = {}
    for _ in range(struct.unpack("<I", take(4))[0]):
        name, dictionary = chunk().decode(), chunk()
        count = struct.unpack("<I", take(4))[0]
        kept = caches.get(name)
        entries = []
        unpack, size, end, raw = _ENTRY.unpack_from, _ENTRY.size, len(data), data.obj
        owners: dict[bytes, str] = {}  # an app's slots follow one another: its name is decoded once
        for _ in range(count):
            owner_len, slot_len, inputs_len, value_len = unpack(data, at)
            start = at + size
            at = start + owner_len + slot_len + inputs_len + value_len
            if at > end:
                raise ValueError("truncated")
            if kept is None:
                continue
            owner_bytes = raw[start:start + owner_len]
            owner = owners.get(owner_bytes)
            if owner is None:
                owner = owners[owner_bytes] = owner_bytes.decode()
            start += owner_len
            slot, inputs = raw[start:start + slot_len], raw[start + slot_len:start + slot_len + inputs_len]
            start += slot_len + inputs_len
            entries.append((owner, slot, inputs, kept.decode(raw[start:start + value_len])))
        if kept is not None:
            parsed[name] = (dictionary or None, entries)
    if at != len(data):
        raise ValueError("trailing bytes")
    return parsed


class CacheSnapshots:
    """Reads the caches back once (`load`, before the workers start); writes them once they stopped changing for
    `quiet` seconds, at least every `interval` while they keep changing (both no sooner than WRITE_SHARE of the
    last write's CPU allows), and once more when stopped."""

    def __init__(self, path: str, caches: dict[str, Kept], interval: float = SAVE_INTERVAL,
                 restored_ttl: float = RESTORED_TTL, quiet: float = QUIET):
        self.path, self.caches, self.interval, self.restored_ttl = path, caches, interval, restored_ttl
        self.quiet = min(quiet, interval)
        self._written_at = time.monotonic()
        self._gap = self.quiet  # seconds at least between two writes: WRITE_SHARE of the last write's CPU
        self._fingerprint = code_fingerprint()
        self._saved_at_changes = -1
        self._loaded_at: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # one writer at a time (the loop, or stop)

    def load(self) -> int:
        started = time.monotonic()
        count = read(self.path, self.caches, self._fingerprint)
        self._loaded_at = time.monotonic()
        self._saved_at_changes = self._changes()
        if count:
            log.info("cache snapshot restored", extra=fields(path=self.path, slots=count,
                                                             seconds=round(self._loaded_at - started, 2)))
        return count

    def _changes(self) -> int:
        return sum(kept.cache.changes for kept in self.caches.values())

    def save(self) -> bool:
        """Write the caches if they changed since the last write; whether it wrote."""
        with self._lock:
            if self._loaded_at is not None and time.monotonic() - self._loaded_at >= self.restored_ttl:
                self._loaded_at = None
                if sum(kept.cache.drop_restored() for kept in self.caches.values()):
                    self._saved_at_changes = -1
            changes = self._changes()
            if changes == self._saved_at_changes:
                return False
            started = time.thread_time()
            try:
                os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
                write(self.path, self.caches, self._fingerprint)
            except OSError as err:
                log.warning("cannot write the cache snapshot", extra=fields(path=self.path, error=str(err)))
                return False
            self._saved_at_changes, self._written_at = changes, time.monotonic()
            self._gap = max(self.quiet, (time.thread_time() - started) / WRITE_SHARE)
            return True

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="cache-snapshots", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        seen = self._changes()
        while not self._stop.wait(self.quiet):
            changes = self._changes()
            since = time.monotonic() - self._written_at
            if since >= self._gap and (changes == seen or since >= self.interval):
                self.save()
            seen = changes

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.save()
