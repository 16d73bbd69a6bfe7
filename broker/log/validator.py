"""The leader's append-path validation and in-place offset assignment (Kafka's ``LogValidator``).

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
   - leader appends (CLIENT and COORDINATOR) walk every record of every batch, compressed
     ones through a streaming decompression (``broker.record.validation.check_records``:
     lengths, varints, offset deltas 0..count-1, header counts and sizes, UTF-8 header
     keys, nothing left over; keys and values are skipped, never copied). A batch whose
     records do not parse, or whose compressed payload is bad: CORRUPT_MESSAGE; an offset
     delta out of order: INVALID_RECORD naming the record. Compressed records may inflate to
     ``ValidatorConfig.decompression_budget`` bytes (max(64 MiB, DECOMPRESSION_RATIO x
     max.message.bytes); Kafka has no cap), past it MESSAGE_TOO_LARGE, and memory stays
     bounded by the streaming walk (F5);
   - per record, as Kafka's ``LogValidator.validateRecord``: on a compacted topic a null
     key is INVALID_RECORD; on a CreateTime topic every record's timestamp (except
     NO_TIMESTAMP) must lie within ``message.timestamp.before.max.ms`` /
     ``after.max.ms`` of now (INVALID_TIMESTAMP, which wins when both occur); on a
     LogAppendTime topic a batch whose producer set the LogAppendTime bit is INVALID_TIMESTAMP.
     Such errors carry ``.record_errors``, ``(index of the record in its batch, message)``
     (KIP-467). The hot loop only tracks the smallest and largest timestamp delta and
     counts null keys; the records are named in a second walk, on the error path only.

2. ``assign_offsets`` then rewrites the buffer in place, batch by batch: baseOffset from the
   log end offset on, partitionLeaderEpoch (both outside the CRC), and with
   ``message.timestamp.type=LogAppendTime`` the timestamp-type bit and maxTimestamp = now,
   followed by a CRC update. A CreateTime topic clears a LogAppendTime bit a client set and
   corrects a maxTimestamp that disagrees with the records (Kafka's maxBatchTimestamp), both
   with a CRC update (``DefaultRecordBatch.setMaxTimestamp``). Nothing is recompressed.
   ``offset_of_max_timestamp`` is the exact offset of the first record holding the max.

3. ``analyze_single_batch`` and ``assign_offsets_single`` are the two steps fused for the
   produce hot path, a request of exactly one batch: one header unpack, one CRC and one
   record walk for every check of 1., then the writes of 2. and the same
   ``LogAppendInfo``, built from the unpacked fields (indexed by the ``_BASE_OFFSET`` ..
   ``_RECORDS_COUNT`` constants, derived from ``BatchHeader._fields`` and checked at
   import). Any other shape, and any failed check, makes ``analyze_single_batch`` return
   None: the caller then runs the general path, which reports the error, so results and
   errors are the general path's.

All-or-nothing: every check runs in ``analyze`` before ``assign_offsets`` writes anything,
so a rejected request leaves the caller's buffer byte-identical.

Errors (``broker.log.errors``; the server maps them to Kafka codes): CorruptRecordError (2),
InvalidRecordError (87; ``.record_errors`` lists ``(batch_index, message)`` for record-level
failures, Kafka's ``RecordError``s in the produce response), UnsupportedForMessageFormatError
(43), RecordBatchTooLargeError (10), InvalidTimestampError (32). Records that do not parse
and compressed payloads that do not decompress are CORRUPT_MESSAGE here, the protocol's
code for a message "otherwise corrupt", with the reason in the message; Kafka 4 answers
INVALID_RECORD for the first (``DefaultRecord`` throws ``InvalidRecordException``) and
UNKNOWN_SERVER_ERROR for the second. An offset delta out of order is INVALID_RECORD naming
the record: Kafka rewrites such a compressed batch, this broker never recompresses.

Not done here (other layers): the produce-request rule "exactly one batch per partition
for ProduceRequest v3+" (protocol layer; this module accepts several), producer-state
deduplication (``producer_state.py``), the segment.bytes limit and rolling (the log).

No on-disk format of its own; the batch header layout is in ``broker/record/batch.py``.

Thread-safety: pure functions over the caller's buffer; ``ValidatorConfig`` is immutable.
``assign_offsets`` mutates the buffer, so the caller must own it (the produce request's
bytes) and call it under the partition's append lock (it needs the LEO).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from broker.record import batch as rb
from broker.record import errors as record_errors
from broker.record.batch import BatchHeader
from broker.record.limits import INT64_MAX, INT64_MIN
from broker.record.validation import check_records, record_details

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
    "analyze_and_validate_records",
    "assign_offsets",
    "analyze_single_batch",
    "assign_offsets_single",
]

# Kafka's defaults (LogConfig / ServerLogConfigs): max.message.bytes is 1 MiB + the
# 12-byte log overhead; after.max.ms became 1 hour in Kafka 4.0 (KIP-1030).
DEFAULT_MAX_MESSAGE_BYTES = 1048588
DEFAULT_TIMESTAMP_BEFORE_MAX_MS = INT64_MAX
DEFAULT_TIMESTAMP_AFTER_MAX_MS = 3_600_000
# A legacy (magic 0) entry is at least offset + size + crc + magic + attributes + key and
# value lengths; Kafka's ByteBufferLogInputStream rejects smaller sizes as corrupt.
LEGACY_RECORD_OVERHEAD_V0 = 14
# Smallest possible v2 record: length, attributes, timestamp delta, offset delta, key
# length, value length and header count, one byte each. Lets the header walk reject a
# records count an uncompressed batch cannot hold without decoding anything.
MIN_RECORD_SIZE = 7
MAX_MAGIC = rb.CURRENT_MAGIC
# The budget of a compressed batch's decompressed records (F5): DECOMPRESSION_RATIO times
# the topic's max.message.bytes, and never below rb.DEFAULT_MAX_DECOMPRESSED_BYTES (64 MiB).
# Kafka has no such cap (it streams and skips); this one refuses decompression bombs that
# some consumers (librdkafka inflates a whole batch) could not read. Memory is bounded by the
# streaming walk whatever the budget: the budget bounds the time spent inflating.
DECOMPRESSION_RATIO = 64

# attributes int16 at 21 and maxTimestamp int64 at 35 (see the layout in batch.py).
_ATTRIBUTES = struct.Struct(">h")
_MAX_TIMESTAMP = struct.Struct(">q")
_CRC = struct.Struct(">I")
_MAX_TIMESTAMP_OFFSET = 35
_CONTROL = rb.CONTROL_FLAG_MASK
_CODEC = rb.COMPRESSION_CODEC_MASK
_LOG_APPEND_TIME_BIT = rb.TIMESTAMP_TYPE_MASK
_V2 = rb.CURRENT_MAGIC
_HEADER_SIZE = rb.RECORD_BATCH_OVERHEAD
_RECORDS_OFFSET = rb.RECORDS_OFFSET
_NO_TIMESTAMP = rb.NO_TIMESTAMP
_crc32c = rb.crc32c


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
    # None: max(64 MiB, DECOMPRESSION_RATIO * max_message_bytes), see decompression_budget
    max_decompressed_bytes: int | None = None
    # The most bytes a compressed batch's records may inflate to (F5): computed once from
    # the two fields above (every append reads it).
    decompression_budget: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        budget = self.max_decompressed_bytes
        if budget is None:
            budget = max(rb.DEFAULT_MAX_DECOMPRESSED_BYTES, DECOMPRESSION_RATIO * self.max_message_bytes)
        object.__setattr__(self, "decompression_budget", budget)

    @classmethod
    def from_log_config(cls, config: Any) -> ValidatorConfig:
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


def _decode_error(exc: record_errors.DecodeError, index: int) -> Exception:
    """The log error (and Kafka code) of a record-layer failure in batch ``index``."""
    if isinstance(exc, record_errors.RecordTooLargeError):
        return RecordBatchTooLargeError(f"batch {index}: {exc}")
    if isinstance(exc, record_errors.InvalidRecordError):
        err = InvalidRecordError(f"batch {index}: {exc}")
        batch_index = getattr(exc, "batch_index", None)
        if batch_index is not None:
            err.record_errors = [(batch_index, str(exc))]
        return err
    return CorruptRecordError(f"batch {index}: {exc}")


def _check_records(buf, pos: int, header: BatchHeader, index: int, config: ValidatorConfig,
                   now_ms: int) -> tuple[int, int]:
    """Walk and check every record of the batch at ``pos`` (a leader append); return (max
    record timestamp, offset delta of its first occurrence), Kafka's maxBatchTimestamp."""
    attributes = header.attributes
    count = header.records_count
    lat_bit = attributes & _LOG_APPEND_TIME_BIT
    if config.log_append_time and lat_bit:
        message = "producers may not set the timestamp type to LogAppendTime"
        exc = InvalidTimestampError(f"batch {index}: {message}")
        exc.record_errors = [(i, message) for i in range(count)]
        raise exc
    start, end = pos + _RECORDS_OFFSET, pos + header.size_in_bytes
    codec = attributes & _CODEC
    budget = config.decompression_budget
    try:
        lo, hi, hi_index, nulls = check_records(buf, start, end, codec, count, budget)
    except record_errors.DecodeError as exc:
        raise _decode_error(exc, index) from None
    base = header.base_timestamp
    if count and (base + lo < INT64_MIN or base + hi > INT64_MAX):
        raise CorruptRecordError(f"batch {index}: a record timestamp overflows int64")
    check_ts = not config.log_append_time
    low = now_ms - config.timestamp_before_max_ms
    high = now_ms + config.timestamp_after_max_ms
    if lat_bit:
        record_lo = record_hi = header.max_timestamp
    else:
        record_lo, record_hi = base + lo, base + hi
    if (config.compacted and nulls) or (check_ts and count and (record_lo < low or record_hi > high)):
        _raise_record_errors(buf, start, end, header, index, config, low, high, budget)
    if lat_bit:
        return header.max_timestamp, 0
    if count == 0 or record_hi <= _NO_TIMESTAMP:
        return _NO_TIMESTAMP, -1
    return record_hi, hi_index


def _raise_record_errors(buf, start: int, end: int, header: BatchHeader, index: int,
                         config: ValidatorConfig, low: int, high: int, budget: int) -> None:
    """The error path: name every record at fault (Kafka's ``RecordError`` s, KIP-467): a
    null key on a compacted topic (INVALID_RECORD), else a CreateTime timestamp outside
    [now - before.max.ms, now + after.max.ms] (INVALID_TIMESTAMP, which wins when present)."""
    lat_bit = header.attributes & _LOG_APPEND_TIME_BIT
    check_ts = not config.log_append_time
    errors: list[tuple[int, str]] = []
    bad_timestamp = False
    for i, (delta, null_key) in enumerate(record_details(buf, start, end, header.attributes & _CODEC,
                                                         header.records_count, budget)):
        if config.compacted and null_key:
            errors.append((i, "a compacted topic cannot accept a record without a key"))
            continue
        ts = header.max_timestamp if lat_bit else header.base_timestamp + delta
        if check_ts and ts != _NO_TIMESTAMP and (ts < low or ts > high):
            errors.append((i, (f"timestamp {ts} of the record with offset delta {i} is out of range "
                               f"[{low}, {high}] (message.timestamp.before/after.max.ms)")))
            bad_timestamp = True
    if not errors:
        return
    summary = (f"batch {index}: {len(errors)} record(s) rejected, the first: record {errors[0][0]}: "
               f"{errors[0][1]}")
    exc = InvalidTimestampError(summary) if bad_timestamp else InvalidRecordError(summary)
    exc.record_errors = errors
    raise exc


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
    leader = origin is not _REPLICATION
    headers: list[tuple[int, BatchHeader]] = []
    record_max: list[tuple[int, int]] | None = [] if leader else None
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
        if record_max is not None:  # as the leader
            batch_max = _check_records(buf, pos, header, index, config, now_ms)
            record_max.append(batch_max)
            batch_max_ts, batch_max_offset = batch_max[0], header.base_offset + batch_max[1]
        else:
            batch_max_ts, batch_max_offset = header.max_timestamp, header.last_offset
        if index == 0:
            first_offset = header.base_offset
            last_offset_of_first_batch = header.last_offset
        elif header.last_offset <= last_offset:
            monotonic = False
        last_offset = header.last_offset
        if batch_max_ts > max_ts:
            max_ts, offset_of_max_ts = batch_max_ts, batch_max_offset
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
_new_tuple = tuple.__new__

# Positions of the header fields in ``HEADER``'s tuple (``broker.record.batch.H_*``, taken
# from ``BatchHeader._fields``), for the fast path, which indexes the unpacked tuple
# instead of building a BatchHeader.
_BASE_OFFSET, _BATCH_LENGTH, _MAGIC = rb.H_BASE_OFFSET, rb.H_BATCH_LENGTH, rb.H_MAGIC
_PARTITION_LEADER_EPOCH, _CRC_FIELD, _ATTRIBUTES_FIELD = rb.H_PARTITION_LEADER_EPOCH, rb.H_CRC, rb.H_ATTRIBUTES
_LAST_OFFSET_DELTA, _BASE_TIMESTAMP = rb.H_LAST_OFFSET_DELTA, rb.H_BASE_TIMESTAMP
_MAX_TIMESTAMP_FIELD, _PRODUCER_ID = rb.H_MAX_TIMESTAMP, rb.H_PRODUCER_ID
_PRODUCER_EPOCH, _BASE_SEQUENCE, _RECORDS_COUNT = rb.H_PRODUCER_EPOCH, rb.H_BASE_SEQUENCE, rb.H_RECORDS_COUNT
# ``analyze_single_batch`` returns the 13 header fields, with the max timestamp replaced by
# the records' (Kafka's maxBatchTimestamp), followed by these two.
_HEADER_FIELDS = len(BatchHeader._fields)
_HEADER_MAX_TIMESTAMP = _HEADER_FIELDS  # the maxTimestamp the batch's header holds
_MAX_TIMESTAMP_DELTA = _HEADER_FIELDS + 1  # offset delta of the record holding the max (-1: none)
if _HEADER_FIELDS != 13 or len(rb.HEADER.unpack(bytes(rb.HEADER.size))) != _HEADER_FIELDS:
    raise ImportError("broker.record.batch.HEADER and BatchHeader disagree on the header fields")
if LogAppendInfo._fields != (
        "first_offset", "last_offset", "max_timestamp", "offset_of_max_timestamp", "log_append_time",
        "shallow_count", "records_count", "valid_bytes", "batches", "source_compression",
        "last_offset_of_first_batch", "offsets_monotonic", "record_max_timestamps"):
    raise ImportError("LogAppendInfo's fields changed: update assign_offsets_single's positional build")


def analyze_single_batch(buf, config: ValidatorConfig, now_ms: int, origin: AppendOrigin) -> tuple | None:
    """``analyze_and_validate_records`` fused into one pass for the common request: ``buf``
    is exactly one v2 batch. Returns, when every check of the general path passes (every
    record walked, as there), the header's 13 fields (``HEADER``'s tuple order, the max
    timestamp being the records' own) followed by the header's stored max timestamp and the
    offset delta of the record holding the max, for ``assign_offsets_single``; None when
    the general path must decide: another shape (several batches, a partial or stray entry,
    other magic) or any failed check, which the general path then reports with its own
    error, so errors are those of ``analyze_and_validate_records``. Read-only, like it."""
    end = len(buf)
    if end < _HEADER_SIZE:
        return None
    h = _HEADER_UNPACK(buf, 0)
    if (h[_BATCH_LENGTH] + 12 != end or h[_MAGIC] != _V2 or end > config.max_message_bytes
            or _crc32c(memoryview(buf)[21:]) != h[_CRC_FIELD]):
        return None
    attributes = h[_ATTRIBUTES_FIELD]
    count = h[_RECORDS_COUNT]
    if origin is _CLIENT:
        last_offset_delta = h[_LAST_OFFSET_DELTA]
        if (h[_BASE_OFFSET] != 0 or last_offset_delta < 0 or count <= 0 or last_offset_delta + 1 != count
                or attributes & _CONTROL or (h[_PRODUCER_ID] >= 0 and h[_BASE_SEQUENCE] < 0)):
            return None
    elif count < 0:
        return None
    header_max = h[_MAX_TIMESTAMP_FIELD]
    if origin is _REPLICATION:  # validated by a leader: nothing of the records is checked
        return h + (header_max, h[_LAST_OFFSET_DELTA])
    lat_bit = attributes & _LOG_APPEND_TIME_BIT
    if lat_bit and config.log_append_time:
        return None
    try:
        lo, hi, hi_index, nulls = check_records(buf, _RECORDS_OFFSET, end, attributes & _CODEC, count,
                                                config.decompression_budget)
    except record_errors.DecodeError:
        return None
    if nulls and config.compacted:
        return None
    if lat_bit:
        record_lo = record_hi = header_max
        hi_index = 0
    else:
        base = h[_BASE_TIMESTAMP]
        record_lo, record_hi = base + lo, base + hi
        if count and (record_lo < INT64_MIN or record_hi > INT64_MAX):
            return None
    if (not config.log_append_time and count
            and (record_lo < now_ms - config.timestamp_before_max_ms
                 or record_hi > now_ms + config.timestamp_after_max_ms)):
        return None  # (the general path checks record by record, skipping NO_TIMESTAMP)
    if count == 0 or record_hi <= _NO_TIMESTAMP:
        record_hi, hi_index = _NO_TIMESTAMP, -1
    if record_hi == header_max:  # the producer's maxTimestamp is the records' (the common case)
        return h + (header_max, hi_index)
    return h[:_MAX_TIMESTAMP_FIELD] + (record_hi,) + h[_MAX_TIMESTAMP_FIELD + 1:] + (header_max, hi_index)


def assign_offsets_single(buf, h: tuple, first_offset: int, partition_leader_epoch: int, now_ms: int,
                          log_append_time: bool) -> LogAppendInfo:
    """``assign_offsets`` for the one batch ``analyze_single_batch`` accepted (``h``, what
    it returned): the same bytes written and the same ``LogAppendInfo`` returned, built
    from ``h`` without re-reading the header. ``buf`` must be writable (the caller made
    sure of it)."""
    if first_offset < 0:
        raise ValueError(f"negative first offset {first_offset}")
    batch_length = h[_BATCH_LENGTH]
    _OFFSET_LENGTH_EPOCH.pack_into(buf, 0, first_offset, batch_length, partition_leader_epoch)
    record_max, max_delta = h[_MAX_TIMESTAMP_FIELD], h[_MAX_TIMESTAMP_DELTA]
    if (log_append_time or h[_ATTRIBUTES_FIELD] & _LOG_APPEND_TIME_BIT
            or record_max != h[_HEADER_MAX_TIMESTAMP]):  # rare: a timestamp rewrite and a CRC
        stored = h[:_MAX_TIMESTAMP_FIELD] + (h[_HEADER_MAX_TIMESTAMP],) + h[_MAX_TIMESTAMP_FIELD + 1:_HEADER_FIELDS]
        if log_append_time:
            rb.write_log_append_time(buf, 0, now_ms)
        else:
            _set_create_time(buf, 0, BatchHeader._make(stored), record_max)
        fields = _HEADER_UNPACK(buf, 0)
    else:
        fields = (first_offset, batch_length, partition_leader_epoch) + h[_MAGIC:_HEADER_FIELDS]
    header = _new_tuple(BatchHeader, fields)
    last_offset = first_offset + fields[_LAST_OFFSET_DELTA]
    if log_append_time:
        max_ts, offset_of_max_ts, append_time = now_ms, first_offset, now_ms
    elif record_max > _NO_TIMESTAMP:
        max_ts, offset_of_max_ts, append_time = record_max, first_offset + max_delta, _NO_TIMESTAMP
    else:
        max_ts, offset_of_max_ts, append_time = _NO_TIMESTAMP, -1, _NO_TIMESTAMP
    # LogAppendInfo's fields in order (first_offset, last_offset, max_timestamp,
    # offset_of_max_timestamp, log_append_time, shallow_count, records_count, valid_bytes,
    # batches, source_compression, last_offset_of_first_batch, offsets_monotonic,
    # record_max_timestamps), built without the keyword call (every produce builds one)
    return _new_tuple(LogAppendInfo, (
        first_offset, last_offset, max_ts, offset_of_max_ts, append_time, 1, fields[_RECORDS_COUNT], len(buf),
        ((0, header),), fields[_ATTRIBUTES_FIELD] & _CODEC, last_offset, True, None))


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
