"""Cached objects as compressed JSON: what a cache of thousands of similar objects keeps per object.

A decoded Kubernetes object costs about three times its JSON in Python dicts and strings; compressed, it costs a
fraction of its JSON. Objects of one kind in one cache resemble each other (the same keys, labels, defaults and
last-applied records, differing in names and a few values), so each is compressed against the first one the
cache stored (a zlib preset dictionary): a Deployment of KubeVela's load-test app keeps about 350 bytes instead
of some 12 KiB of dicts. Every unpack returns a new object, private to its caller.
"""

from __future__ import annotations

import threading
import zlib
from typing import Any

from velashard.kube import jsoncodec

_MAX_DICTIONARY = 32 * 1024  # zlib uses at most the last 32 KiB of a preset dictionary
_LEVEL = 1  # a few microseconds per object; higher levels shrink these small objects barely more


class Packer:
    """Packs objects against a dictionary taken from the first object packed (fixed from then on)."""

    def __init__(self) -> None:
        self._dictionary: bytes | None = None
        self._lock = threading.Lock()

    def pack(self, obj: dict[str, Any]) -> bytes:
        raw = jsoncodec.dumps(obj)
        if self._dictionary is None:
            with self._lock:
                if self._dictionary is None:
                    self._dictionary = raw[-_MAX_DICTIONARY:]
        compressor = zlib.compressobj(_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS, zdict=self._dictionary)
        return compressor.compress(raw) + compressor.flush()

    @property
    def dictionary(self) -> bytes | None:
        """The preset dictionary (None until the first pack or `adopt`)."""
        return self._dictionary

    def adopt(self, dictionary: bytes) -> bool:
        """Take `dictionary` (another packer's, e.g. a snapshot's) when this one has none yet or the same one, so
        that blobs it packed unpack here; False when this packer has a different one already."""
        with self._lock:
            if self._dictionary is None:
                self._dictionary = dictionary
            return self._dictionary == dictionary

    def unpack(self, blob: bytes | memoryview) -> dict[str, Any]:
        assert self._dictionary is not None  # nothing was packed before it
        decompressor = zlib.decompressobj(-zlib.MAX_WBITS, zdict=self._dictionary)
        return jsoncodec.loads(decompressor.decompress(blob) + decompressor.flush())
