"""The ordered set of a partition's local segments: base offset -> ``LogSegment``.

Owns: ``LogSegments`` (Kafka's ``LogSegments``, a ``ConcurrentSkipListMap`` there): the
navigation the log needs (floor / lower / higher segment of an offset, the active
segment, ranges of segments) and bulk operations (close, size). It does not create or
delete files; ``local_log.py`` does, and keeps this map in step.

No on-disk format of its own (the segments' files are named by their base offsets).

Invariants: base offsets are unique and kept sorted; the active segment is the one with
the largest base offset. Adding a segment whose base offset is present replaces it.

Thread-safety: copy-on-write. The writer (holding the log's lock, plus an internal lock
so that two writers cannot lose an update) builds new sorted lists and publishes them with
a single attribute store; readers load that pair once per call and search it with
``bisect``, so they never block and always see a consistent snapshot. Iterators returned
by ``values()`` walk the snapshot taken when they were made.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable
from pathlib import Path

from .segment import LogSegment

__all__ = ["LogSegments"]


class LogSegments:
    def __init__(self, topic_partition: str | None = None) -> None:
        self._topic_partition = topic_partition
        self._write_lock = threading.Lock()
        # (sorted base offsets, segments in the same order), replaced as a whole
        self._view: tuple[tuple[int, ...], tuple[LogSegment, ...]] = ((), ())

    # --- mutation (single writer) ---

    def add(self, segment: LogSegment) -> LogSegment | None:
        """Add ``segment``; returns the segment it replaced (same base offset), if any."""
        with self._write_lock:
            bases, segs = self._view
            base = segment.base_offset
            i = bisect.bisect_left(bases, base)
            if i < len(bases) and bases[i] == base:
                previous = segs[i]
                self._view = (bases, segs[:i] + (segment,) + segs[i + 1:])
                return previous
            self._view = (bases[:i] + (base,) + bases[i:], segs[:i] + (segment,) + segs[i:])
            return None

    def remove(self, base_offset: int) -> LogSegment | None:
        with self._write_lock:
            bases, segs = self._view
            i = bisect.bisect_left(bases, base_offset)
            if i < len(bases) and bases[i] == base_offset:
                self._view = (bases[:i] + bases[i + 1:], segs[:i] + segs[i + 1:])
                return segs[i]
            return None

    def clear(self) -> None:
        with self._write_lock:
            self._view = ((), ())

    def close(self) -> None:
        for segment in self._view[1]:
            segment.close()

    def close_handlers(self) -> None:
        for segment in self._view[1]:
            segment.close_handlers()

    def update_parent_dir(self, directory: Path | str) -> None:
        for segment in self._view[1]:
            segment.update_parent_dir(directory)

    # --- queries (lock-free) ---

    def __len__(self) -> int:
        return len(self._view[0])

    number_of_segments = property(__len__)

    def is_empty(self) -> bool:
        return not self._view[0]

    def non_empty(self) -> bool:
        return bool(self._view[0])

    def __contains__(self, base_offset: int) -> bool:
        return self.get(base_offset) is not None

    def contains(self, base_offset: int) -> bool:
        return base_offset in self

    def get(self, base_offset: int) -> LogSegment | None:
        bases, segs = self._view
        i = bisect.bisect_left(bases, base_offset)
        if i < len(bases) and bases[i] == base_offset:
            return segs[i]
        return None

    def base_offsets(self) -> list[int]:
        return list(self._view[0])

    def values(self, from_offset: int | None = None, to_offset: int | None = None) -> list[LogSegment]:
        """All segments, or those that may hold offsets in [from_offset, to_offset): from
        the floor segment of ``from_offset`` to the last one whose base offset is below
        ``to_offset`` (Kafka's values(from, to)). Empty when from == to."""
        bases, segs = self._view
        if from_offset is None and to_offset is None:
            return list(segs)
        if from_offset is None or to_offset is None:
            raise ValueError("values() takes both offsets or neither")
        if from_offset == to_offset:
            return []
        if to_offset < from_offset:
            raise ValueError(
                f"invalid log segment range: requested segments in {self._topic_partition} from "
                f"offset {from_offset} which is greater than limit offset {to_offset}")
        hi = bisect.bisect_left(bases, to_offset)
        floor = bisect.bisect_right(bases, from_offset) - 1
        return list(segs[max(floor, 0):hi])

    def non_active_log_segments_from(self, from_offset: int) -> list[LogSegment]:
        active = self.active_segment
        if active is None or from_offset > active.base_offset:
            return []
        return self.values(from_offset, active.base_offset)

    def first_segment(self) -> LogSegment | None:
        segs = self._view[1]
        return segs[0] if segs else None

    def first_segment_base_offset(self) -> int | None:
        bases = self._view[0]
        return bases[0] if bases else None

    def last_segment(self) -> LogSegment | None:
        segs = self._view[1]
        return segs[-1] if segs else None

    @property
    def active_segment(self) -> LogSegment | None:
        """The segment taking appends: the one with the largest base offset."""
        return self.last_segment()

    def floor_segment(self, offset: int) -> LogSegment | None:
        """The segment with the largest base offset <= ``offset``."""
        bases, segs = self._view
        i = bisect.bisect_right(bases, offset) - 1
        return segs[i] if i >= 0 else None

    def lower_segment(self, offset: int) -> LogSegment | None:
        """The segment with the largest base offset < ``offset``."""
        bases, segs = self._view
        i = bisect.bisect_left(bases, offset) - 1
        return segs[i] if i >= 0 else None

    def higher_segment(self, offset: int) -> LogSegment | None:
        """The segment with the smallest base offset > ``offset``."""
        bases, segs = self._view
        i = bisect.bisect_right(bases, offset)
        return segs[i] if i < len(segs) else None

    def higher_segments(self, offset: int) -> list[LogSegment]:
        """Every segment with a base offset > ``offset``."""
        bases, segs = self._view
        return list(segs[bisect.bisect_right(bases, offset):])

    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._view[1])

    @staticmethod
    def size_in_bytes_of(segments: Iterable[LogSegment]) -> int:
        return sum(segment.size for segment in segments)

    def __iter__(self):
        return iter(self._view[1])

    def __repr__(self) -> str:
        return f"LogSegments({self._topic_partition}, base_offsets={list(self._view[0])})"
