"""Planning a read on the driver: from options to input partitions (batch reads), and
from offsets to micro-batches (streaming reads).

Owns: ``OffsetRange`` (what an input partition reads), the ``OffsetReader`` protocol (what
planning asks of a log or a cluster), which topic-partitions a strategy selects,
resolving the starting and ending bounds to offsets (earliest, latest, JSON offsets,
timestamps), the data-loss checks against the log start and end offsets, narrowing the
ranges by the pushed filters, and splitting ranges into input partitions (Spark's
``KafkaOffsetRangeCalculator``). It knows nothing of files or sockets: it asks an
``OffsetReader``, one per mode (``readers.open_offset_reader``): direct mode
``readers.direct.DirectOffsetReader`` (a log directory's segment and index files), network
mode ``readers.network.NetworkOffsetReader`` (Metadata and ListOffsets against the
brokers).

Not here, so that the executors never import this module: the data-loss error and its
reporting (``errors.py``: ``KafkaDataLossError``, ``report_data_loss``, ``TopicPartition``),
used by the range readers too, and the pushed filters themselves (``pushdown.py``:
``PushedFilters``, which filters the source takes over and the exact row filter the tasks
apply). Planning is driver-only: the batch reader's ``partitions()``, the stream reader's
offset calls, and the export job's planning (``jobs.export.plan_export``).

The steps, in order (``plan_ranges``):

1. the assigned partitions: ``assign`` lists them (each must exist), ``subscribe`` takes
   every partition of the listed topics that exist, ``subscribePattern`` those of the
   topics whose whole name matches (Kafka's internal topics left out unless
   ``kafka.exclude.internal.topics=false``);
2. both bounds resolved per partition as Spark does: earliest = log start offset, latest =
   log end offset, JSON offsets (-2/-1 = earliest/latest; the JSON must name exactly the
   assigned partitions), timestamps through ListOffsets semantics (the first offset whose
   record timestamp is >= the timestamp; none: a starting bound follows
   startingOffsetsByTimestampStrategy, error or latest, an ending bound is latest);
3. a resolved start above the resolved end is an error; offsets of [start, end) outside
   [log start, log end) are lost data: with failOnDataLoss=true an error naming the
   partition and the lost range, else a warning and the range is cut to what exists;
4. pushed filters narrow the ranges (partition and topic filters drop partitions, offset
   filters cut the range, a timestamp lower bound moves the start to the first offset
   with a timestamp at or above it through the time index) - after step 3, so that a
   query fails or warns exactly as it would without pushdown;
5. split: each range into ceil(size / maxRecordsPerPartition) pieces, then, when there are
   fewer ranges than minPartitions, large ranges into pieces in proportion to their size
   (Spark's rounding); empty ranges are dropped.

Streaming reads (``readers/stream.py``) use the same steps per micro-batch: the offsets
Spark checkpoints are Spark's ``KafkaSourceOffset`` JSON (``offsets_json`` /
``offsets_from_json``: ``{"topic": {"0": 42, "1": 7}}``, the next offset to read per
partition, sorted by topic and partition because the engine compares offsets as JSON
text); ``initial_offsets`` resolves startingOffsets (steps 1-2); ``rate_limit`` is Spark's
``KafkaMicroBatchStream.rateLimit`` (maxOffsetsPerTrigger spread over the partitions in
proportion to their lag); ``stream_ranges`` turns a micro-batch's start and end offsets
into ranges as Spark's ``getOffsetRangesFromResolvedOffsets`` does (partitions that
appeared start at their log start offset, vanished partitions and offsets are data loss)
and then applies steps 3 and 5.

Offsets are positions, not counts: a range [start, end) holds the records whose offsets
lie in it, anywhere from none to ``end - start`` (compaction, transaction markers and
aborted transactions leave gaps). Nothing here assumes a count: the data-loss checks
compare offsets with the log start and end offsets only, so a gap, a range ending on a
removed offset or a range with no record at all is never data loss, and the range
readers stop at the first batch at or past ``end`` without waiting for the offsets
before it. Sizes (``OffsetRange.size``, splitting, ``rate_limit``, ``pending_records``)
count offsets, as Spark's do. A snapshot read (``kafkalog.snapshot``) is planned the
same way; its options never split a range (``options.parse_options`` refuses them).

Invariants: the output is sorted by (topic, partition, start) and depends only on the
options, the filters and the offsets the reader reports (deterministic); ranges of one
partition never overlap and together cover exactly the planned range; every filter
``PushedFilters.accept`` takes is applied exactly (by the narrowing or by ``row_mask``).
A micro-batch's ranges lie within its [start, end) offsets, so consecutive micro-batches
never overlap and leave no gap but the data loss they report.

Thread-safety: pure functions (they only read the ``PushedFilters`` and call the
``OffsetReader`` they are given, which belongs to the calling thread).
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple, Protocol

from .errors import (
    KafkaDataLossError,  # noqa: F401  (what check_range / stream_ranges raise; re-exported)
    TopicPartition,
    report_data_loss,
)
from .errors import (
    format_partition as _tp,
)
from .errors import (
    format_partitions as _tps,
)
from .errors import (
    report_data_loss_message as _lost,
)
from .options import EARLIEST, LATEST, KafkaLogOptionError, OffsetSpec, ReadOptions, Strategy
from .pushdown import PushedFilters

__all__ = [
    "OffsetRange", "OffsetReader", "assigned_partitions", "resolve_bounds", "plan_ranges",
    "check_range", "split_ranges", "INTERNAL_TOPICS", "offsets_json", "offsets_from_json",
    "initial_offsets", "latest_partition_offsets", "rate_limit", "pending_records",
    "stream_ranges",
]

log = logging.getLogger("spark_kafkalog")

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class OffsetRange(NamedTuple):
    """Offsets [start, end) of one topic-partition."""
    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def topic_partition(self) -> TopicPartition:
        return self.topic, self.partition


class OffsetReader(Protocol):
    """What planning needs to know of a log (direct) or a cluster (network)."""

    def topic_partitions(self, topics: Iterable[str] | None = None) -> list[TopicPartition]:
        """Every existing partition, or those of ``topics``, sorted."""

    def earliest_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The log start offset of each partition."""

    def latest_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The log end offset of each partition."""

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """The first offset whose record timestamp is >= the given one, None when none."""

    def describe(self) -> str:
        """Where the partitions come from, for error messages."""


# --- 1. partitions ---

def assigned_partitions(strategy: Strategy, reader: OffsetReader,
                        kafka_params: Mapping[str, str] | None = None) -> list[TopicPartition]:
    if strategy.kind == "assign":
        existing = set(reader.topic_partitions(sorted({t for t, _ in strategy.partitions})))
        missing = [tp for tp in strategy.partitions if tp not in existing]
        if missing:
            raise KafkaLogOptionError(
                f"Partitions {_tps(missing)} given in option 'assign' do not exist in "
                f"{reader.describe()}")
        return sorted(strategy.partitions)
    if strategy.kind == "subscribe":
        tps = reader.topic_partitions(strategy.topics)
        found = {t for t, _ in tps}
        for topic in strategy.topics:
            if topic not in found:
                log.warning("subscribed topic %s does not exist in %s: nothing to read from it",
                            topic, reader.describe())
        return sorted(tps)
    pattern = re.compile(strategy.pattern)
    exclude_internal = str((kafka_params or {}).get("exclude.internal.topics", "true")).lower() != "false"
    return sorted(tp for tp in reader.topic_partitions()
                  if pattern.fullmatch(tp[0]) and not (exclude_internal and tp[0] in INTERNAL_TOPICS))


# --- 2. bounds ---

def _resolve(spec: OffsetSpec, tps: list[TopicPartition], reader: OffsetReader, starting: bool,
             earliest: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]
             ) -> dict[TopicPartition, int]:
    position = "start" if starting else "end"
    if spec.kind == "earliest":
        return {tp: earliest[tp] for tp in tps}
    if spec.kind == "latest":
        return {tp: latest[tp] for tp in tps}
    if spec.kind == "offsets":
        if set(spec.offsets) != set(tps):
            raise KafkaLogOptionError(
                "Partitions specified for Kafka start offsets don't match what are assigned. Maybe "
                "topic partitions are created or deleted while the query is running. Use -1 for "
                f"latest, -2 for earliest. Specified: {_tps(spec.offsets)} Assigned: {_tps(tps)}")
        return {tp: earliest[tp] if spec.offsets[tp] == EARLIEST else
                latest[tp] if spec.offsets[tp] == LATEST else spec.offsets[tp] for tp in tps}
    if spec.kind == "timestamp":
        wanted = {tp: spec.timestamp for tp in tps}
    else:
        if set(spec.timestamps) != set(tps):
            raise KafkaLogOptionError(
                f"Partitions specified for Kafka timestamp based {position} offsets don't match what "
                "are assigned. Maybe topic partitions are created or deleted while the query is "
                "running, or you didn't specify all the partitions. Specified: "
                f"{_tps(spec.timestamps)} Assigned: {_tps(tps)}")
        wanted = dict(spec.timestamps)
    out: dict[TopicPartition, int] = {}
    lookups = {tp: ts for tp, ts in wanted.items() if ts >= 0}
    found = reader.offsets_for_times(lookups) if lookups else {}
    for tp in tps:
        ts = wanted[tp]
        if ts == EARLIEST:
            out[tp] = earliest[tp]
        elif ts == LATEST:
            out[tp] = latest[tp]
        elif (offset := found.get(tp)) is not None:
            out[tp] = offset
        elif starting and spec.strategy == "error":
            raise KafkaLogOptionError(
                f"No offset matched from request of topic-partition {_tp(tp)} and timestamp {ts}.")
        else:
            out[tp] = latest[tp]
    return out


def resolve_bounds(options: ReadOptions, reader: OffsetReader, tps: list[TopicPartition]
                   ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int],
                              dict[TopicPartition, int], dict[TopicPartition, int]]:
    """(start, end, earliest, latest) offsets of every partition of ``tps``."""
    earliest = reader.earliest_offsets(tps) if tps else {}
    latest = reader.latest_offsets(tps) if tps else {}
    start = _resolve(options.starting, tps, reader, True, earliest, latest)
    end = _resolve(options.ending, tps, reader, False, earliest, latest)
    return start, end, earliest, latest


# --- 3. data loss ---

def check_range(tp: TopicPartition, start: int, end: int, earliest: int, latest: int,
                fail_on_data_loss: bool) -> tuple[int, int]:
    """The readable part of [start, end) given the log's [earliest, latest)."""
    if start > end:
        raise KafkaLogOptionError(
            f"The resolved start offset {start} is greater than the resolved end offset {end} for "
            f"topic {tp[0]} partition {tp[1]}. There may be multiple reasons: 1. Start offset is "
            "set to too big a value that after resolution, end offset is smaller than it "
            "(a timestamp and an offset, or an offset and latest); 2. The Kafka topic partition "
            "is broken.")
    if start < earliest and start < end:
        report_data_loss(tp, start, min(end, earliest),
                   f"the log starts at offset {earliest} (older records were deleted by retention "
                   "or DeleteRecords)", fail_on_data_loss)
        start = min(earliest, end)
    if end > latest and end > start:
        report_data_loss(tp, max(start, latest), end, f"the log ends at offset {latest}", fail_on_data_loss)
        end = max(latest, start)
    return start, end


# --- 4. pushdown ---

def _narrow(ranges: list[OffsetRange], filters: PushedFilters, reader: OffsetReader) -> list[OffsetRange]:
    ranges = [r for r in ranges if filters.allows(r.topic_partition)]
    lo, hi = filters.offset_bounds()
    ranges = [r._replace(start=max(r.start, lo), end=max(min(r.end, hi), max(r.start, lo)))
              for r in ranges]
    floor = filters.timestamp_floor_ms()
    if floor is not None:
        wanted = {r.topic_partition: floor for r in ranges if r.size > 0}
        found = reader.offsets_for_times(wanted) if wanted else {}
        narrowed = []
        for r in ranges:
            if r.size <= 0:
                continue
            at = found.get(r.topic_partition)
            narrowed.append(r._replace(start=r.end) if at is None
                            else r._replace(start=min(max(r.start, at), r.end)))
        ranges = narrowed
    return ranges


# --- 5. splitting ---

def _round(x: float) -> int:
    return math.floor(x + 0.5)  # Scala's math.round (half up), not Python's half-even


def _divide(parts: int, r: OffsetRange) -> list[OffsetRange]:
    remaining, start, out = r.size, r.start, []
    for part in range(parts):
        this = remaining // (parts - part)  # the last piece takes the rounding
        remaining -= this
        end = min(start + this, r.end)
        out.append(r._replace(start=start, end=end))
        start = end
    return out


def _part_count(size: int, total: int, min_parts: int) -> int:
    return max(_round(size / total * min_parts), 1)


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None = None,
                 max_records_per_partition: int | None = None) -> list[OffsetRange]:
    """Spark's KafkaOffsetRangeCalculator.getRanges (no executor locations): empty ranges
    dropped; ranges above ``max_records_per_partition`` cut into equal pieces; then if
    fewer than ``min_partitions`` ranges remain, ranges holding enough of the total are
    cut into pieces in proportion to their size."""
    ranges = [r for r in ranges if r.size > 0]
    if max_records_per_partition is not None:
        ranges = [piece for r in ranges
                  for piece in _divide(-(-r.size // max_records_per_partition), r) if piece.size > 0]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    unsplit = [r for r in ranges if _part_count(r.size, total, min_partitions) == 1]
    unsplit_tps = {r.topic_partition for r in unsplit}
    split_total = total - sum(r.size for r in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    out: list[OffsetRange] = []
    for r in ranges:
        parts = 1 if r.topic_partition in unsplit_tps else _part_count(r.size, split_total, split_min)
        out.extend(piece for piece in _divide(parts, r) if piece.size > 0)
    return out


# --- all together ---

def plan_ranges(options: ReadOptions, reader: OffsetReader,
                filters: PushedFilters | None = None) -> list[OffsetRange]:
    """The input partitions' offset ranges (steps 1-5 of the module docstring)."""
    tps = assigned_partitions(options.strategy, reader, options.kafka_params)
    start, end, earliest, latest = resolve_bounds(options, reader, tps)
    ranges = []
    for tp in tps:
        s, e = check_range(tp, start[tp], end[tp], earliest[tp], latest[tp], options.fail_on_data_loss)
        ranges.append(OffsetRange(tp[0], tp[1], s, e))
    if filters is not None:
        ranges = _narrow(ranges, filters, reader)
    ranges = split_ranges(ranges, options.min_partitions, options.max_records_per_partition)
    return sorted(ranges)


# --- streaming ---

def offsets_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's KafkaSourceOffset JSON of ``offsets`` (``{"topic": {"0": 42}}``), topics and
    partitions sorted: Spark compares a source's offsets by their JSON text."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def offsets_from_json(value) -> dict[TopicPartition, int]:
    """The offsets of a KafkaSourceOffset JSON (text or parsed), as checkpointed."""
    obj = json.loads(value) if isinstance(value, str) else value
    example = '{"topicA":{"0":23,"1":42}}'
    if not isinstance(obj, dict):
        raise KafkaLogOptionError(f"Invalid kafkalog source offset: expected e.g. {example}, got {value}")
    out: dict[TopicPartition, int] = {}
    for topic, parts in obj.items():
        if not isinstance(parts, dict):
            raise KafkaLogOptionError(f"Invalid kafkalog source offset: expected e.g. {example}, got {value}")
        for key, offset in parts.items():
            if not (isinstance(key, str) and key.isdigit() and isinstance(offset, int)
                    and not isinstance(offset, bool) and offset >= 0):
                raise KafkaLogOptionError(
                    f"Invalid kafkalog source offset: expected e.g. {example}, got {value}")
            out[(topic, int(key))] = offset
    return out


def initial_offsets(options: ReadOptions, reader: OffsetReader) -> dict[TopicPartition, int]:
    """Where a new streaming query starts: startingOffsets (or the starting timestamps)
    resolved for the partitions assigned now (steps 1-2). Offsets given in JSON are kept
    as given; those the log no longer holds are reported when they are read."""
    tps = assigned_partitions(options.strategy, reader, options.kafka_params)
    start, _, _, _ = resolve_bounds(options, reader, tps)
    return start


def latest_partition_offsets(options: ReadOptions, reader: OffsetReader) -> dict[TopicPartition, int]:
    """The log end offset (latest) of every partition assigned now."""
    tps = assigned_partitions(options.strategy, reader, options.kafka_params)
    return reader.latest_offsets(tps) if tps else {}


def _begin(tp: TopicPartition, start: Mapping[TopicPartition, int],
           new_earliest: Mapping[TopicPartition, int]) -> int | None:
    return start[tp] if tp in start else new_earliest.get(tp)


def rate_limit(limit: int, start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               new_earliest: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """Spark's KafkaMicroBatchStream.rateLimit: the end offsets of a micro-batch of about
    ``limit`` records from ``start`` towards ``latest``, spread over the partitions in
    proportion to their lag (a partition with a lag gets at least one record; partitions
    not in ``start`` begin at ``new_earliest``)."""
    sizes: dict[TopicPartition, int] = {}
    begins: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        begin = _begin(tp, start, new_earliest)
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
            begins[tp] = begin
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        if tp not in sizes:
            out[tp] = end
            continue
        prorate = limit * (sizes[tp] / total)
        admitted = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(end, begins[tp] + admitted)
    return out


def pending_records(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
                    new_earliest: Mapping[TopicPartition, int]) -> int:
    """Records between ``start`` and ``latest`` (minOffsetsPerTrigger's count)."""
    total = 0
    for tp, end in latest.items():
        begin = _begin(tp, start, new_earliest)
        if begin is not None:
            total += max(end - begin, 0)
    return total


def stream_ranges(options: ReadOptions, reader: OffsetReader, start: Mapping[TopicPartition, int],
                  end: Mapping[TopicPartition, int]) -> list[OffsetRange]:
    """The input partitions of the micro-batch [start, end) (Spark's
    getOffsetRangesFromResolvedOffsets, then steps 3 and 5): partitions of ``end`` not in
    ``start`` (created since) start at their log start offset, and one that does not
    start at 0 is data loss, as in Spark; partitions of ``start`` missing from ``end`` or
    from the log, an end below its start and offsets outside the log are data loss
    (failOnDataLoss: an error naming them, else a warning and what remains is read)."""
    fail = options.fail_on_data_loss
    gone = [tp for tp in start if tp not in end]
    if gone:
        _lost(f"{_tps(gone)} are gone. Some data may have been missed.", fail)
    topics = sorted({t for t, _ in end})
    existing = set(reader.topic_partitions(topics)) if topics else set()
    vanished = [tp for tp in end if tp not in existing]
    if vanished:
        _lost(f"{_tps(vanished)} no longer exist in {reader.describe()}. Some data may have been "
              "missed.", fail)
    present = [tp for tp in sorted(end) if tp in existing]
    earliest = reader.earliest_offsets(present) if present else {}
    latest = reader.latest_offsets(present) if present else {}
    ranges = []
    for tp in present:
        if tp in start:
            begin = start[tp]
        else:
            begin = earliest[tp]
            if begin != 0:
                _lost(f"Added partition {_tp(tp)} starts from {begin} instead of 0. Some data may "
                      "have been missed.", fail)
        until = end[tp]
        if until < begin:
            _lost(f"Partition {_tp(tp)}'s offset was changed from {begin} to {until}, some data may "
                  "have been missed.", fail)
            continue
        begin, until = check_range(tp, begin, until, earliest[tp], latest[tp], fail)
        ranges.append(OffsetRange(tp[0], tp[1], begin, until))
    return sorted(split_ranges(ranges, options.min_partitions, options.max_records_per_partition))
