"""The log of one partition as the broker sees it (Kafka's ``UnifiedLog``).

Owns the semantics over ``LocalLog``'s bytes: leader appends (validation, offset
assignment in place, producer-state dedup, leader-epoch lineage, rolling, the flush.messages
policy), reads bounded by an isolation level, ListOffsets lookups (the search by timestamp
is ``list_offsets.py``), and the offset boundaries with their invariant::

    log_start_offset <= last_stable_offset <= high_watermark <= log_end_offset

- log start offset: the first offset a reader may get; moved by retention (whole segments)
  and by DeleteRecords (``maybe_increment_log_start_offset``, never past the high
  watermark);
- high watermark: on this single-node broker the leader is the only replica, so it is
  advanced to the log end offset by every append (and on load);
- local log start offset (tiered storage, KIP-405): the first local segment's base when
  above the log start offset. For a remote-storage log (``remote_log_enabled``) the
  offsets below it live only remotely: ``read`` raises ``OffsetMovedToTieredStorageError``
  and the ``RemoteLogManager`` (``remote/``) serves them; local retention moves only it;
- last stable offset: min(first unstable offset, high watermark), the bound of
  READ_COMMITTED reads (``producer_state.py`` knows the open transactions);
- recovery point: every offset below it is fsynced (``LocalLog``); it moves only at an
  actual flush: flush.messages (``unflushed >= flush.messages`` fsyncs before the append
  returns, so flush.messages=1 means an acknowledged record is on disk), flush.ms
  (``flush_if_due``, called by ``LogManager``'s scheduler) and the asynchronous flush of a
  rolled segment.

Retention, truncation, ListOffsets: ``retention.py``, ``truncation.py``, ``list_offsets.py``.

Append (``append_as_leader``), as Kafka's ``UnifiedLog.append``: validate every batch
(CRC, sizes, lastOffsetDelta + 1 == count, no client control batch, max.message.bytes,
timestamps; outside the lock, read-only), then under the partition lock: assign offsets in
place from the log end offset (LogAppendTime when the topic says so; nothing is
recompressed), record the leader epoch, roll if the active segment would pass
segment.bytes, has waited segment.ms less its jitter, has a full index or cannot hold the
offsets relative to its base (R16), check producer state (a retry of one of a producer's
last 5 batches returns that batch's original offsets and appends nothing), write, apply
producer state and the transaction index, advance the high watermark, flush if due.
All-or-nothing: any rejection happens before a byte is written. A request of exactly one
batch (every produce since v3) takes a fused path with the same checks and results:
``validator.analyze_single_batch`` (one header unpack, one CRC, one walk of the records)
and ``assign_offsets_single``, then, inline in ``append_as_leader``, the roll decision and
the write: for a batch without a producer id, or the next batch of a known producer's
sequence (``ProducerStateManager.analyze_in_sequence``, read-only, so it may precede the
roll decision), one call, ``LocalLog.append_batch_unless_roll`` (roll check, one
``pwrite``, index entries when due; None when the segment must roll first), and one call
to the producer state (``on_append_without_producer`` / ``apply_in_sequence``); any other
batch with a producer id (a new producer or epoch, a retry, a gap, transactions, markers)
takes ``should_roll_for``, ``analyze_append``, ``LocalLog.append_batch``, ``apply_append``.
Config values and the last leader epoch checked are cached between appends. Setting
``_fused_single_batch`` to False on a log sends every append through the general path, the
reference ``tests/test_log_append_fused.py`` checks the fused one against, byte for byte.

Reads (``read``) are lock-free: they load the published segment set and offsets once and
return a ``FileSlice`` of a segment file (the whole batch containing the start offset, at
least one batch even if larger than ``max_length``), sent as is.

On-disk format: the partition directory (``local_log.py``, ``segment.py``),
``leader-epoch-checkpoint`` (``epoch_cache.py``), ``<offset>.snapshot``
(``producer_state.py``), ``partition.metadata`` (``files.py``).

I/O errors: every mutating path (and reads) runs inside the log directory's choke point
(``local_log.maybe_handle_io_exception``): an ``OSError`` marks the directory offline and
surfaces as ``KafkaStorageError``; every later call on a log of that directory raises
``KafkaStorageError`` without touching a file.

Thread-safety: one writer per partition. ``_lock`` (re-entrant) serialises append, roll,
truncation, retention, the log cleaner's segment swap, log-start-offset and high-watermark
moves, snapshots and close.
Readers (``read``, ``fetch_offset_by_timestamp``, the offset properties) never take it:
the boundaries are single attribute stores of immutable values, published after the data
they cover; the segment set is copy-on-write. The last stable offset is two stores:
writers move the first unstable offset before the high watermark, readers load the high
watermark before the first unstable offset, so a reader never pairs a new high watermark
with a first unstable offset that misses a transaction below it. The only reader that may take the lock is a
high-watermark read while the stored watermark lacks its file position (rare: after
``update_high_watermark`` with a bare offset), as in Kafka.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from pathlib import Path

from ..record.batch import H_MAX_TIMESTAMP, H_PRODUCER_ID, NO_TIMESTAMP
from . import files, list_offsets, retention, truncation
from .clock import SYSTEM_TIME, Time
from .epoch_cache import LeaderEpochFileCache
from .errors import KafkaStorageError, LogOffsetOutOfRangeError, RecordListTooLargeError
from .list_offsets import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    OffsetAndTimestamp,
)
from .loader import LoadStats, LogLoader, rebuild_producer_state
from .local_log import LocalLog, LogDirFailureChannel, maybe_handle_io_exception
from .producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS, ProducerStateManager
from .remote.errors import OffsetMovedToTieredStorageError
from .scheduler import Scheduler
from .segment import FetchDataInfo, LogOffsetMetadata, LogSegment
from .segments import LogSegments
from .validator import (
    AppendOrigin,
    LogAppendInfo,
    ValidatorConfig,
    analyze_and_validate_records,
    analyze_single_batch,
    assign_offsets,
    assign_offsets_single,
)

__all__ = ["UnifiedLog", "OffsetAndTimestamp", "LOG_END", "HIGH_WATERMARK", "TXN_COMMITTED",
           "EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "MAX_TIMESTAMP", "EARLIEST_LOCAL_TIMESTAMP",
           "LATEST_TIERED_TIMESTAMP"]

log = logging.getLogger(__name__)

_CLIENT = AppendOrigin.CLIENT  # (a module constant: an enum member lookup costs more)

# Fetch isolation levels (Kafka's FetchIsolation).
LOG_END = "log_end"
HIGH_WATERMARK = "high_watermark"
TXN_COMMITTED = "txn_committed"


def _local_property(attribute: str, doc: str) -> property:
    """A read-only property delegating to the ``LocalLog``'s attribute of that name."""
    return property(lambda self: getattr(self._local, attribute), doc=doc)


class UnifiedLog:
    """One partition's log; build it with ``UnifiedLog.create`` (semantics, on-disk format
    and invariants in the module docstring).

    Thread-safety: a single writer at a time (``_lock``, re-entrant, taken by every
    mutating method); readers (``read``, ``fetch_offset_by_timestamp``, the offset
    properties) never take it and never block on a writer."""

    def __init__(self, log_start_offset: int, local_log: LocalLog,
                 leader_epoch_cache: LeaderEpochFileCache | None,
                 producer_state_manager: ProducerStateManager, topic_id: uuid.UUID | None = None,
                 load_stats: LoadStats | None = None, remote_storage_system_enable: bool = False) -> None:
        self._lock = threading.RLock()
        # Tiered storage: remote.log.storage.system.enable; the RemoteLogManager sets the last
        # remote offset (-1: none known) and ``remote_reader`` (ListOffsets in remote segments).
        self._remote_storage_system_enable = remote_storage_system_enable
        self.highest_offset_in_remote_storage = -1
        self.remote_reader = None
        self._local = local_log
        self.leader_epoch_cache = leader_epoch_cache
        self.producer_state_manager = producer_state_manager
        self.topic_id = topic_id
        self.load_stats = load_stats or LoadStats()
        self._time = local_log.time
        self._validator_config = ValidatorConfig.from_log_config(local_log.config)
        self._refresh_append_config(local_log.config)
        # The epoch (and cache) the last append checked: the cache's latest epoch is at least
        # that until the cache is truncated or replaced, which resets it to None.
        self._checked_epoch: int | None = None
        self._checked_epoch_cache: LeaderEpochFileCache | None = None
        self._log_start_offset = log_start_offset
        self._high_watermark_metadata = LogOffsetMetadata(log_start_offset)
        self._first_unstable_offset_metadata: LogOffsetMetadata | None = None
        self._deleted = False
        with self._lock:
            if local_log.recovery_point < log_start_offset:
                local_log.update_recovery_point(log_start_offset)
            self._maybe_increment_first_unstable_offset()

    @classmethod
    def create(cls, directory: Path | str, config, *, log_start_offset: int = 0, recovery_point: int = 0,
               scheduler: Scheduler | None = None, time: Time = SYSTEM_TIME,
               last_shutdown_clean: bool = True, topic_id: uuid.UUID | None = None,
               producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
               failure_channel: LogDirFailureChannel | None = None,
               high_watermark: int | None = None, remote_storage_system_enable: bool = False) -> UnifiedLog:
        """Open (creating it if needed) and recover the partition directory ``directory``
        (``<log.dir>/<topic>-<partition>``). ``log_start_offset`` and ``recovery_point``
        come from the log directory's checkpoints; ``last_shutdown_clean`` from its
        clean-shutdown marker. ``high_watermark`` defaults to the log end offset (a
        single node is its own in-sync replica). Without a ``scheduler`` the log gets a
        deterministic one nobody runs: delayed deletes and roll flushes then wait for
        ``scheduler.run_pending()``. ``remote_storage_system_enable``: the broker's
        remote.log.storage.system.enable (``remote_log_enabled``)."""
        directory = Path(directory)
        scheduler = scheduler if scheduler is not None else Scheduler(time)
        failure_channel = failure_channel or LogDirFailureChannel()
        with maybe_handle_io_exception(failure_channel, directory.parent, f"error while loading log {directory.name}"):
            if not directory.is_dir():
                directory.mkdir(parents=True)
                files.fsync_dir(directory.parent)  # the new partition survives a crash
            existing_id = files.read_partition_metadata(directory)
            if topic_id is not None and existing_id is not None and existing_id != topic_id:
                raise ValueError(f"{directory}: topic id {topic_id} differs from the stored {existing_id}")
            if topic_id is not None and existing_id is None:
                files.write_partition_metadata(directory, topic_id)
            topic_id = topic_id or existing_id
            segments = LogSegments(directory.name)
            epoch_cache = _open_epoch_cache(directory)

            def new_psm() -> ProducerStateManager:
                return ProducerStateManager(directory, producer_id_expiration_ms=producer_id_expiration_ms,
                                            time=time)

            psm = new_psm()
            stats = LoadStats()
            offsets = LogLoader(directory, config, had_clean_shutdown=last_shutdown_clean, segments=segments,
                                log_start_offset_checkpoint=log_start_offset,
                                recovery_point_checkpoint=recovery_point, leader_epoch_cache=epoch_cache,
                                producer_state_manager=psm, producer_state_factory=new_psm, time=time,
                                stats=stats, remote_log_enabled=_remote_log_enabled(
                                    remote_storage_system_enable, config, directory.name)).load()
            local = LocalLog(directory, config, segments, offsets.recovery_point, offsets.next_offset_metadata,
                             scheduler, time, failure_channel)
            ulog = cls(offsets.log_start_offset, local, epoch_cache, psm, topic_id, stats,
                       remote_storage_system_enable)
            hw = local.log_end_offset if high_watermark is None else high_watermark
            ulog.update_high_watermark(hw)
            return ulog

    # --- properties (lock-free) ---

    dir = _local_property("dir", "The partition directory.")
    parent_dir = _local_property("parent_dir", "The log directory (a log.dirs entry) holding it.")
    name = _local_property("name", "<topic>-<partition>.")
    topic_partition = _local_property("topic_partition", "(topic, partition).")
    config = _local_property("config", "The topic's current LogConfig.")
    scheduler = _local_property("scheduler", "The scheduler of delayed deletes and roll flushes.")
    log_end_offset = _local_property("log_end_offset", "The offset the next record gets.")
    log_end_offset_metadata = _local_property("log_end_offset_metadata", "LEO with its file position.")
    recovery_point = _local_property("recovery_point", "Every offset below it is fsynced.")
    unflushed_messages = _local_property("unflushed_messages", "LEO - recovery point.")
    last_flush_time = _local_property("last_flush_time", "When the recovery point last moved (ms).")

    @property
    def local_log(self) -> LocalLog:
        return self._local

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def local_log_start_offset(self) -> int:
        """The first offset on local disk (Kafka's ``localLogStartOffset``): the log start
        offset, or for a remote-storage log the first local segment's base when above it.
        Offsets in [log_start_offset, local_log_start_offset) live only in remote storage."""
        first = self._local.segments.first_segment_base_offset()
        start = self._log_start_offset
        return first if first is not None and first > start else start

    @property
    def remote_log_enabled(self) -> bool:
        """Kafka's ``remoteLogEnabled``: the broker's remote.log.storage.system.enable, the
        topic's remote.storage.enable, and not an internal topic (``__...``)."""
        return _remote_log_enabled(self._remote_storage_system_enable, self.config, self.name)

    @property
    def high_watermark(self) -> int:
        return self._high_watermark_metadata.message_offset

    @property
    def last_stable_offset(self) -> int:
        hw = self._high_watermark_metadata.message_offset  # before fu: see the module docstring
        fu = self._first_unstable_offset_metadata
        return fu.message_offset if fu is not None and fu.message_offset < hw else hw

    @property
    def first_unstable_offset(self) -> int | None:
        fu = self._first_unstable_offset_metadata
        return fu.message_offset if fu is not None else None

    @property
    def segments(self) -> list[LogSegment]:
        return self._local.segments.values()

    @property
    def num_segments(self) -> int:
        return len(self._local.segments)

    @property
    def active_segment(self) -> LogSegment:
        active = self._local.segments.active_segment
        assert active is not None, "a loaded log always has an active segment"
        return active

    @property
    def size(self) -> int:
        return self._local.segments.size_in_bytes()

    @property
    def is_offline(self) -> bool:
        return self._local.failure_channel.is_offline(self.parent_dir)

    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch if self.leader_epoch_cache is not None else None

    def _io(self, message: str):
        return self._local.io(f"{message} for {self.name} in dir {self.parent_dir}")

    def _check_open(self) -> None:
        if self._deleted:
            raise KafkaStorageError(f"log {self.name} has been deleted")
        self._local.check_if_memory_mapped_buffer_closed()

    # False (tests, on one instance) sends every append through the general path
    # (``analyze_and_validate_records``, ``assign_offsets``, ``LocalLog.append``): the
    # reference the fused single-batch path is checked against, byte for byte.
    _fused_single_batch = True

    def update_config(self, config) -> None:
        """A topic config change (segment.bytes, retention, flush policy, timestamp type...)."""
        with self._lock:
            self._local.update_config(config)
            self._validator_config = ValidatorConfig.from_log_config(config)
            self._refresh_append_config(config)

    def _refresh_append_config(self, config) -> None:
        """Cache the config values every append reads (each property is a dict lookup
        behind a call); redone by an append that finds another config object."""
        self._append_config = config
        self._segment_bytes = config.segment_bytes
        self._segment_ms = config.segment_ms
        self._flush_interval_messages = config.flush_interval_messages

    # --- append ---

    def append_as_leader(self, records, leader_epoch: int = 0, origin: AppendOrigin = AppendOrigin.CLIENT,
                         required_acks: int = -1) -> LogAppendInfo:
        """Validate ``records`` (whole v2 batches of one produce request for this
        partition), assign offsets in place (``records`` is modified when writable, else
        copied once) and append them. Returns the ``LogAppendInfo`` with the log's
        offsets, or for a retried batch of an idempotent producer the original batch's
        first and last offsets with nothing appended. ``required_acks`` is accepted for
        Kafka's signature: with one replica, acks=1 and acks=all are the same.

        Raises (nothing appended): CorruptRecordError, InvalidRecordError,
        RecordBatchTooLargeError (RecordListTooLargeError when larger than the segment size),
        InvalidTimestampError, UnsupportedForMessageFormatError,
        OutOfOrderSequenceError, InvalidProducerEpochError, InvalidTxnStateError,
        TransactionCoordinatorFencedError, KafkaStorageError."""
        buf = records
        if not isinstance(buf, bytearray):
            mv = memoryview(buf)
            buf = mv if not mv.readonly and mv.format == "B" else bytearray(mv)
        local = self._local
        now = self._time.milliseconds()
        vconfig = self._validator_config
        # One batch (every produce request since v3) takes the fused path; anything else,
        # and any batch failing a check, the general one (which raises the precise error).
        header = analyze_single_batch(buf, vconfig, now, origin) if self._fused_single_batch else None
        analyzed = None if header is not None else analyze_and_validate_records(
            buf, vconfig, now_ms=now, origin=origin)
        with self._lock:
            channel = local.failure_channel
            if channel.any_offline and channel.is_offline(local.parent_dir):
                raise channel.storage_error(local.parent_dir, f"append to {self.name}")
            if self._deleted or local.is_closed:
                self._check_open()  # raises
            try:
                if header is None:
                    assert analyzed is not None  # the general path validated the batches
                    return self._append_locked(buf, analyzed, leader_epoch, origin, now, vconfig)
                # The fused path, inline (every produce runs it): the general path's steps in
                # the same order, with the header values ``analyze_single_batch`` unpacked.
                if local.config is not self._append_config:
                    self._refresh_append_config(local.config)
                first_offset = local.log_end_offset
                log_append_time = vconfig.log_append_time
                info = assign_offsets_single(buf, header, first_offset, leader_epoch, now, log_append_time)
                size = info.valid_bytes
                segment_bytes = self._segment_bytes
                if size > segment_bytes:
                    self._record_list_too_large(size)  # raises
                if leader_epoch != self._checked_epoch or self.leader_epoch_cache is not self._checked_epoch_cache:
                    self._check_leader_epoch(leader_epoch, first_offset)
                last_offset, max_timestamp = info.last_offset, info.max_timestamp
                next_offset = last_offset + 1
                batch_max_timestamp = now if log_append_time else header[H_MAX_TIMESTAMP]
                psm = self.producer_state_manager
                no_producer = header[H_PRODUCER_ID] < 0
                # A batch with a producer id is mostly the next of its producer's sequence:
                # ``analyze_in_sequence`` decides that without raising or mutating anything
                # (nor reading what a roll changes), so it may run before the roll decision.
                entry = None if no_producer or origin is not _CLIENT else psm.analyze_in_sequence(info.batches[0][1])
                if no_producer or entry is not None:
                    # nothing left to check between the roll decision and the write
                    metadata = local.append_batch_unless_roll(buf, first_offset, last_offset, batch_max_timestamp,
                                                              max_timestamp, self._segment_ms, segment_bytes, now)
                    if metadata is None:
                        metadata = local.append_batch(self.roll(first_offset), buf, first_offset, last_offset,
                                                      batch_max_timestamp, max_timestamp)
                    if no_producer:
                        first_unstable = psm.on_append_without_producer(next_offset)
                    else:
                        assert entry is not None  # analyze_in_sequence found it in sequence
                        first_unstable = psm.apply_in_sequence(entry, info.batches[0][1], next_offset)
                else:  # dedup, sequence and transaction checks, after the roll decision
                    segment = local.segments.last_segment()  # the active segment
                    assert segment is not None, "a loaded log always has an active segment"
                    if segment.should_roll_for(self._segment_ms, segment_bytes, max_timestamp, last_offset, size,
                                               now):
                        segment = self.roll(first_offset)
                    batches = info.batches
                    analysis = psm.analyze_append(buf, batches, origin)
                    if analysis.duplicate is not None:
                        return _as_duplicate(info, analysis.duplicate, log_append_time)
                    metadata = local.append_batch(segment, buf, first_offset, last_offset,
                                                  batch_max_timestamp, max_timestamp)
                    for completed, lso in psm.apply_append(analysis, next_offset):
                        segment.update_txn_index(completed, lso)
                    first_unstable = psm.on_high_watermark_updated(next_offset)
                self._appended(metadata, next_offset, first_unstable)
                return info
            except OSError as exc:
                raise self._storage_error(f"error while appending records to {self.name}", exc) from exc

    def _record_list_too_large(self, size: int) -> None:
        raise RecordListTooLargeError(
            f"message batch size is {size} bytes in append to partition {self.name}, "
            f"which exceeds the maximum configured segment size of {self._segment_bytes}")

    def _check_leader_epoch(self, leader_epoch: int, first_offset: int) -> None:
        """Record ``leader_epoch`` from ``first_offset`` when newer than the cache's latest;
        appends skip this while the epoch and the cache are those last checked."""
        cache = self.leader_epoch_cache
        if cache is not None and leader_epoch >= 0:
            latest = cache.latest_epoch
            if latest is None or leader_epoch > latest:
                cache.assign(leader_epoch, first_offset)
        # the cache's latest epoch is now >= leader_epoch until a truncation
        self._checked_epoch, self._checked_epoch_cache = leader_epoch, cache

    def _append_locked(self, buf, analyzed: LogAppendInfo, leader_epoch: int, origin: AppendOrigin, now: int,
                       vconfig: ValidatorConfig) -> LogAppendInfo:
        """The general append after validation (``analyzed`` describes the batches), under
        the lock; the reference the fused single-batch path is tested against."""
        local = self._local
        if local.config is not self._append_config:
            self._refresh_append_config(local.config)
        first_offset = local.log_end_offset
        log_append_time = vconfig.log_append_time
        info = assign_offsets(buf, analyzed, first_offset=first_offset, partition_leader_epoch=leader_epoch,
                              now_ms=now, log_append_time=log_append_time)
        size = info.valid_bytes
        if size > self._segment_bytes:
            self._record_list_too_large(size)  # raises
        if leader_epoch != self._checked_epoch or self.leader_epoch_cache is not self._checked_epoch_cache:
            self._check_leader_epoch(leader_epoch, first_offset)
        last_offset, max_timestamp = info.last_offset, info.max_timestamp
        segment = local.segments.last_segment()  # the active segment
        assert segment is not None, "a loaded log always has an active segment"
        if segment.should_roll_for(self._segment_ms, self._segment_bytes, max_timestamp, last_offset, size, now):
            segment = self.roll(first_offset)
        batches = info.batches
        next_offset = last_offset + 1
        psm = self.producer_state_manager
        analysis = None
        if any(h.producer_id >= 0 for _, h in batches):
            # a producer id: dedup, sequence and transaction checks
            analysis = psm.analyze_append(buf, batches, origin)
            if analysis.duplicate is not None:
                return _as_duplicate(info, analysis.duplicate, log_append_time)
        local.append(last_offset, max_timestamp, info.offset_of_max_timestamp, buf, batches)
        metadata = local.log_end_offset_metadata
        if analysis is not None:
            for completed, lso in psm.apply_append(analysis, next_offset):
                segment.update_txn_index(completed, lso)
        else:  # no producer id: nothing for the producer state but its end offset
            psm.update_map_end_offset(next_offset)
        self._appended(metadata, next_offset, psm.on_high_watermark_updated(next_offset))
        return info

    def _appended(self, metadata: LogOffsetMetadata, next_offset: int, first_unstable: int | None) -> None:
        """After an append (under the lock): single node, the leader is the whole ISR, so
        the high watermark follows the log end offset; the first unstable offset as the
        producer state says; an fsync every ``flush.messages``. The first unstable offset
        moves before the high watermark (see ``_update_high_watermark_metadata``)."""
        if first_unstable is None:
            self._first_unstable_offset_metadata = None
        else:
            self._set_first_unstable_offset(first_unstable)
        self._high_watermark_metadata = metadata
        if next_offset - self._local.recovery_point >= self._flush_interval_messages:
            self._flush(next_offset, False)

    # --- roll and flush ---

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment; the producer state is snapshotted at its base offset
        and the old segment (and snapshot) are fsynced asynchronously by the scheduler,
        which then advances the recovery point."""
        with self._lock, self._io("error while rolling log segment"):
            self._check_open()
            new_segment = self._local.roll(expected_next_offset)
            psm = self.producer_state_manager
            psm.update_map_end_offset(new_segment.base_offset)
            snapshot = psm.take_snapshot(sync=False)
            if self.high_watermark > self.log_end_offset:
                self.update_high_watermark(self.log_end_offset)
            base = new_segment.base_offset

            def flush_rolled() -> None:
                if self._deleted or self._local.is_closed:
                    return
                with self._io("error while flushing a rolled segment"):
                    if snapshot is not None and snapshot.exists():
                        _fsync_file(snapshot)
                self._flush(base, False)

            self._local.scheduler.schedule_once("flush-log", flush_rolled)
            return new_segment

    def flush(self, force_flush_active_segment: bool = False) -> None:
        """fsync everything up to the log end offset and advance the recovery point."""
        self._flush(self.log_end_offset, force_flush_active_segment)

    def flush_up_to_offset_exclusive(self, offset: int) -> None:
        self._flush(offset, False)

    def _flush(self, offset: int, including_offset: bool) -> None:
        """fsync below ``offset`` (outside the lock, as Kafka: appends go on meanwhile), then
        advance the recovery point under the lock."""
        flush_offset = offset + 1 if including_offset else offset
        local = self._local
        if self._deleted or local.is_closed or flush_offset <= local.recovery_point:
            return
        channel = local.failure_channel
        if channel.is_offline(local.parent_dir):
            raise channel.storage_error(local.parent_dir, f"flush of {self.name}")
        try:
            local.flush(flush_offset)
        except OSError as exc:
            if self._deleted or local.is_closed:
                return  # raced with close or delete: nothing left to make durable
            raise self._storage_error(f"error while flushing log {self.name} up to offset {offset}",
                                      exc) from exc
        with self._lock:
            if not local.is_closed:
                local.mark_flushed(offset)

    def flush_if_due(self, now_ms: int | None = None) -> bool:
        """flush.ms: flush when the last flush is at least flush.ms old and something is
        unflushed (LogManager's flusher task). True when it flushed."""
        now_ms = self._time.milliseconds() if now_ms is None else now_ms
        if self.unflushed_messages > 0 and now_ms - self._local.last_flush_time >= self.config.flush_ms:
            self.flush()
            return True
        return False

    # --- reads (lock-free) ---

    def read(self, start_offset: int, max_length: int, isolation: str = LOG_END,
             min_one_message: bool = True) -> FetchDataInfo:
        """Batches from the one holding ``start_offset``, at most ``max_length`` bytes (but
        the first batch whole when ``min_one_message``), below the isolation bound:
        ``log_end`` (LEO), ``high_watermark`` or ``txn_committed`` (last stable offset,
        with the overlapping aborted transactions attached). LogOffsetOutOfRangeError below
        the log start offset or past the log end offset."""
        local = self._local
        channel = local.failure_channel
        if channel.any_offline and channel.is_offline(local.parent_dir):
            raise channel.storage_error(local.parent_dir, f"read from {self.name}")
        if self._deleted or local.is_closed:
            self._check_open()  # raises
        if start_offset < self._log_start_offset:
            self._check_log_start_offset(start_offset)  # raises
        first = local.segments.first_segment_base_offset()
        if first is not None and start_offset < first:
            self._check_local_log_start_offset(start_offset)  # raises
        if isolation == LOG_END:
            bound = local.log_end_offset_metadata
        elif isolation == HIGH_WATERMARK:
            bound = self._fetch_high_watermark_metadata()
        elif isolation == TXN_COMMITTED:
            bound = self._fetch_last_stable_offset_metadata()
        else:
            raise ValueError(f"unknown isolation {isolation!r}")
        try:
            return local.read(start_offset, max_length, min_one_message, bound, isolation == TXN_COMMITTED)
        except OSError as exc:
            # A segment deleted (and closed) under this lock-free read: retention or
            # truncation moved the boundaries past the offset. Not a disk failure.
            self._check_log_start_offset(start_offset)
            self._check_local_log_start_offset(start_offset)
            if start_offset > self.log_end_offset:
                raise LogOffsetOutOfRangeError(
                    f"offset {start_offset} of {self.name} was truncated away during the read") from exc
            raise self._storage_error(f"error while reading from {self.name}", exc) from exc

    def _check_log_start_offset(self, offset: int) -> None:
        if offset < self._log_start_offset:
            raise LogOffsetOutOfRangeError(
                f"received request for offset {offset} for partition {self.name}, but the "
                f"log start offset is {self._log_start_offset}")

    def _check_local_log_start_offset(self, offset: int) -> None:
        local_start = self.local_log_start_offset
        if offset < local_start:
            raise OffsetMovedToTieredStorageError(
                f"offset {offset} of partition {self.name} is in remote storage (log start offset "
                f"{self._log_start_offset}, local log start offset {local_start})")

    def _fetch_high_watermark_metadata(self) -> LogOffsetMetadata:
        metadata = self._high_watermark_metadata
        if metadata.message_offset_only:
            with self._lock:
                metadata = self._convert_to_offset_metadata(self.high_watermark)
                self._update_high_watermark_metadata(metadata)
        return metadata

    def _fetch_last_stable_offset_metadata(self) -> LogOffsetMetadata:
        hw = self._fetch_high_watermark_metadata()
        fu = self._first_unstable_offset_metadata
        if fu is not None and fu.message_offset < hw.message_offset:
            return fu
        return hw

    def _convert_to_offset_metadata(self, offset: int) -> LogOffsetMetadata:
        local = self._local
        return local.read(offset, 1, False, local.log_end_offset_metadata, False).fetch_offset_metadata

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list:
        return self._local.collect_aborted_transactions(start_offset, upper_bound_offset)

    def fetch_offset_by_timestamp(self, target_timestamp: int) -> OffsetAndTimestamp | None:
        """ListOffsets: -2 earliest (the log start offset), -4 earliest local (the local
        log start offset), -1 latest (the log end offset), -3 the record with the largest
        timestamp (remote and local segments), -5 latest tiered (the highest offset in remote storage,
        -1 when none), else the first record with a timestamp >= the target (None when
        there is none): in the remote segments first (``remote_reader``), then locally."""
        return list_offsets.fetch_offset_by_timestamp(self, target_timestamp)

    def _epoch_for_offset(self, offset: int) -> int | None:
        return self.leader_epoch_cache.epoch_for_offset(offset) if self.leader_epoch_cache is not None else None

    # --- boundaries ---

    def update_high_watermark(self, hw: int) -> int:
        """Set the high watermark to ``hw`` clamped to [log start, LEO]; returns it."""
        with self._lock:
            hw = min(max(hw, self._log_start_offset), self.log_end_offset)
            if hw == self.log_end_offset:
                self._update_high_watermark_metadata(self._local.log_end_offset_metadata)
            else:
                self._update_high_watermark_metadata(LogOffsetMetadata(hw))
            return hw

    def maybe_increment_high_watermark(self, new_hw: LogOffsetMetadata) -> LogOffsetMetadata | None:
        """Move the high watermark forward (never back, never past the LEO); returns the
        old value when it moved."""
        if new_hw.message_offset > self.log_end_offset:
            raise ValueError(f"high watermark {new_hw} would exceed the log end offset {self.log_end_offset}")
        with self._lock:
            old = self._high_watermark_metadata
            if (old.message_offset < new_hw.message_offset
                    or (old.message_offset == new_hw.message_offset and old.message_offset_only
                        and not new_hw.message_offset_only)):
                self._update_high_watermark_metadata(new_hw)
                return old
            return None

    def _update_high_watermark_metadata(self, metadata: LogOffsetMetadata) -> None:
        if metadata.message_offset < 0:
            raise ValueError("high watermark offset should be non-negative")
        # The first unstable offset first: a lock-free read of the last stable offset
        # (``_fetch_last_stable_offset_metadata``) takes the high watermark, then the first
        # unstable offset, so it never sees a new high watermark over a transaction that
        # the first unstable offset does not cover yet (a read_committed fetch returned
        # the records of an open transaction in that window).
        self._set_first_unstable_offset(
            self.producer_state_manager.on_high_watermark_updated(metadata.message_offset))
        self._high_watermark_metadata = metadata

    def _maybe_increment_first_unstable_offset(self) -> None:
        self._set_first_unstable_offset(self.producer_state_manager.first_unstable_offset())

    def _set_first_unstable_offset(self, fu: int | None) -> None:
        if fu is None:
            self._first_unstable_offset_metadata = None
            return
        fu = max(fu, self._log_start_offset)
        current = self._first_unstable_offset_metadata
        if current is None or current.message_offset != fu:
            self._first_unstable_offset_metadata = self._convert_to_offset_metadata(fu)

    def maybe_increment_log_start_offset(self, new_log_start_offset: int,
                                         reason: str = "client delete records") -> bool:
        """Advance the log start offset (DeleteRecords, retention); it may not pass the high
        watermark (LogOffsetOutOfRangeError). Segments wholly below it are deleted by the
        next ``delete_old_segments``. True when it moved."""
        with self._lock, self._io(f"exception while increasing log start offset to {new_log_start_offset}"):
            self._check_open()
            if new_log_start_offset > self.high_watermark:
                raise LogOffsetOutOfRangeError(
                    f"cannot increment the log start offset to {new_log_start_offset} of partition "
                    f"{self.name} since it is larger than the high watermark {self.high_watermark}")
            if new_log_start_offset <= self._log_start_offset:
                return False
            log.info("%s: incremented log start offset to %d due to %s", self.name, new_log_start_offset, reason)
            self._log_start_offset = new_log_start_offset
            if self._local.recovery_point < new_log_start_offset:
                self._local.update_recovery_point(new_log_start_offset)
            if self.leader_epoch_cache is not None:
                self._checked_epoch = None
                self.leader_epoch_cache.truncate_from_start(new_log_start_offset)
            self.producer_state_manager.on_log_start_offset_incremented(new_log_start_offset)
            self._maybe_increment_first_unstable_offset()
            return True

    # --- retention (retention.py) ---

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention (``retention.delete_old_segments``): segments below the log start
        offset, past retention.ms / retention.bytes, or for a remote-storage log copied and
        past local.retention.ms / local.retention.bytes. Returns how many were deleted."""
        return retention.delete_old_segments(self, now_ms)

    # --- compaction ---

    def last_records_of_active_producers(self) -> dict[int, int]:
        """Kafka's ``lastRecordsOfActiveProducers``: producer id -> offset of its last data
        batch, for the cleaner (which keeps that batch, emptied if need be). Under the lock:
        appends mutate the producer map."""
        with self._lock:
            return {pid: e.last_data_offset
                    for pid, e in self.producer_state_manager.active_producers().items()}

    def active_producers(self) -> list:
        """Copies of the producer state entries (DescribeProducers), taken under the lock."""
        with self._lock:
            return list(self.producer_state_manager.active_producers().values())

    def replace_segments(self, new_segments: list[LogSegment], old_segments: list[LogSegment],
                         crash_hook=None) -> bool:
        """The log cleaner's swap (``LocalLog.replace_segments``), under the lock. False
        (nothing done) when the log is closed or deleted, or when any of ``old_segments``
        is no longer in the log (retention or truncation removed it meanwhile)."""
        with self._lock:
            if self._deleted or self._local.is_closed:
                return False
            segments = self._local.segments
            if any(segments.get(s.base_offset) is not s for s in old_segments):
                return False
            if any(s is segments.active_segment for s in old_segments):
                raise ValueError(f"{self.name}: the active segment cannot be replaced")
            self._local.replace_segments(new_segments, old_segments, crash_hook)
            return True

    # --- truncation (truncation.py) ---

    def truncate_to(self, target_offset: int) -> bool:
        """Remove every offset >= ``target_offset`` (a no-op at or past the LEO). True when
        something was removed."""
        return truncation.truncate_to(self, target_offset)

    def truncate_fully_and_start_at(self, new_offset: int, log_start_offset: int | None = None) -> None:
        """Delete everything and start an empty log at ``new_offset``."""
        truncation.truncate_fully_and_start_at(self, new_offset, log_start_offset)

    def _rebuild_producer_state(self, last_offset: int) -> None:
        rebuild_producer_state(self.producer_state_manager, self._local.segments, self._log_start_offset,
                               last_offset, now_ms=self._time.milliseconds())

    # --- producer state ---

    def take_producer_snapshot(self) -> Path | None:
        with self._lock, self._io("error while taking a producer snapshot"):
            self._check_open()
            return self.producer_state_manager.take_snapshot()

    def remove_expired_producers(self, now_ms: int | None = None) -> list[int]:
        with self._lock:
            return self.producer_state_manager.remove_expired_producers(now_ms)

    def min_snapshots_offset_to_retain(self) -> int:
        """The oldest producer snapshot to keep (``retention.min_snapshots_offset_to_retain``)."""
        return retention.min_snapshots_offset_to_retain(self)

    def delete_snapshots_after_recovery_point_checkpoint(self) -> int:
        offset = self.min_snapshots_offset_to_retain()
        with self._lock:
            self.producer_state_manager.delete_snapshots_before(offset)
        return offset

    # --- lifecycle ---

    def close(self) -> None:
        """Take a producer snapshot at the log end offset and close every segment
        (fsync, final time-index entries, indexes trimmed)."""
        with self._lock:
            if self._deleted or self._local.is_closed:
                return
            with self._io(f"error while closing log {self.name}"):
                self.producer_state_manager.take_snapshot()
            self._local.close()

    def close_handlers(self) -> None:
        """Release descriptors and mappings without writing anything (offline dir, crash
        simulation in tests)."""
        with self._lock:
            self._local.close_handlers()

    def rename_dir(self, name: str) -> Path:
        with self._lock:
            new_dir = self._local.rename_dir(name)
            if self.leader_epoch_cache is not None:
                self._checked_epoch = None
                self.leader_epoch_cache = self.leader_epoch_cache.with_checkpoint(
                    new_dir / files.LEADER_EPOCH_CHECKPOINT_FILE)
            self.producer_state_manager.log_dir = new_dir
            return new_dir

    def mark_deleted(self) -> None:
        """Refuse every further operation (the directory is being deleted)."""
        with self._lock:
            self._deleted = True

    def delete(self) -> None:
        """Delete every file of the log and its directory."""
        with self._lock:
            self._deleted = True
            with self._io(f"error while deleting log {self.name}"):
                if not self._local.is_closed:
                    self._local.delete_all_segments()
                else:
                    self._local.close_handlers()
                directory = self._local.dir
                if directory.is_dir():
                    for path in directory.iterdir():
                        if path.is_file():
                            path.unlink(missing_ok=True)
                    directory.rmdir()

    def _storage_error(self, message: str, exc: OSError) -> KafkaStorageError:
        self._local.failure_channel.maybe_add_offline_log_dir(self.parent_dir, f"{message}: {exc}", exc)
        return KafkaStorageError(f"{message}: {exc}")

    def __repr__(self) -> str:
        return (f"UnifiedLog({self.name}, log_start_offset={self._log_start_offset}, "
                f"log_end_offset={self.log_end_offset}, high_watermark={self.high_watermark}, "
                f"recovery_point={self.recovery_point})")


# --- helpers ---

def _remote_log_enabled(system_enable: bool, config, name: str) -> bool:
    return system_enable and config.remote_storage_enable and not name.startswith("__")


def _open_epoch_cache(directory: Path) -> LeaderEpochFileCache:
    path = directory / files.LEADER_EPOCH_CHECKPOINT_FILE
    try:
        return LeaderEpochFileCache(path)
    except ValueError as exc:
        log.warning("unreadable %s (%s); starting with an empty leader epoch cache", path, exc)
        path.unlink(missing_ok=True)
        return LeaderEpochFileCache(path)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _as_duplicate(info: LogAppendInfo, duplicate, log_append_time: bool) -> LogAppendInfo:
    """The answer to a retried batch already in the log: the offsets (and LogAppendTime)
    it was first written with, nothing appended."""
    return info._replace(first_offset=duplicate.first_offset, last_offset=duplicate.last_offset,
                         log_append_time=duplicate.timestamp if log_append_time else NO_TIMESTAMP)
