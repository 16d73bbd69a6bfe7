"""Which compacted log to clean next, and the threads that clean (Kafka's
``LogCleanerManager`` and ``LogCleaner``).

Owns:
- ``LogToClean``: a log's clean section [log start, first dirty offset) and cleanable
  section [first dirty offset, first uncleanable offset), their byte sizes and the dirty
  ratio cleanable / (clean + cleanable).
- ``LogCleanerManager``: the per-directory ``cleaner-offset-checkpoint`` (``checkpoint.py``),
  the logs being cleaned, aborted or paused, and ``grab_filthiest_compacted_log``: among
  the ``cleanup.policy`` compact logs not in progress nor paused, those with cleanable bytes
  and a dirty ratio above min.cleanable.dirty.ratio, or whose oldest dirty batch is older
  than max.compaction.lag.ms, the one with the highest ratio. The first dirty offset is the
  checkpoint clamped to [log start, log end] (reset to the log start when it lies outside).
  The first uncleanable offset is the smallest of: the active segment's base offset (the
  active segment is never cleaned), the first unstable offset (an open transaction), the
  high watermark, and the base offset of the first dirty segment whose largest timestamp is
  newer than now - min.compaction.lag.ms.
- ``LogCleaner``: ``log.cleaner.threads`` daemon threads ("kafka-log-cleaner-thread-N"),
  each with its own ``Cleaner`` and ``SkimpyOffsetMap`` of log.cleaner.dedupe.buffer.size /
  threads bytes; a thread cleans the filthiest log, logs what it did (Kafka's cleaning
  summary: dirty section, bytes read and written, time, ratio, size reduction), updates the
  checkpoint, and sleeps log.cleaner.backoff.ms when nothing is cleanable. ``metrics()``
  gives Kafka's cleaner gauges (max-buffer-utilization-percent, cleaner-recopy-percent,
  max-clean-time-secs, max-compaction-delay-secs, DeadThreadCount, and the manager's
  max-dirty-percent, time-since-last-run-ms, uncleanable-partitions-count). A cleaning that
  fails with an unexpected error (not an I/O error: a segment deleted by retention under it)
  is logged, the log is left as it was (``cleaner.py``) and marked uncleanable (Kafka's
  ``markPartitionUncleanable``: skipped until the broker restarts or ``resume_cleaning``),
  so a bad log does not fail every pass. ``do_one_cleaning`` runs one pass on the caller's
  thread (tests).

The threads share one ``Throttler`` (log.cleaner.io.max.bytes.per.second, ``throttler.py``).
``shutdown`` aborts the cleanings in progress (at their next segment) and joins the threads.

Thread-safety: ``LogCleanerManager`` state is guarded by one lock; ``abort_cleaning``
waits (condition) until the log's cleaning stopped. ``logs`` is a callable returning a
snapshot of the broker's logs ({(topic, partition): UnifiedLog}).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...record.limits import INT64_MAX
from ..clock import SYSTEM_TIME, Time
from ..errors import KafkaStorageError
from .checkpoint import CleanerCheckpoints
from .cleaner import Cleaner, CleanerAbortedError, CleanerStats
from .config import CleanerConfig
from .offset_map import SkimpyOffsetMap
from .throttler import Throttler

if TYPE_CHECKING:  # pragma: no cover
    from ..unified_log import UnifiedLog

__all__ = ["CleanerConfig", "LogToClean", "LogCleanerManager", "LogCleaner"]

log = logging.getLogger(__name__)


@dataclass
class LogToClean:
    topic_partition: tuple[str, int]
    log: UnifiedLog
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool = False

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def cleanable_offsets(ulog, checkpoint: int | None, now_ms: int) -> tuple[int, int, bool]:
    """Kafka's ``LogCleanerManager.cleanableOffsets``: (first dirty offset, first
    uncleanable offset, must be cleaned now because of max.compaction.lag.ms)."""
    log_start = ulog.log_start_offset
    if checkpoint is None or checkpoint < log_start or checkpoint > ulog.log_end_offset:
        first_dirty = log_start
    else:
        first_dirty = checkpoint
    config = ulog.config
    active = ulog.active_segment
    bounds = [active.base_offset, ulog.high_watermark]
    unstable = ulog.first_unstable_offset
    if unstable is not None:
        bounds.append(unstable)
    dirty = [s for s in ulog.segments if s is not active and s.read_next_offset() > first_dirty]
    min_lag = config.values["min.compaction.lag.ms"]
    if min_lag > 0:
        for s in dirty:
            if s.largest_timestamp() > now_ms - min_lag:
                bounds.append(s.base_offset)
                break
    first_uncleanable = max(min(bounds), first_dirty)
    max_lag = config.values["max.compaction.lag.ms"]
    needs_now = False
    if max_lag < INT64_MAX and dirty and dirty[0].base_offset < first_uncleanable:
        first_ts = dirty[0].get_first_batch_timestamp()
        needs_now = first_ts >= 0 and now_ms - first_ts > max_lag
    return first_dirty, first_uncleanable, needs_now


def _compaction_delay_ms(ulog, first_dirty_offset: int, now_ms: int) -> int:
    """Kafka's ``LogCleanerManager.maxCompactionDelay``: how far past max.compaction.lag.ms
    the oldest dirty inactive segment's first batch is (0 when it is not)."""
    active = ulog.active_segment
    firsts = [ts for s in ulog.segments if s is not active and s.read_next_offset() > first_dirty_offset
              for ts in (s.get_first_batch_timestamp(),) if ts > 0]
    if not firsts:
        return 0
    clean_until = now_ms - max(ulog.config.values["max.compaction.lag.ms"], 0)
    earliest = min(firsts)
    return clean_until - earliest if earliest < clean_until else 0


class LogCleanerManager:
    """See the module docstring. Thread-safety: every method may be called from any thread."""

    def __init__(self, logs: Callable[[], dict], time: Time = SYSTEM_TIME,
                 checkpoints: CleanerCheckpoints | None = None) -> None:
        self.logs = logs
        self.time = time
        self.checkpoints = checkpoints or CleanerCheckpoints()
        self._lock = threading.Condition()
        self._in_progress: set[tuple[str, int]] = set()
        self._aborted: set[tuple[str, int]] = set()
        self._paused: dict[tuple[str, int], int] = {}
        self._uncleanable: set[tuple[str, int]] = set()
        # gauges (Kafka's LogCleanerManager metrics, see ``metrics``)
        self.dirtiest_log_cleanable_ratio = 0.0
        self.time_of_last_run_ms = time.milliseconds()
        self.max_compaction_delay_ms = 0  # of the last grab (Kafka's PreCleanStats)

    def metrics(self) -> dict[str, int]:
        """Kafka's ``LogCleanerManager`` gauges: max-dirty-percent (the dirty ratio of the
        dirtiest cleanable log at the last look), time-since-last-run-ms (since the last
        look for a log to clean), uncleanable-partitions-count."""
        with self._lock:
            return {"max-dirty-percent": int(100 * self.dirtiest_log_cleanable_ratio),
                    "time-since-last-run-ms": max(self.time.milliseconds() - self.time_of_last_run_ms, 0),
                    "uncleanable-partitions-count": len(self._uncleanable)}

    def log_to_clean(self, tp, ulog, now_ms: int | None = None) -> LogToClean:
        now_ms = self.time.milliseconds() if now_ms is None else now_ms
        checkpoint = self.checkpoints.read(ulog.parent_dir).get(tp)
        first_dirty, first_uncleanable, now = cleanable_offsets(ulog, checkpoint, now_ms)
        clean = cleanable = 0
        segments = ulog.segments
        for s, nxt in zip(segments, segments[1:]):  # every segment but the active one
            if nxt.base_offset <= first_dirty:
                clean += s.size
            elif s.base_offset < first_uncleanable:  # holds dirty offsets (maybe from its middle)
                cleanable += s.size
        return LogToClean(tp, ulog, first_dirty, first_uncleanable, clean, cleanable, now)

    def grab_filthiest_compacted_log(self, now_ms: int | None = None) -> LogToClean | None:
        """The dirtiest cleanable compacted log, marked in progress; None when none is."""
        with self._lock:
            now = self.time.milliseconds() if now_ms is None else now_ms
            self.time_of_last_run_ms = self.time.milliseconds()
            max_delay = 0
            candidates = []
            for tp, ulog in self.logs().items():
                if (not ulog.config.compact or tp in self._in_progress or tp in self._paused
                        or tp in self._uncleanable
                        or ulog.is_offline or getattr(ulog, "_deleted", False)):
                    continue
                try:
                    ltc = self.log_to_clean(tp, ulog, now_ms)
                except Exception as exc:  # a log closing under us: skip it this time
                    log.debug("skipping %s: %s", tp, exc)
                    continue
                max_delay = max(max_delay, _compaction_delay_ms(ulog, ltc.first_dirty_offset, now))
                if ltc.cleanable_bytes > 0 and ltc.first_uncleanable_offset > ltc.first_dirty_offset and (
                        ltc.needs_compaction_now
                        or ltc.cleanable_ratio > ulog.config.values["min.cleanable.dirty.ratio"]):
                    candidates.append(ltc)
            self.max_compaction_delay_ms = max_delay
            self.dirtiest_log_cleanable_ratio = max((c.cleanable_ratio for c in candidates), default=0.0)
            if not candidates:
                return None
            best = max(candidates, key=lambda c: (c.needs_compaction_now, c.cleanable_ratio))
            self._in_progress.add(best.topic_partition)
            return best

    def check_done(self, tp) -> None:
        with self._lock:
            if tp in self._aborted:
                raise CleanerAbortedError(f"cleaning of {tp[0]}-{tp[1]} aborted")

    def done_cleaning(self, tp, log_dir: Path | str, end_offset: int | None) -> None:
        """The cleaning of ``tp`` ended; ``end_offset`` (None: failed or aborted) becomes
        its first dirty offset in the checkpoint."""
        try:
            if end_offset is not None:
                self.checkpoints.update(log_dir, tp, end_offset)
        finally:
            with self._lock:
                self._in_progress.discard(tp)
                self._aborted.discard(tp)
                self._lock.notify_all()

    def abort_and_pause_cleaning(self, tp) -> None:
        """Stop any cleaning of ``tp`` (waiting until it stopped) and keep it from starting
        until ``resume_cleaning`` (truncation, deletion)."""
        with self._lock:
            self._paused[tp] = self._paused.get(tp, 0) + 1
            if tp in self._in_progress:
                self._aborted.add(tp)
                while tp in self._in_progress:
                    self._lock.wait()

    def mark_uncleanable(self, tp) -> None:
        with self._lock:
            self._uncleanable.add(tp)

    def uncleanable_partitions(self) -> set[tuple[str, int]]:
        with self._lock:
            return set(self._uncleanable)

    def resume_cleaning(self, tp) -> None:
        with self._lock:
            self._uncleanable.discard(tp)
            n = self._paused.get(tp, 0) - 1
            if n > 0:
                self._paused[tp] = n
            else:
                self._paused.pop(tp, None)

    def remove_log(self, tp, log_dir: Path | str) -> None:
        """``tp`` is deleted: abort its cleaning and drop its checkpoint entry."""
        self.abort_and_pause_cleaning(tp)
        try:
            self.checkpoints.update(log_dir, tp, None)
        finally:
            self.resume_cleaning(tp)

    def in_progress(self) -> set[tuple[str, int]]:
        with self._lock:
            return set(self._in_progress)


def _mb(n: int) -> float:
    return n / (1024 * 1024)


class LogCleaner:
    """The cleaner threads (see the module docstring). ``startup`` starts them,
    ``shutdown`` stops and joins them; ``do_one_cleaning`` cleans at most one log now."""

    def __init__(self, config: CleanerConfig, logs: Callable[[], dict], time: Time = SYSTEM_TIME,
                 crash_hook: Callable[[str], None] | None = None) -> None:
        if config.num_threads < 1:
            raise ValueError("log.cleaner.threads must be at least 1")
        self.config = config
        self.time = time
        self.manager = LogCleanerManager(logs, time)
        memory = config.dedupe_buffer_size // config.num_threads
        self.throttler = Throttler(config.max_io_bytes_per_second, time)
        self._cleaners = [Cleaner(SkimpyOffsetMap(memory, config.dedupe_buffer_load_factor), time=time,
                                  check_done=self._check_done, crash_hook=crash_hook,
                                  throttler=self.throttler)
                          for _ in range(config.num_threads)]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.cleanings = 0  # completed cleanings (observability, tests)
        # per cleaner thread: the stats of its last cleaning and the compaction delay seen
        # by the look that chose it (Kafka's CleanerThread.lastStats / lastPreCleanStats)
        self._last_stats = [CleanerStats() for _ in self._cleaners]
        self._last_compaction_delay_ms = [0 for _ in self._cleaners]

    def metrics(self) -> dict[str, int]:
        """Kafka's log cleaner gauges, by their names: max-buffer-utilization-percent,
        cleaner-recopy-percent (bytes written / bytes read by the threads' last cleanings),
        max-clean-time-secs, max-compaction-delay-secs, DeadThreadCount, and the manager's
        (``LogCleanerManager.metrics``). Integers, as Kafka's gauges."""
        stats = list(self._last_stats)
        read = sum(s.bytes_read for s in stats)
        written = sum(s.bytes_written for s in stats)
        out = {"max-buffer-utilization-percent": int(max(100 * s.buffer_utilization for s in stats)),
               "cleaner-recopy-percent": int(100 * written / max(read, 1)),
               "max-clean-time-secs": int(max(s.elapsed_secs for s in stats)),
               "max-compaction-delay-secs": int(max(self._last_compaction_delay_ms) / 1000),
               "DeadThreadCount": sum(1 for t in self._threads if not t.is_alive())}
        out.update(self.manager.metrics())
        return out

    def _check_done(self, tp) -> None:
        if self._stop.is_set():
            raise CleanerAbortedError("the log cleaner is shutting down")
        self.manager.check_done(tp)

    def startup(self) -> None:
        if self._threads:
            return
        for i, cleaner in enumerate(self._cleaners):
            t = threading.Thread(target=self._run, args=(i, cleaner), name=f"kafka-log-cleaner-thread-{i}",
                                 daemon=True)
            self._threads.append(t)
            t.start()

    def shutdown(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()
        self._threads = []

    def _run(self, thread_id: int, cleaner: Cleaner) -> None:
        while not self._stop.is_set():
            try:
                cleaned = self._clean_filthiest_log(thread_id, cleaner)
            except Exception:  # never let the thread die
                log.exception("log cleaner thread %d: unexpected error", thread_id)
                cleaned = False
            if not cleaned:
                self._stop.wait(self.config.backoff_ms / 1000.0)

    def do_one_cleaning(self, now_ms: int | None = None) -> bool:
        """Clean the filthiest log now on this thread; False when none was cleanable."""
        return self._clean_filthiest_log(0, self._cleaners[0], now_ms)

    def _clean_filthiest_log(self, thread_id: int, cleaner: Cleaner, now_ms: int | None = None) -> bool:
        ltc = self.manager.grab_filthiest_compacted_log(now_ms)
        if ltc is None:
            return False
        self._last_compaction_delay_ms[thread_id] = self.manager.max_compaction_delay_ms
        ulog = ltc.log
        end_offset = None
        try:
            end_offset, stats = cleaner.clean(ulog, ltc.first_dirty_offset, ltc.first_uncleanable_offset)
            self.cleanings += 1
            self._last_stats[thread_id] = stats
            self._record_stats(thread_id, ulog.name, ltc, end_offset, stats)
        except CleanerAbortedError as exc:
            log.info("log cleaner thread %d: cleaning of %s aborted: %s", thread_id, ulog.name, exc)
        except (OSError, KafkaStorageError) as exc:
            # a segment deleted under the cleaning (retention), or the directory went offline:
            # not the log's fault, tried again by a later pass
            log.warning("log cleaner thread %d: cleaning of %s stopped by an I/O error: %s",
                        thread_id, ulog.name, exc)
        except Exception:
            log.exception("log cleaner thread %d: cleaning of %s failed; the log is left as it was "
                          "and marked uncleanable", thread_id, ulog.name)
            self.manager.mark_uncleanable(ltc.topic_partition)
        finally:
            self.manager.done_cleaning(ltc.topic_partition, ulog.parent_dir, end_offset)
        return True

    @staticmethod
    def _record_stats(thread_id: int, name: str, ltc: LogToClean, end_offset: int, stats: CleanerStats) -> None:
        """Kafka's ``LogCleaner.recordStats`` summary, on one INFO line."""
        secs = stats.elapsed_secs
        index_secs = max(stats.map_complete_ms - stats.start_ms, 0) / 1000.0
        copy_secs = max(secs - index_secs, 0.0)
        mb_read = _mb(stats.bytes_read)
        reduction = 100.0 * (1 - stats.bytes_written / stats.bytes_read) if stats.bytes_read else 0.0
        fewer = (100.0 * (1 - stats.messages_written / stats.messages_read)
                 if stats.messages_read else 0.0)
        log.info("Log cleaner thread %d cleaned log %s (dirty section = [%d, %d], dirty ratio %.2f): "
                 "%.1f MB of log processed in %.1f seconds (%.1f MB/sec); indexed %.1f MB (%d messages) "
                 "in %.1f seconds (%.1f MB/sec, %.1f%% of total time); buffer utilization %.1f%%; "
                 "cleaned %.1f MB in %.1f seconds (%.1f MB/sec, %.1f%% of total time); "
                 "start size %.1f MB (%d messages); end size %.1f MB (%d messages); "
                 "%.1f%% size reduction (%.1f%% fewer messages)",
                 thread_id, name, ltc.first_dirty_offset, end_offset, ltc.cleanable_ratio,
                 mb_read, secs, mb_read / secs if secs else 0.0,
                 _mb(stats.map_bytes_read), stats.map_messages_read, index_secs,
                 _mb(stats.map_bytes_read) / index_secs if index_secs else 0.0,
                 100 * index_secs / secs if secs else 0.0, 100 * stats.buffer_utilization,
                 mb_read, copy_secs, mb_read / copy_secs if copy_secs else 0.0,
                 100 * copy_secs / secs if secs else 0.0,
                 mb_read, stats.messages_read, _mb(stats.bytes_written), stats.messages_written,
                 reduction, fewer)
        if stats.invalid_messages:
            log.warning("Log cleaner thread %d: found %d invalid messages (without a key) while "
                        "cleaning log %s", thread_id, stats.invalid_messages, name)
