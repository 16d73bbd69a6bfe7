"""``SkimpyOffsetMap``: key -> the latest offset seen for it, in bounded memory (Kafka's).

Owns: the map pass 1 of a cleaning fills over the dirty section of a log and pass 2
consults (a record is kept only if its offset is >= the map's offset for its key).

Kafka stores (MD5 digest, offset) pairs in a fixed byte buffer of
``log.cleaner.dedupe.buffer.size / log.cleaner.threads`` bytes: ``slots = memory //
(hash_size + 8)``, and a cleaning stops filling it at ``slots * load_factor`` entries
(``log.cleaner.io.buffer.load.factor``, 0.9). Here a dict plays the buffer; its number of
entries is bounded the same way, so a cleaning covers the same offsets as Kafka's would.
Its keys (``entry_key``): a key of up to ``RAW_KEY_MAX`` (32) bytes is its own entry (no
hashing: the cleaner's hot loops look keys up by the hundred thousand); a longer key is its
MD5 digest as an int (never equal to a short key's bytes), so two long keys with the same
MD5 are the same key, as in Kafka, and memory stays bounded whatever the key sizes.

Invariants: ``put`` never holds more than ``slots`` entries (``OffsetMapFullError``
otherwise; ``is_full`` tells the caller to stop at ``max_entries``); ``latest_offset`` is the
largest offset put since ``clear`` (-1 when none).

Thread-safety: none; each cleaner thread owns its map.
"""

from __future__ import annotations

import hashlib

__all__ = ["SkimpyOffsetMap", "OffsetMapFullError", "HASH_SIZE", "BYTES_PER_ENTRY", "RAW_KEY_MAX",
           "entry_key", "entry_keys"]

HASH_SIZE = 16  # MD5
BYTES_PER_ENTRY = HASH_SIZE + 8  # digest + int64 offset
RAW_KEY_MAX = 32  # longer keys are entered by their MD5 digest


def entry_key(key: bytes) -> bytes | int:
    """The map's entry for ``key`` (see the module docstring)."""
    if len(key) <= RAW_KEY_MAX:
        return key
    return int.from_bytes(hashlib.md5(key, usedforsecurity=False).digest(), "big")


def entry_keys(keys: list) -> list:
    """``entry_key`` of every key of ``keys`` (None stays None)."""
    if all(k is None or len(k) <= RAW_KEY_MAX for k in keys):
        return keys
    return [k if k is None or len(k) <= RAW_KEY_MAX else entry_key(k) for k in keys]


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
        self._map: dict[bytes | int, int] = {}
        self.latest_offset = -1
        self.lookups = 0
        self.puts = 0

    def put(self, key: bytes, offset: int) -> None:
        self.put_entry(entry_key(key), offset)

    def put_entry(self, entry: bytes | int, offset: int) -> None:
        if entry not in self._map and len(self._map) >= self.slots:
            raise OffsetMapFullError(f"offset map full ({self.slots} entries)")
        self._map[entry] = offset
        self.puts += 1
        if offset > self.latest_offset:
            self.latest_offset = offset

    def put_entries(self, entries: list, offsets: list[int]) -> None:
        """``put_entry`` of each pair, in order (a later offset of an entry wins); the caller
        knows they fit (``len(self) + len(entries) <= slots``)."""
        if len(self._map) + len(entries) > self.slots:
            raise OffsetMapFullError(f"{len(entries)} entries may not fit in the offset map")
        self._map.update(zip(entries, offsets))
        self.puts += len(entries)
        if offsets:
            self.latest_offset = max(self.latest_offset, max(offsets))

    def get(self, key: bytes) -> int:
        """The latest offset put for ``key``; -1 when absent."""
        self.lookups += 1
        return self._map.get(entry_key(key), -1)

    def get_entry(self, entry: bytes | int) -> int:
        """``get`` for an ``entry_key``; -1 when absent."""
        return self._map.get(entry, -1)

    def contains(self, key: bytes) -> bool:
        return entry_key(key) in self._map

    def contains_entry(self, entry: bytes | int) -> bool:
        return entry in self._map

    @property
    def entries(self) -> dict[bytes | int, int]:
        """The map itself (entry -> offset), read-only for the cleaner's lookups in bulk."""
        return self._map

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
