"""The lz4 arena of the columnar decoder: where the lz4 payloads of a unit of v2 batches
are decompressed, back to back, so that the unit's record bytes are one slice of it.

Owns ``Arena`` (a numpy buffer, rewound and written again for every unit: the
RecordBatches decoded from a unit own their memory), the payload spans ``(arena buffer,
start, stop)`` that ``decode.py`` keeps for lz4 batches, ``inflate`` (one batch, any
codec: the general loop's path) and ``lz4_run`` (a run of lz4 batches in a few Python
steps each: ``decode.py``'s fast path, proven equal to the general loop by
``tests/test_record_columnar_fastpaths.py``).

Invariants: nothing is written outside an arena's buffer (``codecs.lz4_frames_into``
writes within the limit it is given); a payload never exceeds ``max_decompressed``; a run
leaves every batch it does not take, and the arena past the last one it took, as they
were, for the general loop to decode (and report) as if there had been no run.

Thread-safety: an arena belongs to one ``iter_arrow`` call; the functions are pure apart
from it.
"""

from __future__ import annotations

import numpy as np

from .. import codecs
from ..batch import (
    ATTRIBUTES_OFFSET,
    CURRENT_MAGIC,
    H_ATTRIBUTES,
    H_BASE_OFFSET,
    H_BATCH_LENGTH,
    H_CRC,
    H_LAST_OFFSET_DELTA,
    H_MAGIC,
    H_RECORDS_COUNT,
    HEADER,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    RECORDS_OFFSET,
    crc32c,
)
from ._walk import MIN_RECORD_SIZE

# lz4 payloads are decompressed into arenas of ARENA_RATIO times the input left (at least
# ARENA_RATIO times the batch's compressed size), at most the unit budget plus 1 /
# ARENA_SLACK of it (room for the batch that overflows the unit, which then starts the
# next one in the same arena, rewound) within these bounds: a batch that does not fit the
# space left gets a fresh arena.
ARENA_MIN_BYTES = 1 << 20
ARENA_MAX_BYTES = 64 << 20
ARENA_RATIO = 8
ARENA_SLACK = 8

_LZ4 = int(codecs.CompressionType.LZ4)


class Arena:
    """Where lz4 payloads are decompressed, back to back: the payloads of a unit usually
    end up adjacent, and the unit's region is then a slice of the arena (no join). Once
    a unit is decoded the arena is rewound and reused. An arena is replaced by a fresh
    one when full; the old one lives on as long as payloads point into it (at most about
    one unit). A payload in an arena is the tuple (arena buffer, start, stop)."""

    __slots__ = ("buf", "mv", "used", "capacity")

    def __init__(self, capacity: int) -> None:
        self.buf: np.ndarray | None = None  # allocated at the first lz4 batch
        self.mv = memoryview(b"")  # of buf, which lz4_frames_into writes through
        self.used = 0
        self.capacity = capacity

    def renew(self, size: int) -> None:
        self.buf = np.empty(size, np.uint8)
        self.mv = self.buf.data
        self.used = 0

    def rewind(self, pending=None):
        """Reuse the arena from its start once a unit is decoded (its RecordBatches own
        their memory): the pages are already mapped, and maybe cached. ``pending``, the
        payload of the batch that starts the next unit, moves to the start when it is in
        this arena; returns it (moved or not)."""
        if type(pending) is tuple and pending[0] is self.buf:
            _, start, stop = pending
            if start:
                self.buf[:stop - start] = self.buf[start:stop]
            self.used = stop - start
            return (self.buf, 0, self.used)
        self.used = 0
        return pending


def payload_size(payload) -> int:
    return payload[2] - payload[1] if type(payload) is tuple else len(payload)


def inflate(codec: int, data: memoryview, max_decompressed: int, arena: Arena,
             rest: int):
    """The decompressed payload of a batch: for lz4 a span (buffer, start, stop) of
    ``arena``, else ``codecs.decompress``'s bytes (which also tells what is wrong when the
    fast path fails: a bad payload, or one over ``max_decompressed``). ``rest``: the
    input's bytes from this batch on, which size a fresh arena (ARENA_RATIO times, within
    the unit budget), so that a small input never reserves a large arena."""
    if codec != codecs.CompressionType.LZ4:
        return codecs.decompress(codec, data, max_decompressed)
    limit = max_decompressed + 1
    size = max(min(arena.capacity, ARENA_RATIO * rest), min(limit, ARENA_RATIO * len(data)))
    for fresh in (arena.buf is None, True):
        if fresh:
            arena.renew(size)
        start = arena.used
        room = arena.buf[start:start + limit]  # type: ignore[index]
        n = codecs.decompress_into(codec, data, room)
        if 0 <= n <= max_decompressed:
            arena.used += n
            return (arena.buf, start, arena.used)
        if fresh or n > max_decompressed \
                or len(room) >= min(limit, size):
            break  # a fresh arena would not help: bad data, or over the budget
    return codecs.decompress(codec, data, max_decompressed)


def in_one_arena(payloads: list) -> np.ndarray | None:
    """The payloads' region as one slice when they are adjacent spans of one arena, else
    None."""
    first = payloads[0]
    if type(first) is not tuple:
        return None
    base, start, _ = first
    at = start
    for payload in payloads:
        if type(payload) is not tuple or payload[0] is not base or payload[1] != at:
            return None
        at = payload[2]
    return base[start:at]


def lz4_run(view: memoryview, pos: int, end: int, lo: int, hi: int, not_plain: int,
             verify_crc: bool, headers: list, positions: list, payloads: list,
             room_rows: int, room_bytes: int, arena: Arena, max_decompressed: int
             ) -> tuple[int, int, int, int | None, bool]:
    """``decode._plain_run`` for lz4 batches: gather the run of lz4 batches from ``pos`` (kept,
    no other attribute of ``not_plain``, a good CRC) whose frames ``lz4_frames_into``
    decodes into the room left in ``arena`` within ``max_decompressed``, with a sane
    records count and within the room left in the unit. Stops at the first other batch,
    leaving it to the general loop of ``decode.iter_arrow`` (which also takes a fresh arena, a
    frame option left to a frame decoder, and reports bad batches) with the arena as it
    was before it: the same outcome, in a few Python steps per batch.
    Returns (position after the run, rows, record bytes, offset after the run, full):
    ``full`` when the next batch is lz4 but does not fit in the unit, which is not empty:
    the caller decodes the unit, rewinds the arena and calls again (the general loop
    would start a unit with that batch, in a fresh arena when this one is full)."""
    unpack = HEADER.unpack_from
    frames_into = codecs.lz4_frames_into
    out, used, cap = arena.mv, arena.used, len(arena.mv)
    rows = nbytes = 0
    next_offset = None
    full = False
    last = end - RECORD_BATCH_OVERHEAD
    while pos <= last:
        h = unpack(view, pos)
        size = h[H_BATCH_LENGTH] + LOG_OVERHEAD
        count = h[H_RECORDS_COUNT]
        base = h[H_BASE_OFFSET]
        after = base + h[H_LAST_OFFSET_DELTA] + 1
        if (h[H_MAGIC] != CURRENT_MAGIC or h[H_ATTRIBUTES] & not_plain != _LZ4
                or size < RECORD_BATCH_OVERHEAD or size > end - pos or base >= hi
                or after <= lo or count < 0):
            break
        if rows + count > room_rows:
            full = bool(headers)
            break
        if verify_crc and crc32c(view[pos + ATTRIBUTES_OFFSET:pos + size]) != h[H_CRC]:
            break
        stop = frames_into(view, pos + RECORDS_OFFSET, pos + size, out, used,
                           min(cap, used + max_decompressed))
        n = stop - used
        if stop < 0 or count * MIN_RECORD_SIZE > n:
            break
        if nbytes + n > room_bytes and headers:
            full = True
            break
        headers.append(h)
        positions.append(pos)
        payloads.append((arena.buf, used, stop))
        used = stop
        rows += count
        nbytes += n
        pos += size
        next_offset = after
    arena.used = used
    return pos, rows, nbytes, next_offset, full


__all__ = ["ARENA_MAX_BYTES", "ARENA_MIN_BYTES", "ARENA_RATIO", "ARENA_SLACK", "Arena",
           "in_one_arena", "inflate", "lz4_run", "payload_size"]
