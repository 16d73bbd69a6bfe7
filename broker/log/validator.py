"""The leader's append-path validation and in-place offset assignment (``LogValidator``).

Owns: what Kafka's ``UnifiedLog.analyzeAndValidateRecords`` and ``LogValidator`` do for the
record batches of one produce request for one partition, minus format conversion and
recompression (only magic 2 is accepted, and ``compression.type=producer`` is assumed: the
codec the producer chose is the codec stored):

1. ``analyze`` walks the entries of the buffer and checks, without writing a byte:

   - every entry is complete (a trailing partial batch or stray bytes: CORRUPT_MESSAGE);
   - all entries share one magic (mixed magic: INVALID_RECORD), and it is 2 (magic 0/1:
     UNSUPPORTED_FOR_MESSAGE_FORMAT; a magic outside 0-2: CORRUPT_MESSAGE);
   - each batch fits ``max.message.bytes`` (MESSAGE_TOO_LARGE) and its CRC-32C is right
     (CORRUPT_MESSAGE);
   - from clients (``AppendOrigin.CLIENT``), as ``LogValidator.validateBatch``: baseOffset 0,
     ``lastOffsetDelta + 1 == recordsCount`` and the count > 0, no control batch, no producer
     id with a negative base sequence, and one (producer id, epoch) for the whole request
     (all INVALID_RECORD);
   - CreateTime timestamps within ``message.timestamp.before.max.ms`` /
     ``after.max.ms`` of now (INVALID_TIMESTAMP). Kafka checks every record; the hot path
     here checks the batch's ``baseTimestamp`` and ``maxTimestamp`` from the header only
     (a record whose timestamp delta is negative can slip below the bound). When records are
     decoded (compacted topics, below) every record's timestamp is checked, as Kafka does;
   - compacted topics (``compacted=True``): records are decoded (decompressed if needed) and
     a null key is INVALID_RECORD, as are offset deltas other than 0..count-1. Only then are
     records decoded; otherwise the check is a header walk plus one CRC per batch.

2. ``assign_offsets`` then rewrites the buffer in place, batch by batch: baseOffset from the
   log end offset on, partitionLeaderEpoch (both outside the CRC), and with
   ``message.timestamp.type=LogAppendTime`` the timestamp-type bit and maxTimestamp = now,
   followed by a CRC update. A CreateTime topic clears a LogAppendTime bit a client set and,
   when records were decoded, corrects a maxTimestamp that disagrees with the records, both
   with a CRC update (``DefaultRecordBatch.setMaxTimestamp``). Nothing is recompressed.

3. ``analyze_single_batch`` and ``assign_offsets_single`` are the two steps fused for the
   produce hot path, a request of exactly one batch whose records need no decoding: one
   header unpack and one CRC for every check of 1., then the writes of 2. and the same
   ``LogAppendInfo``, built from the unpacked fields. Any other shape, and any failed
   check, makes ``analyze_single_batch`` return None: the caller then runs the general
   path, which reports the error, so results and errors are the general path's.

All-or-nothing: every check runs in ``analyze`` before ``assign_offsets`` writes anything,
so a rejected request leaves the caller's buffer byte-identical.

Errors (``broker.log.errors``; the server maps them to Kafka codes): CorruptRecordError (2),
InvalidRecordError (87; ``.record_errors`` lists ``(batch_index, message)`` for record-level
failures, Kafka's ``RecordError``s in the produce response), UnsupportedForMessageFormatError
(43), RecordBatchTooLargeError (10), InvalidTimestampError (32).

Not done here (other layers): the produce-request rule "exactly one batch per partition
for ProduceRequest v3+" (protocol layer; this module accepts several), producer-state
deduplication (``producer_state.py``), the segment.bytes limit and rolling (the log).

No on-disk format of its own; the batch header layout is in ``broker/record/batch.py``.

Thread-safety: pure functions over the caller's buffer; ``LogValidator`` holds only an
immutable config. ``assign_offsets`` mutates the buffer, so the caller must own it (the
produce request's bytes) and call it under the partition's append lock (it needs the LEO).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Any, NamedTuple

from broker.record import batch as rb
from broker.record import errors as record_errors
from broker.record.batch import BatchHeader

from .errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordBatchTooLargeError,
    UnsupportedForMessageFormatError,
)

__all__ = [
    "AppendOrigin",
    "ValidatorConfig",
    "LogAppendInfo",
    "LogValidator",
    "analyze_and_validate_records",
    "assign_offsets",
    "analyze_single_batch",
    "assign_offsets_single",
    "validate_and_assign_offsets",
]

LONG_MAX = (1 << 63) - 1
# Kafka's defaults (LogConfig / ServerLogConfigs): max.message.bytes is 1 MiB + the
# 12-byte log overhead; after.max.ms became 1 hour in Kafka 4.0 (KIP-1030).
DEFAULT_MAX_MESSAGE_BYTES = 1048588
DEFAULT_TIMESTAMP_BEFORE_MAX_MS = LONG_MAX
DEFAULT_TIMESTAMP_AFTER_MAX_MS = 3_600_000
# A legacy (magic 0) entry is at least offset + size + crc + magic + attributes + key and
# value lengths; Kafka's ByteBufferLogInputStream rejects smaller sizes as corrupt.
LEGACY_RECORD_OVERHEAD_V0 = 14
# Smallest possible v2 record: length, attributes, timestamp delta, offset delta, key
# length, value length and header count, one byte each. Lets the header walk reject a
# records count an uncompressed batch cannot hold without decoding anything.
MIN_RECORD_SIZE = 7
MAX_MAGIC = rb.CURRENT_MAGIC

# attributes int16 at 21 and maxTimestamp int64 at 35 (see the layout in batch.py).
_ATTRIBUTES = struct.Struct(">h")
_MAX_TIMESTAMP = struct.Struct(">q")
_CRC = struct.Struct(">I")
_MAX_TIMESTAMP_OFFSET = 35


class AppendOrigin(enum.Enum):
    """Who is appending, which decides how much is validated (Kafka's ``AppendOrigin``).

    CLIENT: a produce request, fully validated. COORDINATOR: the broker's own writes
    (transaction markers, group/transaction state): no client-only checks (control batches
    allowed), but producer epochs are still fenced. REPLICATION: data already validated by a
    leader, or replayed from the log on recovery: neither client checks nor sequence or
    epoch errors.
    """

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


# Looking up an enum member on its class (``AppendOrigin.CLIENT``) costs a few hundred
# nanoseconds on CPython 3.11, more than the rest of a header check: per-append code
# compares against these module constants instead.
_CLIENT = AppendOrigin.CLIENT
_REPLICATION = AppendOrigin.REPLICATION


@dataclass(frozen=True, slots=True)
class ValidatorConfig:
    """The topic-level settings the validator obeys, with Kafka's defaults."""

    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    log_append_time: bool = False  # message.timestamp.type=LogAppendTime
    timestamp_before_max_ms: int = DEFAULT_TIMESTAMP_BEFORE_MAX_MS
    timestamp_after_max_ms: int = DEFAULT_TIMESTAMP_AFTER_MAX_MS
    compacted: bool = False  # cleanup.policy contains compact: keys are required
    max_decompressed_bytes: int = rb.DEFAULT_MAX_DECOMPRESSED_BYTES

    @classmethod
    def from_log_config(cls, config: Any) -> "ValidatorConfig":
        """From a ``broker.log.config.LogConfig`` (or anything with the same properties)."""
        return cls(max_message_bytes=config.max_message_size,
                   log_append_time=config.log_append_time,
                   timestamp_before_max_ms=config.timestamp_before_max_ms,
                   timestamp_after_max_ms=config.timestamp_after_max_ms,
                   compacted=config.compact)


class LogAppendInfo(NamedTuple):
    """What ``analyze`` found, or (after ``assign_offsets``) what will be appended.
    (A NamedTuple: immutable like a frozen dataclass, and several times cheaper to build,
    which matters on the produce path; copy with ``_replace``.)

    Before assignment the offsets are those written in the batches (0-based for a client);
    after it they are the log's. ``offset_of_max_timestamp`` is exact when records were
    decoded, the first offset for LogAppendTime (every record then carries ``now``), and
    otherwise the last offset of the batch with the largest maxTimestamp (the "shallow"
    offset a segment's time index stores). ``log_append_time`` is -1 for CreateTime.
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    shallow_count: int
    records_count: int
    valid_bytes: int
    batches: tuple[tuple[int, BatchHeader], ...]
    source_compression: int
    last_offset_of_first_batch: int
    offsets_monotonic: bool
    # Per batch, (max record timestamp, offset delta of its first occurrence) when the
    # records were decoded, else None.
    record_max_timestamps: tuple[tuple[int, int], ...] | None = None

    @property
    def num_messages(self) -> int:
        return self.records_count


def _too_large(size: int, limit: int, index: int) -> RecordBatchTooLargeError:
    return RecordBatchTooLargeError(
        f"the record batch {index} is {size} bytes, which exceeds max.message.bytes={limit}")


def _walk_entries(buf, end: int) -> list[tuple[int, int]]:
    """(position, size) of every entry; the structural checks that need no CRC."""
    entries: list[tuple[int, int]] = []
    first_magic = None
    pos = 0
    while pos < end:
        peek = rb.peek_entry(buf, pos, end)
        if peek is None:
            raise CorruptRecordError(f"{end - pos} stray bytes at position {pos} are not a batch")
        _offset, size, magic = peek
        if magic < 0 or magic > MAX_MAGIC:
            raise CorruptRecordError(f"invalid magic {magic} at position {pos}")
        minimum = rb.RECORD_BATCH_OVERHEAD if magic == rb.CURRENT_MAGIC else LEGACY_RECORD_OVERHEAD_V0 + rb.LOG_OVERHEAD
        if size < minimum:
            raise CorruptRecordError(
                f"entry at position {pos} declares {size} bytes, less than the minimum {minimum}")
        if size > end - pos:
            raise CorruptRecordError(
                f"partial batch at position {pos}: {size} bytes declared, {end - pos} present")
        if first_magic is None:
            first_magic = magic
        elif magic != first_magic:
            raise InvalidRecordError(
                f"batch magic {magic} at position {pos} is not the first batch's magic {first_magic}")
        entries.append((pos, size))
        pos += size
    if first_magic is not None and first_magic != rb.CURRENT_MAGIC:
        raise UnsupportedForMessageFormatError(
            f"record batches with magic {first_magic} are not accepted; only magic 2 is")
    return entries


def _check_client_batch(header: BatchHeader, index: int) -> None:
    """``LogValidator.validateBatch`` and the baseOffset rule, for client appends."""
    if header.base_offset != 0:
        raise InvalidRecordError(
            f"batch {index}: the baseOffset of a produced batch must be 0, not {header.base_offset}")
    if header.last_offset_delta < 0:
        raise InvalidRecordError(f"batch {index}: invalid lastOffsetDelta {header.last_offset_delta}")
    if header.records_count <= 0:
        raise InvalidRecordError(f"batch {index}: invalid records count {header.records_count}")
    if header.last_offset_delta + 1 != header.records_count:
        raise InvalidRecordError(
            f"batch {index}: lastOffsetDelta {header.last_offset_delta} + 1 != records count "
            f"{header.records_count}")
    if header.is_control:
        raise InvalidRecordError(f"batch {index}: clients may not write control batches")
    if header.has_producer_id and header.base_sequence < 0:
        raise InvalidRecordError(
            f"batch {index}: producer id {header.producer_id} with invalid base sequence "
            f"{header.base_sequence}")


def _check_timestamp(ts: int, now_ms: int, config: ValidatorConfig, where: str) -> None:
    if ts == rb.NO_TIMESTAMP:
        return
    if ts < now_ms - config.timestamp_before_max_ms or ts > now_ms + config.timestamp_after_max_ms:
        raise InvalidTimestampError(
            f"{where}: timestamp {ts} is out of range [now - {config.timestamp_before_max_ms}, "
            f"now + {config.timestamp_after_max_ms}] with now = {now_ms}")


def _decode_error(exc: record_errors.DecodeError, index: int) -> Exception:
    if isinstance(exc, record_errors.RecordTooLargeError):
        return RecordBatchTooLargeError(f"batch {index}: {exc}")
    if isinstance(exc, record_errors.InvalidRecordError):
        return InvalidRecordError(f"batch {index}: {exc}")
    return CorruptRecordError(f"batch {index}: {exc}")


def _check_records(buf, pos: int, header: BatchHeader, index: int, config: ValidatorConfig,
                   now_ms: int, check_timestamps: bool) -> tuple[int, int]:
    """Decode one batch's records and check them; return (max timestamp, its offset delta)."""
    try:
        payload = rb.records_payload(buf, pos, header, config.max_decompressed_bytes)
        records = rb.decode_records(payload, header)
    except record_errors.DecodeError as exc:
        raise _decode_error(exc, index) from None
    errors: list[tuple[int, str]] = []
    max_ts, max_delta = rb.NO_TIMESTAMP, 0
    for i, record in enumerate(records):
        delta = record.offset - header.base_offset
        if delta != i:
            errors.append((i, f"record {i} has offset delta {delta}, expected {i}"))
        if config.compacted and record.key is None:
            errors.append((i, "a compacted topic cannot accept a record without a key"))
        if check_timestamps:
            try:
                _check_timestamp(record.timestamp, now_ms, config, f"batch {index} record {i}")
            except InvalidTimestampError as exc:
                exc.record_errors = [(i, str(exc))]
                raise
        if record.timestamp > max_ts:
            max_ts, max_delta = record.timestamp, delta
    if errors:
        exc = InvalidRecordError(f"batch {index}: {errors[0][1]}"
                                 + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))
        exc.record_errors = errors
        raise exc
    return max_ts, max_delta


def analyze_and_validate_records(buf, config: ValidatorConfig = ValidatorConfig(), *,
                                 now_ms: int, origin: AppendOrigin = AppendOrigin.CLIENT
                                 ) -> LogAppendInfo:
    """Check every batch in ``buf`` (read-only) and describe them; raises on the first
    violation, before anything has been modified."""
    end = len(buf)
    if end == 0:
        raise InvalidRecordError("an append needs at least one record batch")
    entries = _walk_entries(buf, end)
    client = origin is _CLIENT
    check_ts = not config.log_append_time and origin is not _REPLICATION
    decode = config.compacted and origin is not _REPLICATION
    headers: list[tuple[int, BatchHeader]] = []
    record_max: list[tuple[int, int]] | None = [] if decode else None
    producer = None
    first_offset = -1
    last_offset = -1
    last_offset_of_first_batch = -1
    monotonic = True
    max_ts, offset_of_max_ts = rb.NO_TIMESTAMP, -1
    records_count = 0
    source_compression = 0
    read = rb.read_header
    compute_crc = rb.compute_crc
    for index, (pos, size) in enumerate(entries):
        header = read(buf, pos)
        if size > config.max_message_bytes:
            raise _too_large(size, config.max_message_bytes, index)
        if compute_crc(buf, pos, size) != header.crc:
            raise CorruptRecordError(
                f"batch {index} at position {pos} is corrupt (stored crc {header.crc:#010x})")
        if client:
            _check_client_batch(header, index)
            key = (header.producer_id, header.producer_epoch)
            if producer is None:
                producer = key
            elif key != producer:
                raise InvalidRecordError(
                    f"batch {index}: producer id/epoch {key} differs from the request's {producer}")
        elif header.records_count < 0:
            raise InvalidRecordError(f"batch {index}: negative records count {header.records_count}")
        if (header.compression == 0 and header.records_count > 0
                and header.records_count * MIN_RECORD_SIZE > size - rb.RECORDS_OFFSET):
            raise CorruptRecordError(
                f"batch {index}: {header.records_count} records cannot fit in "
                f"{size - rb.RECORDS_OFFSET} bytes")
        if check_ts and header.timestamp_type == rb.CREATE_TIME:
            _check_timestamp(header.base_timestamp, now_ms, config, f"batch {index}")
            _check_timestamp(header.max_timestamp, now_ms, config, f"batch {index}")
        if decode:
            record_max.append(_check_records(buf, pos, header, index, config, now_ms, check_ts))
        if index == 0:
            first_offset = header.base_offset
            last_offset_of_first_batch = header.last_offset
        elif header.last_offset <= last_offset:
            monotonic = False
        last_offset = header.last_offset
        if header.max_timestamp > max_ts:
            max_ts, offset_of_max_ts = header.max_timestamp, header.last_offset
        records_count += header.records_count
        if header.compression:
            source_compression = header.compression
        headers.append((pos, header))
    return LogAppendInfo(
        first_offset=first_offset, last_offset=last_offset, max_timestamp=max_ts,
        offset_of_max_timestamp=offset_of_max_ts, log_append_time=rb.NO_TIMESTAMP,
        shallow_count=len(headers), records_count=records_count, valid_bytes=end,
        batches=tuple(headers), source_compression=source_compression,
        last_offset_of_first_batch=last_offset_of_first_batch, offsets_monotonic=monotonic,
        record_max_timestamps=tuple(record_max) if record_max is not None else None)


# --- the single-batch fast path (a produce request holds one batch per partition) ---

_HEADER_UNPACK = rb.HEADER.unpack_from
# baseOffset int64 @0, batchLength int32 @8, partitionLeaderEpoch int32 @12: one pack
# rewrites the two fields assignment changes (batchLength is written back unchanged).
_OFFSET_LENGTH_EPOCH = struct.Struct(">qii")
_CONTROL = rb.CONTROL_FLAG_MASK
_CODEC = rb.COMPRESSION_CODEC_MASK
_LOG_APPEND_TIME_BIT = rb.TIMESTAMP_TYPE_MASK
_V2 = rb.CURRENT_MAGIC
_HEADER_SIZE = rb.RECORD_BATCH_OVERHEAD
_RECORDS_OFFSET = rb.RECORDS_OFFSET
_NO_TIMESTAMP = rb.NO_TIMESTAMP
_crc32c = rb.crc32c
_new_tuple = tuple.__new__


def analyze_single_batch(buf, config: ValidatorConfig, now_ms: int, origin: AppendOrigin) -> tuple | None:
    """``analyze_and_validate_records`` fused into one pass for the common request: ``buf``
    is exactly one v2 batch of a topic whose records need not be decoded (not compacted,
    or a replication append). Returns the header's fields (``HEADER``'s tuple, for
    ``assign_offsets_single``) when every check of the general path passes; None when the
    general path must decide: another shape (several batches, a partial or stray entry,
    other magic, a compacted topic) or any failed check, which the general path then
    reports with its own error, so errors are those of ``analyze_and_validate_records``.
    Read-only, like it."""
    end = len(buf)
    if end < _HEADER_SIZE or (config.compacted and origin is not _REPLICATION):
        return None
    h = _HEADER_UNPACK(buf, 0)
    (base_offset, batch_length, _epoch, magic, crc, attributes, last_offset_delta, base_timestamp,
     max_timestamp, producer_id, _producer_epoch, base_sequence, count) = h
    if (batch_length + 12 != end or magic != _V2 or end > config.max_message_bytes
            or _crc32c(memoryview(buf)[21:]) != crc):
        return None
    if origin is _CLIENT:
        if (base_offset != 0 or last_offset_delta < 0 or count <= 0 or last_offset_delta + 1 != count
                or attributes & _CONTROL or (producer_id >= 0 and base_sequence < 0)):
            return None
    elif count < 0:
        return None
    if not attributes & _CODEC and count > 0 and count * MIN_RECORD_SIZE > end - _RECORDS_OFFSET:
        return None
    if not config.log_append_time and origin is not _REPLICATION and not attributes & _LOG_APPEND_TIME_BIT:
        low = now_ms - config.timestamp_before_max_ms
        high = now_ms + config.timestamp_after_max_ms
        if ((base_timestamp != _NO_TIMESTAMP and (base_timestamp < low or base_timestamp > high))
                or (max_timestamp != _NO_TIMESTAMP and (max_timestamp < low or max_timestamp > high))):
            return None
    return h


def assign_offsets_single(buf, h: tuple, first_offset: int, partition_leader_epoch: int, now_ms: int,
                          log_append_time: bool) -> LogAppendInfo:
    """``assign_offsets`` for the one batch ``analyze_single_batch`` accepted (``h``, its
    header fields): the same bytes written and the same ``LogAppendInfo`` returned, built
    from ``h`` without re-reading the header. ``buf`` must be writable (the caller made
    sure of it)."""
    if first_offset < 0:
        raise ValueError(f"negative first offset {first_offset}")
    _OFFSET_LENGTH_EPOCH.pack_into(buf, 0, first_offset, h[1], partition_leader_epoch)
    if log_append_time or h[5] & _LOG_APPEND_TIME_BIT:  # rare: a timestamp rewrite and a CRC
        header = BatchHeader._make(h)
        if log_append_time:
            rb.write_log_append_time(buf, 0, now_ms)
        else:
            _set_create_time(buf, 0, header, header.max_timestamp)
        h = _HEADER_UNPACK(buf, 0)
    else:
        h = (first_offset, h[1], partition_leader_epoch) + h[3:]
    header = _new_tuple(BatchHeader, h)
    last_offset = first_offset + h[6]
    if log_append_time:
        max_ts, offset_of_max_ts, append_time = now_ms, first_offset, now_ms
    elif h[8] > _NO_TIMESTAMP:
        max_ts, offset_of_max_ts, append_time = h[8], last_offset, _NO_TIMESTAMP
    else:
        max_ts, offset_of_max_ts, append_time = _NO_TIMESTAMP, -1, _NO_TIMESTAMP
    return _new_tuple(LogAppendInfo, (
        first_offset, last_offset, max_ts, offset_of_max_ts, append_time, 1, h[12], len(buf),
        ((0, header),), h[5] & _CODEC, last_offset, True, None))


def _set_create_time(buf, pos: int, header: BatchHeader, max_timestamp: int) -> None:
    """``DefaultRecordBatch.setMaxTimestamp(CREATE_TIME, ts)``: rewrite only on change."""
    if header.timestamp_type == rb.CREATE_TIME and header.max_timestamp == max_timestamp:
        return
    _ATTRIBUTES.pack_into(buf, pos + rb.ATTRIBUTES_OFFSET, header.attributes & ~rb.TIMESTAMP_TYPE_MASK)
    _MAX_TIMESTAMP.pack_into(buf, pos + _MAX_TIMESTAMP_OFFSET, max_timestamp)
    _CRC.pack_into(buf, pos + rb.CRC_OFFSET, rb.compute_crc(buf, pos, header.size_in_bytes))


def assign_offsets(buf, info: LogAppendInfo, *, first_offset: int, partition_leader_epoch: int,
                   now_ms: int, log_append_time: bool = False) -> LogAppendInfo:
    """Rewrite the analysed batches of ``buf`` in place: offsets from ``first_offset`` on,
    the leader epoch, and LogAppendTime (``log_append_time=True``) timestamps.

    ``buf`` must be the buffer ``info`` came from, unchanged since, and writable."""
    if memoryview(buf).readonly:
        raise TypeError("offsets are assigned in place: pass a bytearray or a writable memoryview")
    if first_offset < 0:
        raise ValueError(f"negative first offset {first_offset}")
    offset = first_offset
    out: list[tuple[int, BatchHeader]] = []
    max_ts, offset_of_max_ts = rb.NO_TIMESTAMP, -1
    record_max = info.record_max_timestamps
    for index, (pos, header) in enumerate(info.batches):
        rb.write_base_offset(buf, pos, offset)
        rb.write_partition_leader_epoch(buf, pos, partition_leader_epoch)
        if log_append_time:
            rb.write_log_append_time(buf, pos, now_ms)
            batch_max, batch_max_offset = now_ms, offset
        elif record_max is not None:
            batch_max, delta = record_max[index]
            _set_create_time(buf, pos, header, batch_max)
            batch_max_offset = offset + delta
        else:
            batch_max = header.max_timestamp
            if header.timestamp_type != rb.CREATE_TIME:
                _set_create_time(buf, pos, header, batch_max)
            batch_max_offset = offset + header.last_offset_delta
        new_header = rb.read_header(buf, pos)
        out.append((pos, new_header))
        if batch_max > max_ts:
            max_ts, offset_of_max_ts = batch_max, batch_max_offset
        offset = new_header.next_offset
    if log_append_time:
        max_ts, offset_of_max_ts = now_ms, first_offset
    last_offset = offset - 1
    first_batch = out[0][1] if out else None
    return LogAppendInfo(
        first_offset=first_offset, last_offset=last_offset, max_timestamp=max_ts,
        offset_of_max_timestamp=offset_of_max_ts,
        log_append_time=now_ms if log_append_time else rb.NO_TIMESTAMP,
        shallow_count=len(out), records_count=info.records_count, valid_bytes=info.valid_bytes,
        batches=tuple(out), source_compression=info.source_compression,
        last_offset_of_first_batch=first_batch.last_offset if first_batch else -1,
        offsets_monotonic=True, record_max_timestamps=record_max)


def validate_and_assign_offsets(buf, config: ValidatorConfig = ValidatorConfig(), *,
                                log_end_offset: int, partition_leader_epoch: int, now_ms: int,
                                origin: AppendOrigin = AppendOrigin.CLIENT) -> LogAppendInfo:
    """The leader's whole step: ``analyze_and_validate_records`` then ``assign_offsets``."""
    info = analyze_and_validate_records(buf, config, now_ms=now_ms, origin=origin)
    return assign_offsets(buf, info, first_offset=log_end_offset,
                          partition_leader_epoch=partition_leader_epoch, now_ms=now_ms,
                          log_append_time=config.log_append_time)


class LogValidator:
    """The functions above bound to one topic's ``ValidatorConfig``."""

    __slots__ = ("config",)

    def __init__(self, config: ValidatorConfig = ValidatorConfig()) -> None:
        self.config = config

    def analyze(self, buf, *, now_ms: int, origin: AppendOrigin = AppendOrigin.CLIENT) -> LogAppendInfo:
        return analyze_and_validate_records(buf, self.config, now_ms=now_ms, origin=origin)

    def assign_offsets(self, buf, info: LogAppendInfo, *, first_offset: int,
                       partition_leader_epoch: int, now_ms: int) -> LogAppendInfo:
        return assign_offsets(buf, info, first_offset=first_offset,
                              partition_leader_epoch=partition_leader_epoch, now_ms=now_ms,
                              log_append_time=self.config.log_append_time)

    def validate_and_assign(self, buf, *, log_end_offset: int, partition_leader_epoch: int,
                            now_ms: int, origin: AppendOrigin = AppendOrigin.CLIENT) -> LogAppendInfo:
        return validate_and_assign_offsets(buf, self.config, log_end_offset=log_end_offset,
                                           partition_leader_epoch=partition_leader_epoch,
                                           now_ms=now_ms, origin=origin)

