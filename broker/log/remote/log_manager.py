"""The remote log manager (Kafka's ``RemoteLogManager``, KIP-405) of a single broker.

Owns, for every log with remote storage enabled (``UnifiedLog.remote_log_enabled``):

- the metadata store: the partition's remote segments (``RemoteLogSegmentMetadata``),
  cached in memory per partition, rebuilt at startup by listing the manifests
  (``<base>.remote-segment.json``, written last by each copy, removed first by each
  deletion; ``metadata.py`` / ``storage_manager.py``). This replaces Kafka's
  ``__remote_log_metadata`` topic: the manifests are durable in the remote store itself,
  next to the data they describe, so the store and the data can never disagree;
- one pass (``run_once``, every remote.log.manager.task.interval.ms on a scheduler thread
  of its own in the broker; tests call it directly), per log, in order:
  1. initialisation, once per log: sweep garbage (objects no manifest names: a crashed
     copy or delete; manifests of another topic id: an older incarnation of a topic
     deleted and re-created with the same name, whose deletion was cut short, never
     served), list the manifests of the log's topic id, set the log's ``highest_offset_in_remote_storage``
     and raise its log start offset to the first remote segment (or, with none, the first
     local segment) when the checkpoint was behind (a crash after a remote deletion); after
     a pass that failed (a remote write error), the next pass sweeps garbage again;
  2. copy: every closed (non-active) local segment whose end offset is beyond the highest
     remote offset and below min(last stable offset, high watermark), oldest first, with
     its offset, time and transaction indexes, the producer snapshot at its end and its
     leader-epoch entries (``LogSegmentData``); then the manifest. Skipped while the
     topic has remote.log.copy.disable=true (KIP-950: the remote segments stay readable
     and under retention);
  3. local retention: ``UnifiedLog.delete_old_segments`` (``retention.py``), which deletes
     copied local segments past local.retention.ms / local.retention.bytes without moving
     the log start offset (with copies disabled: retention.ms / retention.bytes);
  4. remote retention: remote segments wholly below the log start offset (DeleteRecords),
     and, for delete-policy topics, oldest first, those past retention.ms (their max
     timestamp) or retention.bytes (of the whole log: remote segments plus the local ones
     not yet copied). The log start offset moves past them first, then their metadata
     leaves the cache, then their objects are deleted (manifest first);
- serving: ``read`` (Fetch of an offset below the local log start offset, for any
  client), ``find_offset_by_timestamp`` and ``find_max_timestamp`` (ListOffsets by
  timestamp and -3; attached to each log as its ``remote_reader``), through
  ``reader.RemoteSegmentReader``;
- topic deletion: ``on_partition_deleted`` deletes the partition's remote segments;
- quotas (KIP-956, ``copy_quota`` / ``fetch_quota``, built by the broker:
  ``broker.server.quota.remote_log_quota``): before each segment's copy, a copy quota
  exceeded stops the partition's copying and the pass waits for the quota (outside the
  partition locks) before copying on, else the segment's size is recorded; a remote read
  while the fetch quota is exceeded returns no records (no error), else its bytes are
  recorded;
- metrics: ``stats`` (``stats.RemoteStorageStats``: copy, fetch and delete counters per
  topic, bumped here) and ``partition_gauges`` (remote size, segment count and copy lag
  per partition, computed when the broker's /metrics is scraped);
- remote storage turned off (remote.storage.enable true -> false with
  remote.log.delete.on.disable=true, KIP-950): ``on_remote_storage_disabled`` moves the
  log start offset to the local log start offset and forgets the partition's remote
  segments at once (nothing is served from them any more), then deletes them in the
  background, as Kafka does (a one-off task on the manager's scheduler; inline without
  one), so AlterConfigs does not wait for the deletion of a large tier. A pending
  deletion is retried by every pass until it succeeds, and finished before the partition
  is initialised again (remote storage turned back on). A crash before the deletion ends
  leaves remote objects of a log that is no longer remote: ``startup`` deletes the remote
  segments of every log whose topic says remote.storage.enable=false and
  remote.log.delete.on.disable=true (on a broker with the system enabled), so the
  deletion completes at the next start.

Crash safety: a crash during a copy leaves objects without a manifest (swept at the next
start; the segment is copied again, same names and bytes); during a deletion, a segment
without its manifest (its objects swept) whose offsets are below the log start offset or
past retention anyway. The log start offset is checkpointed by the log manager; a stale
checkpoint is corrected at initialisation (step 1). No crash loses a copied segment
before its local copy is deleted: local deletion needs the manifest.

Thread-safety: passes run on one thread (the manager's scheduler); one re-entrant lock per
partition serialises initialisation, copy, retention and deletion of that partition's
remote segments; the per-partition segment lists are copy-on-write tuples, read lock-free
by Fetch and ListOffsets (a segment deleted under a read makes it fail with
``RemoteStorageError``, answered as an error). ``_lock`` guards the lock table and the
set of pending deletions (remote storage turned off).
"""

from __future__ import annotations

import bisect
import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ...record.entries import iter_entry_headers
from .. import files
from ..clock import SYSTEM_TIME, Time
from ..errors import KafkaStorageError, LogOffsetOutOfRangeError
from ..list_offsets import OffsetAndTimestamp
from ..scheduler import KafkaScheduler
from .config import RemoteLogManagerConfig
from .errors import RemoteStorageError
from .metadata import LEADER_EPOCH_SUFFIX, RemoteLogSegmentMetadata, object_name
from .reader import RemoteSegmentReader
from .stats import RemoteStorageStats
from .storage_manager import FileSystemRemoteStorageManager, LogSegmentData, RemoteStorageManager

__all__ = ["RemoteLogManager", "RemoteFetchResult"]

log = logging.getLogger(__name__)


class RemoteFetchResult:
    """A remote read: the batches' bytes and the aborted transactions overlapping them."""

    __slots__ = ("records", "aborted_transactions")

    def __init__(self, records: bytes, aborted_transactions: list | None) -> None:
        self.records = records
        self.aborted_transactions = aborted_transactions


class RemoteLogManager:
    """Copies, retention and reads of remote segments (module docstring)."""

    def __init__(self, rsm: RemoteStorageManager, logs: Callable[[], list], *,
                 task_interval_ms: int = 30000, time: Time = SYSTEM_TIME,
                 copy_quota=None, fetch_quota=None) -> None:
        self.rsm = rsm
        # KIP-956 (module docstring): objects with throttle_time_ms() and record(bytes)
        self.copy_quota, self.fetch_quota = copy_quota, fetch_quota
        self._copy_throttled = False  # a pass stopped copying for the copy quota
        self._closing = False
        self.reader = RemoteSegmentReader(rsm)
        self._logs = logs
        self.task_interval_ms = task_interval_ms
        self.time = time
        self._lock = threading.Lock()
        self._partition_locks: dict[tuple[str, int], threading.RLock] = {}
        self._segments: dict[tuple[str, int], tuple[RemoteLogSegmentMetadata, ...]] = {}
        self._task = None
        self._own_scheduler: KafkaScheduler | None = None
        self._needs_sweep: set[tuple[str, int]] = set()  # partitions whose last pass failed
        self._pending_deletes: set[tuple[str, int]] = set()  # remote storage off, deletion to do
        self._scheduler = None  # where the deletions of on_remote_storage_disabled run (startup)
        self.stats = RemoteStorageStats()  # Kafka's remote storage metrics (stats.py)

    @classmethod
    def from_server_config(cls, config: Mapping[str, Any], logs: Callable[[], list], time: Time = SYSTEM_TIME,
                           copy_quota: Any = None, fetch_quota: Any = None) -> RemoteLogManager:
        """From the broker's config (``RemoteLogManagerConfig``): the keys under
        remote.log.storage.manager.impl.prefix go to the storage manager, without the
        prefix; the quotas are built by the caller."""
        settings = RemoteLogManagerConfig.from_config(config)
        rsm = FileSystemRemoteStorageManager.from_config(settings.storage_manager_options(config))
        return cls(rsm, logs, task_interval_ms=settings.task_interval_ms,
                   time=time, copy_quota=copy_quota, fetch_quota=fetch_quota)

    # --- lifecycle ---

    def startup(self, scheduler=None, *, dedicated_thread: bool = False) -> None:
        """Initialise every remote-storage log now, then run ``run_once`` every
        task_interval_ms on ``scheduler``, or with ``dedicated_thread`` on a scheduler
        thread of its own (the broker's choice: a long copy to an object store must not
        delay the flush, checkpoint and group tasks of the shared scheduler)."""
        for lg in self._logs():
            if lg.is_offline:
                continue
            try:
                if lg.remote_log_enabled:
                    self._ensure_initialized(lg)
                elif _deleted_on_disable(lg):
                    self._delete_remote_segments(*lg.topic_partition)  # a deletion cut short
            except (RemoteStorageError, KafkaStorageError, OSError) as exc:
                log.error("remote storage of %s not initialised: %s", lg.name, exc)
        if dedicated_thread:
            scheduler = self._own_scheduler = KafkaScheduler(self.time, thread_name="remote-log-manager")
            scheduler.startup()
        self._scheduler = scheduler
        if scheduler is not None:
            self._task = scheduler.schedule("remote-log-manager", self.run_once, self.task_interval_ms,
                                            self.task_interval_ms)

    def close(self) -> None:
        self._closing = True  # a pass waiting for the copy quota gives up
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self._own_scheduler is not None:
            self._own_scheduler.shutdown()  # waits for a pass under way
            self._own_scheduler = None
        self.rsm.close()

    def _partition_lock(self, tp: tuple[str, int]) -> threading.RLock:
        with self._lock:
            lock = self._partition_locks.get(tp)
            if lock is None:
                lock = self._partition_locks[tp] = threading.RLock()
            return lock

    def remote_segments(self, topic: str, partition: int) -> tuple[RemoteLogSegmentMetadata, ...]:
        """The partition's remote segments known to this manager, by base offset."""
        return self._segments.get((topic, partition), ())

    # --- the periodic pass ---

    def run_once(self, now_ms: int | None = None) -> dict[str, int]:
        """One pass over every remote-storage log (module docstring); returns counts.
        When the copy quota stopped a copy, the pass waits for it (outside every
        partition lock, giving up on ``close``) and copies on, as Kafka's copy task does."""
        stats = {"copied": 0, "deleted_local": 0, "deleted_remote": 0}
        for tp in self.pending_deletions():  # remote storage turned off: a retry
            self._finish_disable(tp)

        def copy(lg) -> None:
            if not lg.config.remote_log_copy_disable:
                stats["copied"] += self.copy_segments(lg)

        def copy_and_delete(lg) -> None:
            copy(lg)
            stats["deleted_local"] += lg.delete_old_segments(now_ms)
            stats["deleted_remote"] += self.apply_remote_retention(lg, now_ms)

        self._copy_throttled = False
        self._each_log("pass over", copy_and_delete)
        while self._copy_throttled and not self._closing:
            while (wait := self.copy_quota.throttle_time_ms()) > 0 and not self._closing:
                self.time.sleep(min(wait, 1000))
            self._copy_throttled = False
            self._each_log("copy of", copy)
        return stats

    def _each_log(self, what: str, step) -> None:
        """``step(log)`` for every online remote-storage log, under its partition lock and
        after ``_ensure_initialized``; a failure is logged and marks the partition for a
        sweep (a copy cut short may have left objects), and the pass goes on."""
        for lg in self._logs():
            if not lg.remote_log_enabled or lg.is_offline:
                continue
            try:
                with self._partition_lock(lg.topic_partition):
                    self._ensure_initialized(lg)
                    step(lg)
            except (RemoteStorageError, KafkaStorageError, OSError) as exc:
                log.error("remote log manager %s %s failed: %s", what, lg.name, exc)
                self._needs_sweep.add(lg.topic_partition)

    def _ensure_initialized(self, lg) -> None:
        tp = lg.topic_partition
        with self._partition_lock(tp):
            if tp in self._pending_deletes and not self._finish_disable(tp):
                raise RemoteStorageError(f"the remote segments of {lg.name} (remote storage turned off before) "
                                         f"are not deleted yet")
            if lg.remote_reader is self and tp in self._segments:
                if tp in self._needs_sweep:
                    self._needs_sweep.discard(tp)
                    swept = self.rsm.sweep_garbage(tp[0], tp[1], topic_id=_topic_id(lg))
                    log.info("%s: swept %d remote objects after a failed pass: %s", lg.name, len(swept), swept)
                return
            topic_id = _topic_id(lg)
            swept = self.rsm.sweep_garbage(tp[0], tp[1], topic_id=topic_id)
            if swept:
                log.info("%s: swept %d remote objects no manifest of topic id %s names: %s", lg.name,
                         len(swept), topic_id, swept)
            segments = tuple(self.rsm.list_segments(tp[0], tp[1], topic_id=topic_id))
            self._segments[tp] = segments
            lg.highest_offset_in_remote_storage = segments[-1].end_offset if segments else -1
            earliest = segments[0].base_offset if segments else lg.local_log_start_offset
            if earliest > lg.log_start_offset:
                lg.maybe_increment_log_start_offset(min(earliest, lg.high_watermark), "remote log start offset")
            lg.remote_reader = self
            log.info("%s: %d remote segments, highest remote offset %d, log start offset %d",
                     lg.name, len(segments), lg.highest_offset_in_remote_storage, lg.log_start_offset)

    def copy_segments(self, lg) -> int:
        """Copy every eligible closed segment (module docstring, step 2); returns how many."""
        tp = lg.topic_partition
        copied = 0
        with self._partition_lock(tp):
            bound = min(lg.last_stable_offset, lg.high_watermark)
            segments = lg.segments
            for seg, nxt in zip(segments, segments[1:]):
                end = nxt.base_offset - 1
                if end <= lg.highest_offset_in_remote_storage:
                    continue
                if end >= bound:
                    break
                quota = self.copy_quota
                if quota is not None:
                    if quota.throttle_time_ms() > 0:  # KIP-956: run_once waits, then copies on
                        self._copy_throttled = True
                        break
                    quota.record(seg.size)
                meta, data = self._segment_data(lg, seg, nxt.base_offset)
                try:
                    self.rsm.copy_log_segment_data(meta, data)
                except BaseException:
                    self.stats.record(tp[0], copy_errors=1)
                    raise
                self.stats.record(tp[0], copy_requests=1, copy_bytes=meta.segment_size_in_bytes)
                self._segments[tp] = self._segments.get(tp, ()) + (meta,)
                lg.highest_offset_in_remote_storage = meta.end_offset
                copied += 1
                log.info("%s: copied segment %d-%d (%d bytes) to remote storage", lg.name,
                         meta.base_offset, meta.end_offset, meta.segment_size_in_bytes)
        return copied

    def _segment_data(self, lg, seg, next_offset: int) -> tuple[RemoteLogSegmentMetadata, LogSegmentData]:
        directory = lg.dir
        base = seg.base_offset
        end = next_offset - 1
        txn_file = files.txn_index_file(directory, base)
        txn = txn_file if txn_file.exists() and txn_file.stat().st_size > 0 else None
        snapshot = lg.producer_state_manager.fetch_snapshot(next_offset)
        snapshot = snapshot if snapshot is not None and snapshot.exists() else None
        epochs: dict[int, int] = {}
        cache = lg.leader_epoch_cache
        for epoch, start in (cache.epoch_entries() if cache is not None else ()):
            if start <= end:
                if start <= base:
                    epochs.clear()
                epochs[epoch] = max(start, base)
        epoch_text = "\n".join(["0", str(len(epochs))] + [f"{e} {o}" for e, o in epochs.items()]) + "\n"
        data = LogSegmentData(files.log_file(directory, base), files.offset_index_file(directory, base),
                              files.time_index_file(directory, base), txn, snapshot, epoch_text.encode())
        objects = [object_name(base, files.LOG_FILE_SUFFIX), data.offset_index.name, data.time_index.name]
        objects += [p.name for p in (txn, snapshot) if p is not None]
        objects.append(object_name(base, LEADER_EPOCH_SUFFIX))
        topic, partition = lg.topic_partition
        topic_id = _topic_id(lg)
        meta = RemoteLogSegmentMetadata(
            topic=topic, partition=partition, segment_id=uuid.uuid4().hex, base_offset=base, end_offset=end,
            max_timestamp_ms=seg.max_timestamp_so_far(), segment_size_in_bytes=seg.size,
            segment_leader_epochs=epochs, objects=tuple(objects), topic_id=topic_id,
            event_timestamp_ms=self.time.milliseconds())
        return meta, data

    def apply_remote_retention(self, lg, now_ms: int | None = None) -> int:
        """Delete remote segments below the log start offset or past retention (module
        docstring, step 4); returns how many."""
        tp = lg.topic_partition
        now_ms = self.time.milliseconds() if now_ms is None else now_ms
        with self._partition_lock(tp):
            segments = self._segments.get(tp, ())
            if not segments:
                return 0
            config = lg.config
            retention_ms = config.retention_ms if config.delete else -1
            retention_bytes = config.retention_bytes if config.delete else -1
            highest = lg.highest_offset_in_remote_storage
            breach = -1
            if retention_bytes >= 0:
                total = sum(m.segment_size_in_bytes for m in segments) + sum(
                    s.size for s in lg.segments if s.base_offset > highest)
                breach = total - retention_bytes
            doomed = []
            for meta in segments:
                if meta.end_offset < lg.log_start_offset:
                    doomed.append(meta)
                elif retention_ms >= 0 and now_ms - meta.max_timestamp_ms > retention_ms:
                    doomed.append(meta)
                elif breach > 0 and breach - meta.segment_size_in_bytes >= 0:
                    doomed.append(meta)
                else:
                    break
                breach -= meta.segment_size_in_bytes
            if not doomed:
                return 0
            new_start = doomed[-1].end_offset + 1
            if new_start > lg.log_start_offset:
                lg.maybe_increment_log_start_offset(min(new_start, lg.high_watermark), "remote retention")
            self._segments[tp] = segments[len(doomed):]
            for meta in doomed:
                try:
                    self.rsm.delete_log_segment_data(meta)
                except BaseException:
                    self.stats.record(tp[0], delete_errors=1)
                    raise
                self.stats.record(tp[0], delete_requests=1)
                log.info("%s: deleted remote segment %d-%d", lg.name, meta.base_offset, meta.end_offset)
            return len(doomed)

    def on_partition_deleted(self, topic: str, partition: int) -> None:
        """Topic deletion: the partition's remote segments go (manifests first)."""
        try:
            self._delete_remote_segments(topic, partition)
        except (RemoteStorageError, OSError) as exc:
            log.error("deleting the remote segments of %s-%d failed: %s", topic, partition, exc)

    def on_remote_storage_disabled(self, lg) -> None:
        """remote.storage.enable turned off (module docstring): the log start offset moves
        to the local log start offset and the remote segments are forgotten now; their
        deletion runs in the background (inline when the manager has no scheduler)."""
        tp = lg.topic_partition
        with self._partition_lock(tp):
            start = min(lg.local_log_start_offset, lg.high_watermark)
            lg.maybe_increment_log_start_offset(start, "remote storage disabled")
            lg.remote_reader = None
            lg.highest_offset_in_remote_storage = -1
            self._segments.pop(tp, None)
            with self._lock:
                self._pending_deletes.add(tp)
        log.info("%s: remote storage disabled, log start offset %d; deleting the remote segments",
                 lg.name, lg.log_start_offset)
        scheduler = self._scheduler
        if scheduler is None:
            self._finish_disable(tp)
        else:
            scheduler.schedule_once(f"remote-log-delete-{tp[0]}-{tp[1]}", lambda: self._finish_disable(tp))

    def pending_deletions(self) -> list[tuple[str, int]]:
        """Partitions whose remote storage was turned off and whose deletion is not done."""
        with self._lock:
            return sorted(self._pending_deletes)

    def _finish_disable(self, tp: tuple[str, int]) -> bool:
        """The deletion ``on_remote_storage_disabled`` left pending; True once done (or
        nothing pending). A failure is logged and left pending for the next pass."""
        with self._partition_lock(tp):
            if tp not in self._pending_deletes:
                return True
            try:
                self._delete_remote_segments(*tp)
            except (RemoteStorageError, OSError) as exc:
                log.error("deleting the remote segments of %s-%d (remote storage disabled) failed: %s",
                          tp[0], tp[1], exc)
                return False
        log.info("%s-%d: the remote segments are deleted (remote storage disabled)", *tp)
        return True

    def _delete_remote_segments(self, topic: str, partition: int) -> None:
        tp = (topic, partition)
        with self._partition_lock(tp):
            self._segments.pop(tp, None)
            self._needs_sweep.discard(tp)
            self.rsm.delete_partition(topic, partition)
            with self._lock:
                self._pending_deletes.discard(tp)

    # --- serving ---

    def _segment_for(self, lg, offset: int) -> RemoteLogSegmentMetadata:
        segments = self._segments.get(lg.topic_partition, ())
        i = bisect.bisect_right(segments, offset, key=_base_offset) - 1
        if i < 0 or segments[i].end_offset < offset or offset < lg.log_start_offset:
            raise LogOffsetOutOfRangeError(
                f"offset {offset} of {lg.name} is in no remote segment (log start offset "
                f"{lg.log_start_offset}, local log start offset {lg.local_log_start_offset})")
        return segments[i]

    def read(self, lg, offset: int, max_bytes: int, min_one_message: bool = True,
             read_committed: bool = False) -> RemoteFetchResult:
        """Fetch of ``offset`` from the remote segment holding it: whole batches, at most
        ``max_bytes`` (the first whole when ``min_one_message``); for read_committed the
        aborted transactions overlapping them (remote txn indexes from that segment on,
        then the local ones)."""
        meta = self._segment_for(lg, offset)
        topic = lg.topic_partition[0]
        quota = self.fetch_quota
        if quota is not None and quota.throttle_time_ms() > 0:
            # KIP-956: no records for this partition, no error (the consumer fetches again)
            return RemoteFetchResult(b"", [] if read_committed else None)
        try:
            records = self.reader.read(meta, offset, max_bytes, min_one_message)
            aborted: list[tuple[int, int]] | None = None
            if read_committed:
                overlapping = []
                upper = _next_offset_of(records, offset)
                for m in self._segments.get(lg.topic_partition, ()):
                    if m.base_offset >= meta.base_offset:
                        overlapping += self.reader.aborted_transactions(m, offset, upper)
                overlapping += [t for t in lg.collect_aborted_transactions(lg.local_log_start_offset, upper)
                                if t.first_offset < upper and t.last_offset >= offset]
                aborted = sorted({(t.producer_id, t.first_offset) for t in overlapping}, key=lambda t: t[1])
        except BaseException:
            self.stats.record(topic, fetch_errors=1)
            raise
        self.stats.record(topic, fetch_requests=1, fetch_bytes=len(records))
        if quota is not None:
            quota.record(len(records))
        return RemoteFetchResult(records, aborted)

    def partition_gauges(self) -> list[tuple[str, int, int, int, int, int]]:
        """KIP-963's per-partition gauges, computed now, for every remote-storage log:
        (topic, partition, remote log size in bytes, remote segment count, copy lag in
        bytes, copy lag in segments). The copy lag is the closed local segments below the
        last stable offset not yet in remote storage (what the next pass would copy)."""
        out = []
        for lg in self._logs():
            try:
                if not lg.remote_log_enabled or lg.is_offline:
                    continue
                topic, partition = lg.topic_partition
                remote = self._segments.get((topic, partition), ())
                highest, bound = lg.highest_offset_in_remote_storage, min(lg.last_stable_offset, lg.high_watermark)
                lag_bytes = lag_segments = 0
                if not lg.config.remote_log_copy_disable:
                    segments = lg.segments
                    for seg, nxt in zip(segments, segments[1:]):
                        end = nxt.base_offset - 1
                        if end >= bound:
                            break
                        if end > highest:
                            lag_bytes += seg.size
                            lag_segments += 1
                out.append((topic, partition, sum(m.segment_size_in_bytes for m in remote), len(remote),
                            lag_bytes, lag_segments))
            except Exception:  # noqa: BLE001 - a log deleted or gone offline meanwhile
                continue
        return out

    def find_offset_by_timestamp(self, lg, timestamp: int) -> OffsetAndTimestamp | None:
        """ListOffsets by timestamp over the remote segments (None: not in them)."""
        start = lg.log_start_offset
        for meta in self._segments.get(lg.topic_partition, ()):
            if meta.end_offset < start or meta.max_timestamp_ms < timestamp:
                continue
            found = self._find_in(meta, timestamp, start)
            if found is not None:
                return found
        return None

    def find_max_timestamp(self, lg) -> OffsetAndTimestamp | None:
        """ListOffsets MAX_TIMESTAMP (-3) over the remote segments: the first record with
        the largest timestamp. The segment is the first (by offset) whose manifest's
        max_timestamp_ms is the largest of the segments at or above the log start offset;
        then its time index and a scan. None when there is no remote segment (or that
        record lies below the log start offset)."""
        start = lg.log_start_offset
        best = None
        for meta in self._segments.get(lg.topic_partition, ()):
            if meta.end_offset >= start and (best is None or meta.max_timestamp_ms > best.max_timestamp_ms):
                best = meta
        if best is None or best.max_timestamp_ms < 0:
            return None
        return self._find_in(best, best.max_timestamp_ms, start)

    def _find_in(self, meta: RemoteLogSegmentMetadata, timestamp: int, start: int) -> OffsetAndTimestamp | None:
        found = self.reader.find_offset_by_timestamp(meta, timestamp, start)
        if found is None:
            return None
        epoch = found.leader_epoch if found.leader_epoch is not None else meta.epoch_for_offset(found.offset)
        return OffsetAndTimestamp(found.offset, found.timestamp, epoch)


def _topic_id(lg) -> str | None:
    """The log's topic id as manifests carry it (Kafka's base64 text; None: unknown)."""
    return files.encode_topic_id(lg.topic_id) if lg.topic_id is not None else None


def _deleted_on_disable(lg) -> bool:
    """A log whose topic turned remote storage off with remote.log.delete.on.disable=true
    (a remote log manager exists only on a broker with tiered storage): its remote prefix
    must be empty."""
    config = lg.config
    return not config.remote_storage_enable and config.remote_log_delete_on_disable


def _base_offset(meta: RemoteLogSegmentMetadata) -> int:
    return meta.base_offset


def _next_offset_of(records: bytes, default: int) -> int:
    """The offset after the last batch of ``records`` (``default`` when empty)."""
    last = default - 1
    for _, header in iter_entry_headers(records, 0, len(records)):
        last = header.last_offset
    return last + 1
