"""The record walks of the log cleaner's two passes, a window of batches at a time.

Owns: ``read_windows`` (a segment's file read in windows of whole v2 batches) and
``RecordLayout`` (the headers of a group of data batches, gathered from their bytes in
one numpy step, and where every record of them sits, read for all the records at once:
offset, timestamp delta, key span, value length, and the record's own bytes, length
varint included). Pass 1 takes the key spans (hashed where
they lie) and offsets from it; pass 2 the same and the null values, and, for a batch that
loses some records, splices the bytes of the records it keeps into the new batch (their
offset and timestamp deltas are relative to the batch's base offset and base timestamp,
which do not change), so no record is decoded nor encoded one by one.

The walk of the length varints across batches is the columnar reader's
(``broker.record.columnar._walk.walk_records``). numpy is imported by the first
cleaning, not with the broker; pyarrow never is.

Legacy (magic 0/1) entries, which a Kafka log directory may still hold, reach the passes
converted to v2 batches by ``read_windows`` (KIP-724: the cleaner writes v2 only).

Invariants: the batches given are v2 data batches of the log (validated when appended);
a record whose fields do not fit in it raises ``CorruptRecordError`` (the cleaning fails
and the log is marked uncleanable by the manager), never a read outside the window.

Thread-safety: pure functions over the caller's buffers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...record import codecs
from ...record.batch import (
    COMPRESSION_CODEC_MASK,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    BatchHeader,
    iter_batch_headers,
)
from ...record.entries import ENTRY_HEADER_PREFIX, iter_entry_headers
from ...record.errors import CorruptRecordError
from ...record.legacy import legacy_entry_to_v2
from ..file_records import FileRecords

__all__ = ["read_windows", "RecordLayout", "WINDOW_BYTES"]

WINDOW_BYTES = 8 << 20  # bytes of batches walked at once (a larger batch: alone)


def read_windows(records: FileRecords, window: int = WINDOW_BYTES, max_decompressed: int = 1 << 30,
                 start: int = 0) -> Iterator[tuple[int, bytes, list[tuple[int, BatchHeader]]]]:
    """(file position after the window, bytes, [(position in those bytes, header)]) for
    consecutive windows of whole batches of ``records`` from file position ``start`` (a
    batch boundary), in order; stops at a trailing partial batch. A window that holds
    legacy (magic 0/1) entries is given with each of them converted to a v2 batch
    (``legacy_entry_to_v2``: same offsets, keys, values and timestamps), so both passes
    see v2 batches only and the cleaned segment is written in v2, as Kafka's cleaner does."""
    pos, end = start, records.size_in_bytes
    while end - pos >= ENTRY_HEADER_PREFIX:
        buf = records.pread(pos, min(window, end - pos))
        batches = list(iter_entry_headers(buf))
        if not batches:  # one batch larger than the window, or a partial one at the end
            size = int.from_bytes(buf[8:12], "big", signed=True) + LOG_OVERHEAD
            if size > end - pos or size < ENTRY_HEADER_PREFIX:
                return
            buf = records.pread(pos, size)
            batches = list(iter_entry_headers(buf))
            if not batches:
                return
        last_pos, last = batches[-1]
        pos += last_pos + last.size_in_bytes
        if any(h.magic != CURRENT_MAGIC for _, h in batches):
            buf, batches = _as_v2(buf, batches, max_decompressed)
        yield pos, buf, batches


def _as_v2(buf: bytes, batches: list[tuple[int, BatchHeader]], max_decompressed: int
           ) -> tuple[bytes, list[tuple[int, BatchHeader]]]:
    """The window with every legacy entry replaced by its v2 batch."""
    view = memoryview(buf)
    parts = []
    for p, h in batches:
        entry = view[p:p + h.size_in_bytes]
        parts.append(bytes(entry) if h.magic == CURRENT_MAGIC else legacy_entry_to_v2(entry, max_decompressed))
    converted = b"".join(parts)
    return converted, list(iter_batch_headers(converted))


class RecordLayout:
    """Every record of ``batches`` (v2 data batches at their positions in ``buf``), in
    order. Arrays (numpy, one entry per record unless said): ``batch`` (index in
    ``batches``), ``first``/``counts`` (per batch: index of its first record, its record
    count), ``offsets`` (absolute), ``ts_delta``, ``key_start``/``key_len`` (-1: null key),
    ``value_len`` (-1: null value), ``raw_start``/``raw_end`` (the record's bytes in
    ``region``, length varint included). ``region`` holds the records: a window of
    ``buf`` when no batch is compressed, else the decompressed payloads joined."""

    def __init__(self, buf, batches: list[tuple[int, BatchHeader]], max_decompressed: int) -> None:
        import numpy as np

        from ...record.columnar._vec import read_varints
        from ...record.columnar._walk import MIN_RECORD_BODY, gather_headers, walk_records
        self.np = np
        nb = len(batches)
        # every batch's header, read again from the bytes in one gather (no Python object)
        positions = np.fromiter([p for p, _ in batches], np.int64, nb)
        self.header = header = gather_headers(np.frombuffer(buf, np.uint8), positions)
        counts = header["records_count"].astype(np.int64)
        base = header["base_offset"].astype(np.int64)
        attrs = header["attributes"].astype(np.int64)
        sizes = header["batch_length"].astype(np.int64) + LOG_OVERHEAD
        self.positions, self.sizes, self.attributes = positions, sizes, attrs
        own_bytes = 0
        if not (attrs & COMPRESSION_CODEC_MASK).any():
            first_pos = int(positions[0]) + RECORDS_OFFSET
            self.region_bytes = memoryview(buf)[first_pos:int(positions[-1] + sizes[-1])]
            bstart = positions + (RECORDS_OFFSET - first_pos)
            bend = bstart + (sizes - RECORDS_OFFSET)
        else:
            mv = memoryview(buf)
            pieces = [codecs.decompress(h.compression, mv[p + RECORDS_OFFSET:p + h.size_in_bytes], max_decompressed)
                      if h.compression else mv[p + RECORDS_OFFSET:p + h.size_in_bytes] for p, h in batches]
            lengths = np.fromiter(map(len, pieces), np.int64, nb)
            bend = np.cumsum(lengths)
            bstart = bend - lengths
            joined = b"".join(pieces)
            self.region_bytes = memoryview(joined)
            own_bytes = len(joined)
        region = np.frombuffer(self.region_bytes, np.uint8)
        self.region = region
        self._own_bytes = own_bytes
        if (counts < 0).any():
            raise CorruptRecordError("negative records count")
        first = np.cumsum(counts) - counts
        n = int(counts.sum())
        self.n, self.counts, self.first = n, counts, first
        self.batch = batch = np.repeat(np.arange(nb), counts)
        if n == 0:
            empty = np.empty(0, np.int64)
            self.key_start = empty
            self.offsets = self.ts_delta = self.key_start = self.key_len = empty
            self.value_len = self.raw_start = self.raw_end = empty
            return
        body_start, body_end = walk_records(region, bstart, bend, counts, first, n)
        if (body_end - body_start < MIN_RECORD_BODY).any() or (body_end > bend[batch]).any():
            raise CorruptRecordError("record length out of bounds of its batch")
        # a record's bytes start where the previous one of its batch ends (its length varint)
        raw_start = np.empty(n, np.int64)
        raw_start[1:] = body_end[:-1]
        raw_start[first[counts > 0]] = bstart[counts > 0]
        self.raw_start, self.raw_end = raw_start, body_end
        ts_delta, p = read_varints(region, body_start + 1, 10)
        off_delta, p = read_varints(region, p)
        key_len, key_start = read_varints(region, p)
        value_len, value_start = read_varints(region, key_start + np.maximum(key_len, 0))
        if (key_len.min() < -1 or value_len.min() < -1
                or (value_start + np.maximum(value_len, 0) > body_end).any()):
            raise CorruptRecordError("bad key or value length")
        self.offsets = base[batch] + off_delta
        self.ts_delta = ts_delta
        self.key_start, self.key_len, self.value_len = key_start, key_len, value_len

    @property
    def nbytes(self) -> int:
        """The memory the layout holds: its arrays, and the decompressed records when
        some batch is compressed (the window's own bytes are the caller's)."""
        arrays = (self.header, self.positions, self.sizes, self.attributes, self.counts, self.first,
                  self.batch, self.offsets, self.ts_delta, self.key_start, self.key_len, self.value_len,
                  self.raw_start, self.raw_end)
        return sum(a.nbytes for a in arrays) + self._own_bytes

    def runs(self, kept) -> tuple[Any, Any, Any]:
        """The records at ``kept`` (increasing indexes) as runs of consecutive records of
        one batch: (run starts, run ends in ``region``, per batch the index of its first
        run, plus the total), so that batch j's kept bytes are its runs joined (``join``)."""
        np = self.np
        nb = self.counts.size
        if len(kept) == 0:
            empty = np.empty(0, np.int64)
            return empty, empty, np.zeros(nb + 1, np.int64)
        kb = self.batch[kept]
        new_run = np.empty(kept.size, bool)
        new_run[0] = True
        new_run[1:] = (np.diff(kept) != 1) | (kb[1:] != kb[:-1])
        last_of_run = np.empty(kept.size, bool)
        last_of_run[:-1] = new_run[1:]
        last_of_run[-1] = True
        starts = self.raw_start[kept[new_run]]
        ends = self.raw_end[kept[last_of_run]]
        ptr = np.zeros(nb + 1, np.int64)
        np.cumsum(np.bincount(kb[new_run], minlength=nb), out=ptr[1:])
        return starts, ends, ptr

    def join(self, starts: list[int], ends: list[int]) -> bytes:
        """The bytes of the runs (starts[i], ends[i]) of ``region``, joined."""
        region = self.region_bytes
        return b"".join([region[s:e] for s, e in zip(starts, ends)])
