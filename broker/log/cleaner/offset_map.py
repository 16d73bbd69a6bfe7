"""``SkimpyOffsetMap``: key -> the latest offset seen for it, in bounded memory (Kafka's).

Owns: the map pass 1 of a cleaning fills over the dirty section of a log and pass 2
consults (a record is kept only if its offset is >= the map's offset for its key).

Kafka stores (MD5 digest, offset) pairs in a fixed byte buffer of
``log.cleaner.dedupe.buffer.size / log.cleaner.threads`` bytes: ``slots = memory //
(hash_size + 8)``, and a cleaning stops filling it at ``slots * load_factor`` entries
(``log.cleaner.io.buffer.load.factor``, 0.9). Here a dict of 16-byte MD5 digests plays the
buffer; its number of entries is bounded the same way, so a cleaning covers the same
offsets as Kafka's would. Two keys with the same MD5 are the same key (as in Kafka).

Invariants: ``put`` never holds more than ``slots`` entries (``OffsetMapFullError``
otherwise; ``is_full`` tells the caller to stop at ``max_entries``); ``latest_offset`` is the
largest offset put since ``clear`` (-1 when none).

Thread-safety: none; each cleaner thread owns its map.
"""

from __future__ import annotations

import hashlib

__all__ = ["SkimpyOffsetMap", "OffsetMapFullError", "HASH_SIZE", "BYTES_PER_ENTRY"]

HASH_SIZE = 16  # MD5
BYTES_PER_ENTRY = HASH_SIZE + 8  # digest + int64 offset


class OffsetMapFullError(Exception):
    """A put of a new key into a map that already holds ``slots`` entries."""


class SkimpyOffsetMap:
    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        if memory < BYTES_PER_ENTRY:
            raise ValueError(f"offset map memory {memory} is below one entry ({BYTES_PER_ENTRY} bytes)")
        if not 0 < load_factor <= 1:
            raise ValueError(f"load factor {load_factor} must be in (0, 1]")
        self.memory = memory
        self.slots = memory // BYTES_PER_ENTRY
        self.max_entries = max(1, int(self.slots * load_factor))
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1
        self.lookups = 0
        self.puts = 0

    @staticmethod
    def digest(key: bytes) -> bytes:
        return hashlib.md5(key, usedforsecurity=False).digest()

    def put(self, key: bytes, offset: int) -> None:
        d = self.digest(key)
        if d not in self._map and len(self._map) >= self.slots:
            raise OffsetMapFullError(f"offset map full ({self.slots} entries)")
        self._map[d] = offset
        self.puts += 1
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset put for ``key``; -1 when absent."""
        self.lookups += 1
        return self._map.get(self.digest(key), -1)

    def get_digest(self, digest: bytes) -> int:
        """``get`` for a key already digested (``digest(key)``); the hot loop of pass 2."""
        return self._map.get(digest, -1)

    def contains(self, key: bytes) -> bool:
        return self.digest(key) in self._map

    def is_full(self) -> bool:
        """True once the map holds ``max_entries`` keys: a cleaning stops filling it."""
        return len(self._map) >= self.max_entries

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1
        self.lookups = self.puts = 0

    @property
    def size(self) -> int:
        return len(self._map)

    def __len__(self) -> int:
        return len(self._map)

    @property
    def utilization(self) -> float:
        return len(self._map) / self.slots

    def __repr__(self) -> str:
        return f"SkimpyOffsetMap(entries={len(self._map)}, slots={self.slots}, latest_offset={self.latest_offset})"
