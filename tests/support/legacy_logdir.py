"""Test support: a Kafka log directory holding legacy message sets, written by an
independent encoder (kafka-python's record builders), as a Kafka broker of the 0.8-2.x era
left it on disk.

Owns: ``PartitionWriter`` (one ``<topic>-<partition>`` directory: legacy magic 0 and 1
entries, plain and wrapped with every codec kafka-python can write, RecordBatch v2
batches, explicit segment rolls) and ``write_legacy_logdir`` (the directory the legacy
tests use, with the records and the entries every reader must see). Nothing here imports
``broker``: the bytes come from ``kafka.record.legacy_records.LegacyRecordBatchBuilder``
and ``kafka.record.default_records.DefaultRecordBatchBuilder``, then get the fix-ups a
broker applies when it stores a produce request:

* uncompressed messages: kafka-python writes the offsets it is given (absolute here);
* a compressed wrapper: kafka-python writes it with offset 0 and timestamp 0. A broker
  stores a magic 0 wrapper with absolute inner offsets and the wrapper offset = the last
  inner offset; a magic 1 wrapper with relative inner offsets (0..n-1), the wrapper offset
  = the absolute offset of the last inner message (bytes 0-8, outside the CRC) and its
  timestamp = the largest inner timestamp (CreateTime) or the broker's clock with
  attribute bit 3 set (LogAppendTime, inner messages untouched): the message CRC-32
  (``zlib.crc32`` of every byte after the crc field) is recomputed after a patch;
* a v2 batch: its base offset (bytes 0-8, outside the CRC-32C).

kafka-python writes magic 0 lz4 as Kafka 0.8-0.9 did (KAFKA-3160: the frame's header
checksum taken over the magic number too), with the ``xxhash`` package (a dev dependency).

Files: ``<20-digit base offset>.log`` only: no index, no checkpoint, no
``meta.properties``, no clean-shutdown marker (a directory a crashed broker left, or one
copied from an old cluster without them).

Thread-safety: test-process only.
"""

from __future__ import annotations

import random
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CREATE_TIME, LOG_APPEND_TIME = 0, 1
TIMESTAMP_TYPE_BIT = 0x08  # legacy message attributes, bit 3 (magic 1)
T0 = 1_500_000_000_000  # July 2017: the magic 1 era

# A legacy message, from its entry's start: offset int64 | size int32 | crc uint32 |
# magic int8 | attributes int8 | timestamp int64 (magic 1) | key | value
_OFFSET = struct.Struct(">q")
_SIZE = struct.Struct(">i")
_CRC = struct.Struct(">I")
_CRC_POS, _MAGIC_POS, _ATTRIBUTES_POS, _TIMESTAMP_POS = 12, 16, 17, 18
LOG_OVERHEAD = 12


class Rec(NamedTuple):
    """One record as every reader must return it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int | None  # None: magic 0 has none
    timestamp_type: int | None  # None (magic 0), CREATE_TIME or LOG_APPEND_TIME
    magic: int


class Entry(NamedTuple):
    """One log entry as written (a legacy message or wrapper, or a v2 batch)."""

    position: int
    first_offset: int
    last_offset: int
    max_timestamp: int  # -1: magic 0
    magic: int
    codec: int


@dataclass
class Segment:
    base_offset: int
    data: bytearray = field(default_factory=bytearray)
    entries: list[Entry] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.base_offset:020d}.log"


def patch_message(buf: bytearray, pos: int, *, offset: int | None = None, timestamp: int | None = None,
                  set_attributes: int = 0) -> int:
    """Patch the legacy message at ``pos`` as a broker does when it stores it; recompute
    its CRC-32 when the message itself changed. Returns the position after it."""
    if offset is not None:
        _OFFSET.pack_into(buf, pos, offset)
    (size,) = _SIZE.unpack_from(buf, pos + 8)
    end = pos + LOG_OVERHEAD + size
    if timestamp is not None or set_attributes:
        assert buf[pos + _MAGIC_POS] == 1, "only magic 1 messages carry a timestamp"
        buf[pos + _ATTRIBUTES_POS] |= set_attributes
        if timestamp is not None:
            _OFFSET.pack_into(buf, pos + _TIMESTAMP_POS, timestamp)
        _CRC.pack_into(buf, pos + _CRC_POS, zlib.crc32(buf[pos + _MAGIC_POS:end]))
    return end


class PartitionWriter:
    """One partition directory, appended entry by entry (offsets absolute, contiguous from
    0); ``roll`` starts a new segment at the next offset."""

    def __init__(self, topic: str, partition: int, seed: int = 0) -> None:
        self.topic = topic
        self.partition = partition
        self.rng = random.Random(f"{topic}-{partition}-{seed}")
        self.next_offset = 0
        self.segments = [Segment(0)]
        self.records: list[Rec] = []

    def roll(self) -> None:
        if self.segments[-1].data:
            self.segments.append(Segment(self.next_offset))

    def _content(self, offset: int) -> tuple[bytes | None, bytes | None, int]:
        """Key (null at times), value (null at times, else printable text of varied size) and
        CreateTime of the record at ``offset``: timestamps grow 10 ms per offset."""
        key = None if offset % 7 == 3 else b"key-%s-%d-%d" % (self.topic.encode(), self.partition, offset)
        value = None if offset % 11 == 5 else (
            b"value-%d-%d-" % (self.partition, offset) + self.rng.randbytes(self.rng.randrange(0, 40)).hex().encode())
        return key, value, T0 + 10 * offset

    def _add(self, data: bytearray, entries: list[tuple[int, int, int, int, int, int]]) -> None:
        segment = self.segments[-1]
        base = len(segment.data)
        segment.data += data
        segment.entries += [Entry(base + pos, *rest) for pos, *rest in entries]

    def legacy(self, magic: int, codec: int, count: int, *, log_append_time: int | None = None) -> range:
        """``count`` records in magic ``magic`` entries: one message each (``codec`` none) or
        one wrapper. ``log_append_time``: the topic had message.timestamp.type=LogAppendTime
        (magic 1): the broker stamped the entries with its clock. Returns their offsets."""
        assert magic in (0, 1) and count > 0 and (log_append_time is None or magic == 1)
        first = self.next_offset
        offsets = range(first, first + count)
        contents = [self._content(o) for o in offsets]
        builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 30)
        for i, (offset, (key, value, ts)) in enumerate(zip(offsets, contents)):
            inner_offset = i if codec != NONE and magic == 1 else offset  # relative in a magic 1 wrapper
            assert builder.append(inner_offset, timestamp=ts, key=key, value=value) is not None
        data = bytearray(builder.build())
        stamp = TIMESTAMP_TYPE_BIT if log_append_time is not None else 0
        entries = []
        if codec == NONE:
            pos = 0
            for offset, (_, _, ts) in zip(offsets, contents):
                end = patch_message(data, pos, timestamp=log_append_time, set_attributes=stamp)
                entry_ts = -1 if magic == 0 else log_append_time if stamp else ts
                entries.append((pos, offset, offset, entry_ts, magic, codec))
                pos = end
            assert pos == len(data)
        else:
            last = offsets[-1]
            if magic == 0:
                end = patch_message(data, 0, offset=last)
                wrapper_ts = -1
            else:
                wrapper_ts = log_append_time if stamp else max(ts for _, _, ts in contents)
                end = patch_message(data, 0, offset=last, timestamp=wrapper_ts, set_attributes=stamp)
            assert end == len(data), "one wrapper message"
            entries.append((0, first, last, wrapper_ts, magic, codec))
        for offset, (key, value, ts) in zip(offsets, contents):
            timestamp = None if magic == 0 else log_append_time if stamp else ts
            ts_type = None if magic == 0 else LOG_APPEND_TIME if stamp else CREATE_TIME
            self.records.append(Rec(self.topic, self.partition, offset, key, value, timestamp, ts_type, magic))
        self._add(data, entries)
        self.next_offset += count
        return offsets

    def v2(self, codec: int, count: int) -> range:
        """One RecordBatch v2 of ``count`` records (CreateTime, no producer id, no headers)."""
        first = self.next_offset
        offsets = range(first, first + count)
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                            producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                            batch_size=1 << 30)
        contents = [self._content(o) for o in offsets]
        for i, (key, value, ts) in enumerate(contents):
            assert builder.append(i, timestamp=ts, key=key, value=value, headers=[]) is not None
        data = bytearray(builder.build())
        _OFFSET.pack_into(data, 0, first)  # the base offset, outside the CRC-32C
        for offset, (key, value, ts) in zip(offsets, contents):
            self.records.append(Rec(self.topic, self.partition, offset, key, value, ts, CREATE_TIME, 2))
        self._add(data, [(0, first, offsets[-1], max(ts for _, _, ts in contents), 2, codec)])
        self.next_offset += count
        return offsets

    def write(self, root: Path) -> Path:
        directory = Path(root) / f"{self.topic}-{self.partition}"
        directory.mkdir(parents=True)
        for segment in self.segments:
            (directory / segment.name).write_bytes(bytes(segment.data))
        return directory


class LegacyLogDir(NamedTuple):
    root: Path
    partitions: dict[tuple[str, int], PartitionWriter]

    @property
    def records(self) -> list[Rec]:
        return [r for w in self.partitions.values() for r in w.records]

    def of(self, topic: str, partition: int) -> list[Rec]:
        return self.partitions[(topic, partition)].records

    def files(self) -> dict[str, bytes]:
        """``<topic>-<partition>/<segment>.log`` -> the bytes written."""
        return {f"{w.topic}-{w.partition}/{s.name}": bytes(s.data)
                for w in self.partitions.values() for s in w.segments}


LEGACY_TOPIC = "legacy"  # 3 partitions, never changed by the tests
TRIM_TOPIC = "trim"  # 2 partitions of wrappers, for DeleteRecords


def write_legacy_logdir(root: Path) -> LegacyLogDir:
    """The log directory of the legacy tests under ``root`` (about 3000 records):

    * ``legacy-0``, an upgrade history over 4 segments: magic 0 (plain, gzip, snappy, lz4),
      then magic 1 from the middle of a segment (every codec, LogAppendTime entries), then
      v2 from the middle of a segment (every codec, zstd included);
    * ``legacy-1``, magic 1 only over 3 segments: CreateTime and LogAppendTime, plain and
      every codec (for the timestamp searches);
    * ``legacy-2``, magic 0 only over 3 segments, then straight to v2 (zstd);
    * ``trim-0`` (magic 0 gzip wrappers) and ``trim-1`` (magic 1 snappy and lz4 wrappers),
      2 segments each, for DeleteRecords into the middle of a wrapper.
    """
    writers: dict[tuple[str, int], PartitionWriter] = {}

    def partition(topic: str, p: int) -> PartitionWriter:
        writers[(topic, p)] = w = PartitionWriter(topic, p)
        return w

    def clock(w: PartitionWriter, count: int) -> int:
        """The broker's clock when it appended the next ``count`` records: 5 ms after the
        CreateTime of the last of them, so that timestamps still grow along the log."""
        return T0 + 10 * (w.next_offset + count - 1) + 5

    w = partition(LEGACY_TOPIC, 0)
    w.legacy(0, NONE, 40)
    for codec in (GZIP, SNAPPY, LZ4):
        w.legacy(0, codec, 50)
    w.legacy(0, NONE, 20)
    w.roll()
    w.legacy(0, GZIP, 30)
    w.legacy(1, NONE, 40)  # the cluster moved to message.format.version 0.10
    for codec in (GZIP, SNAPPY, LZ4):
        w.legacy(1, codec, 60)
    w.roll()
    w.legacy(1, GZIP, 50, log_append_time=clock(w, 50))
    w.legacy(1, NONE, 10, log_append_time=clock(w, 10))
    w.legacy(1, NONE, 30)
    w.v2(NONE, 50)  # ... and to 0.11+
    w.v2(GZIP, 50)
    w.roll()
    for codec in (SNAPPY, LZ4, ZSTD, NONE):
        w.v2(codec, 50)
    w.v2(ZSTD, 100)

    w = partition(LEGACY_TOPIC, 1)
    for segment in range(3):
        w.legacy(1, NONE, 25)
        for codec in (GZIP, SNAPPY, LZ4):
            w.legacy(1, codec, 40)
            w.legacy(1, NONE, 5)
        if segment == 1:
            w.legacy(1, GZIP, 30, log_append_time=clock(w, 30))
            w.legacy(1, NONE, 4, log_append_time=clock(w, 4))
            w.legacy(1, SNAPPY, 30)
        w.roll()

    w = partition(LEGACY_TOPIC, 2)
    for _ in range(3):
        w.legacy(0, NONE, 30)
        for codec in (GZIP, SNAPPY, LZ4):
            w.legacy(0, codec, 45)
            w.legacy(0, NONE, 3)
        w.roll()
    w.v2(ZSTD, 60)

    w = partition(TRIM_TOPIC, 0)
    for _ in range(2):
        for _ in range(4):
            w.legacy(0, GZIP, 20)
        w.roll()
    w = partition(TRIM_TOPIC, 1)
    for _ in range(2):
        for codec in (SNAPPY, LZ4, SNAPPY, LZ4):
            w.legacy(1, codec, 20)
        w.roll()

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for writer in writers.values():
        writer.write(root)
    return LegacyLogDir(root, writers)
