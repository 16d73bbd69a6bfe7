"""Every partition log of the broker, across its log directories (Kafka's ``LogManager``).

Owns: loading the log directories at startup, creating and deleting partition logs,
topic config changes, the per-directory checkpoint files, the background tasks (retention,
flush.ms, checkpoints, producer expiration, delayed deletion), offline log directories,
and the clean shutdown.

On-disk format, per log directory (each a ``log.dirs`` entry; file formats in ``files.py``)::

    <log.dir>/
      meta.properties                      version=1, node.id, cluster.id, directory.id
      recovery-point-offset-checkpoint     topic partition recoveryPoint   (every log)
      log-start-offset-checkpoint          topic partition logStartOffset  (logs whose start
                                           offset is past their first segment, and every
                                           remote-storage log: its start may be below it)
      replication-offset-checkpoint        topic partition highWatermark
      cleaner-offset-checkpoint            topic partition firstDirtyOffset (compacted logs;
                                           written by the log cleaner, ``cleaner/``)
      .kafka_cleanshutdown                 {"version":0,"brokerEpoch":-1}; exists only
                                           between a clean shutdown and the next start
      <topic>-<partition>/                 a partition log (``unified_log.py``)
      <topic>-<partition>.<uuid>-delete/   a deleted log waiting for file.delete.delay.ms

Startup (``startup``): for each directory, create it if needed and write
``meta.properties`` if absent (a different cluster.id in an existing one is refused); note
and DELETE the clean-shutdown marker before loading anything (KAFKA-10471: a crash while
loading is then unclean); read the recovery-point and log-start-offset checkpoints; load
every ``<topic>-<partition>`` directory (recovering from the recovery point when the
marker was absent); schedule ``-delete`` directories for deletion; ignore ``-future`` and
``-stray`` ones. A directory that fails to load (``OSError``) goes offline; the others
start. On a single node the leader is its own in-sync replica, so each log's high
watermark starts at its log end offset (the HW checkpoint is written for Kafka's tools).

The log cleaner (``cleaner/manager.py``, log.cleaner.* keys) is built when
log.cleaner.enable is true (the default of ``from_server_config``; a LogManager built
directly has it off unless given a ``cleaner_config``), its threads started by ``startup``;
``delete_log`` aborts a cleaning of the log and drops its cleaner checkpoint entry.

Tiered storage (``remote/``): ``remote.log.storage.system.enable`` is passed to every log
(``UnifiedLog.remote_log_enabled``); the broker attaches its ``RemoteLogManager`` as
``remote_log_manager``, which ``delete_log`` tells of the deletion (the partition's
remote segments are deleted before it returns), as ``update_topic_config`` tells it of a
topic whose remote storage is turned off (KIP-950). Local retention of remote-storage logs is
part of the retention task (``retention.py``).

Shutdown (``shutdown``): stop the cleaner threads and the periodic tasks; for every online directory flush and
close each log (close takes a producer snapshot at the log end offset), write the three
checkpoints, then write the clean-shutdown marker. A directory that failed gets no marker,
so its logs are recovered at the next start.

Invariants: a partition has at most one log across all directories; no file is written to
an offline directory; a checkpoint is written atomically (``files.atomic_write``) and only
holds logs of its own directory; a partition directory name is always a valid Kafka
topic name (``[a-zA-Z0-9._-]``, at most 249 characters, not ``.`` or ``..``) plus
``-<partition>``, so names can never escape the log directory.

Thread-safety: ``_lock`` guards the map of logs and serialises create/delete; it is never
held while a log's own lock is taken for I/O, except briefly by ``delete_log`` (rename).
``_checkpoint_lock`` serialises the writes of the checkpoint files (the scheduler's
periodic checkpoints and the one a topic deletion writes from a request thread share the
``<file>.tmp`` name: two writers at once made one ``os.replace`` fail and took the
directory offline).
Periodic tasks run on the scheduler's thread (``KafkaScheduler``) or, in tests, when the
test calls ``run_pending`` on a ``Scheduler`` driven by a ``MockTime``; they work on a
copy of the map. Each log protects itself (``unified_log.py``).
"""

from __future__ import annotations

import logging
import re
import shutil
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import BrokerConfig, load_properties
from ..record.limits import INT64_MAX
from . import files
from .cleaner.manager import CleanerConfig, LogCleaner
from .clock import SYSTEM_TIME, Time
from .config import LogConfig
from .errors import CorruptRecordError, InvalidRecordError, KafkaStorageError, LogError
from .local_log import LogDirFailureChannel
from .manager_config import LogManagerConfig
from .producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from .remote.config import RemoteLogManagerConfig
from .scheduler import KafkaScheduler, ScheduledTask, Scheduler
from .unified_log import UnifiedLog

if TYPE_CHECKING:
    from .remote.log_manager import RemoteLogManager

__all__ = ["LogManager", "InconsistentClusterIdError", "validate_topic_name"]

log = logging.getLogger(__name__)

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"
META_PROPERTIES_VERSION = 1
MAX_TOPIC_NAME_LENGTH = 249
_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]+$")
_CLEAN_SHUTDOWN_BODY = b'{"version":0,"brokerEpoch":-1}'


class InconsistentClusterIdError(LogError):
    """A log directory's meta.properties names another cluster (or node)."""


def validate_topic_name(topic: str) -> None:
    """Kafka's ``Topic.validate``; raises ValueError."""
    if not topic or topic in (".", ".."):
        raise ValueError(f"topic name {topic!r} is illegal")
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise ValueError(f"topic name {topic[:20]!r}... is longer than {MAX_TOPIC_NAME_LENGTH} characters")
    if not _TOPIC_RE.match(topic):
        raise ValueError(f"topic name {topic!r} contains characters other than ASCII alphanumerics, '.', '_' and '-'")


def _new_uuid_text() -> str:
    return files.encode_topic_id(uuid.uuid4())


def _checkpointed_start(lg: UnifiedLog) -> int | None:
    """The log-start-offset checkpoint entry of a log: written when it is above the first
    segment, and always for a remote-storage log (Kafka's rule: its start may be below it)."""
    first = lg.segments[0].base_offset if lg.segments else lg.log_start_offset
    return lg.log_start_offset if lg.remote_log_enabled or lg.log_start_offset > first else None


class LogManager:
    """The broker's partition logs (layout, startup and shutdown in the module docstring).

    Thread-safety: every public method may be called from any thread; ``_lock`` guards the
    map of logs; background tasks run on the scheduler's thread."""

    def __init__(self, log_dirs: Iterable[Path | str], default_config: LogConfig | None = None, *,
                 time: Time = SYSTEM_TIME, scheduler: Scheduler | None = None, node_id: int = 1,
                 cluster_id: str | None = None,
                 topic_configs: Mapping[str, LogConfig] | Callable[[str], LogConfig | None] | None = None,
                 retention_check_interval_ms: int = 300_000, flush_check_ms: int = INT64_MAX,
                 flush_recovery_offset_checkpoint_ms: int = 60_000,
                 flush_start_offset_checkpoint_ms: int = 60_000,
                 high_watermark_checkpoint_ms: int = 5_000,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 producer_id_expiration_check_interval_ms: int = 600_000,
                 initial_task_delay_ms: int = 30_000,
                 failure_channel: LogDirFailureChannel | None = None,
                 cleaner_config: CleanerConfig | None = None,
                 remote_storage_system_enable: bool = False) -> None:
        self.log_dirs = [Path(d).absolute() for d in log_dirs]
        if not self.log_dirs:
            raise ValueError("at least one log directory is needed")
        if len(set(self.log_dirs)) != len(self.log_dirs):
            raise ValueError(f"duplicate log directories in {self.log_dirs}")
        self.default_config = default_config or LogConfig.from_props()
        self.time = time
        self._owns_scheduler = scheduler is None
        self.scheduler = scheduler if scheduler is not None else KafkaScheduler(time)
        self.node_id = node_id
        self.cluster_id = cluster_id
        self._topic_config_source = topic_configs
        self._topic_configs: dict[str, LogConfig] = {}
        self.retention_check_interval_ms = retention_check_interval_ms
        self.flush_check_ms = flush_check_ms
        self.flush_recovery_offset_checkpoint_ms = flush_recovery_offset_checkpoint_ms
        self.flush_start_offset_checkpoint_ms = flush_start_offset_checkpoint_ms
        self.high_watermark_checkpoint_ms = high_watermark_checkpoint_ms
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producer_id_expiration_check_interval_ms = producer_id_expiration_check_interval_ms
        self.initial_task_delay_ms = initial_task_delay_ms
        self.failure_channel = failure_channel or LogDirFailureChannel()
        # Tiered storage: remote.log.storage.system.enable, and the RemoteLogManager the
        # broker attaches (remote/log_manager.py; None without tiered storage): told of
        # every deleted partition, so that its remote segments go too.
        self.remote_storage_system_enable = remote_storage_system_enable
        self.remote_log_manager: RemoteLogManager | None = None
        self.failure_channel.add_listener(self._on_log_dir_failure)
        self._lock = threading.RLock()
        self._checkpoint_lock = threading.Lock()  # one writer of the checkpoint files at a time
        self._logs: dict[tuple[str, int], UnifiedLog] = {}
        self._had_clean_shutdown: dict[Path, bool] = {}
        self._directory_ids: dict[Path, str] = {}
        self._tasks: list[ScheduledTask] = []
        self._removed_logs: list[UnifiedLog] = []  # renamed -delete, waiting for deletion
        self._started = False
        self._shut_down = False
        # the log cleaner (compaction of cleanup.policy=compact logs), started by startup()
        self.cleaner_config = cleaner_config or CleanerConfig(enable_cleaner=False)
        self.cleaner: LogCleaner | None = (
            LogCleaner(self.cleaner_config, self.logs_by_topic_partition, time)
            if self.cleaner_config.enable_cleaner and self.cleaner_config.num_threads > 0 else None)

    @classmethod
    def from_server_config(cls, server: Mapping, **kwargs) -> LogManager:
        """From ``broker.server.config.server_config(props)`` (or raw properties): log.dirs, node.id, cluster.id, the
        task intervals and the topic defaults (log.segment.bytes, log.retention.hours...)."""
        from .config import topic_defaults_from_server
        default = LogConfig.from_props(defaults=topic_defaults_from_server(server))
        cleaner_config = kwargs.pop("cleaner_config", None) or CleanerConfig.from_config(server)
        core, tasks = BrokerConfig.from_config(server), LogManagerConfig.from_config(server)
        return cls(list(core.log_dirs), default, node_id=core.node_id, cluster_id=core.cluster_id,
                   retention_check_interval_ms=tasks.retention_check_interval_ms,
                   flush_check_ms=tasks.flush_check_ms,
                   flush_recovery_offset_checkpoint_ms=tasks.flush_recovery_offset_checkpoint_ms,
                   flush_start_offset_checkpoint_ms=tasks.flush_start_offset_checkpoint_ms,
                   producer_id_expiration_ms=tasks.producer_id_expiration_ms,
                   cleaner_config=cleaner_config,
                   remote_storage_system_enable=RemoteLogManagerConfig.from_config(server).enabled,
                   **kwargs)

    # --- configs ---

    def config_for(self, topic: str) -> LogConfig:
        config = self._topic_configs.get(topic)
        if config is not None:
            return config
        source = self._topic_config_source
        if callable(source):
            config = source(topic)
        elif source is not None:
            config = source.get(topic)
        return config or self.default_config

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        """A topic's config changed: every partition log of the topic takes it now. A log
        whose remote storage this turns off (remote.storage.enable true -> false, KIP-950)
        has its log start offset moved and its remote segments forgotten by the remote log
        manager before this returns; their deletion runs in the background."""
        with self._lock:
            self._topic_configs[topic] = config
            logs = [lg for (t, _), lg in self._logs.items() if t == topic]
        for lg in logs:
            was_remote = lg.remote_log_enabled
            lg.update_config(config)
            if was_remote and not lg.remote_log_enabled and self.remote_log_manager is not None:
                self.remote_log_manager.on_remote_storage_disabled(lg)

    def update_default_config(self, config: LogConfig) -> None:
        """Broker defaults changed: logs without a topic-level config take them."""
        with self._lock:
            self.default_config = config
            logs = [(t, lg) for (t, _), lg in self._logs.items()]
        for topic, lg in logs:
            lg.update_config(self.config_for(topic))

    # --- directories ---

    @property
    def live_log_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if not self.failure_channel.is_offline(d)]

    @property
    def offline_log_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if self.failure_channel.is_offline(d)]

    def directory_id(self, log_dir: Path | str) -> str | None:
        return self._directory_ids.get(Path(log_dir).absolute())

    def had_clean_shutdown(self, log_dir: Path | str) -> bool:
        return self._had_clean_shutdown.get(Path(log_dir).absolute(), False)

    def _mark_offline(self, log_dir: Path, message: str, exc: BaseException | None) -> None:
        self.failure_channel.maybe_add_offline_log_dir(log_dir, message, exc)

    def _on_log_dir_failure(self, log_dir: str) -> None:
        """Called once per failed directory: release its logs' files on the scheduler
        thread (their operations already raise KafkaStorageError)."""
        self.scheduler.schedule_once("handle-log-dir-failure", lambda: self._close_logs_in(Path(log_dir)))

    def _close_logs_in(self, log_dir: Path) -> None:
        for lg in self._logs_in_dir(log_dir).values():
            try:
                lg.close_handlers()
            except Exception as exc:
                log.warning("releasing %s after the failure of %s: %s", lg.name, log_dir, exc)

    def _ensure_meta_properties(self, log_dir: Path) -> None:
        path = log_dir / files.META_PROPERTIES_FILE
        if path.exists():
            props = load_properties(path)
            stored_cluster = props.get("cluster.id")
            if self.cluster_id is None:
                self.cluster_id = stored_cluster
            elif stored_cluster is not None and stored_cluster != self.cluster_id:
                raise InconsistentClusterIdError(
                    f"{path}: cluster.id {stored_cluster} does not match the configured {self.cluster_id}")
            stored_node = props.get("node.id")
            if stored_node is not None and int(stored_node) != self.node_id:
                raise InconsistentClusterIdError(
                    f"{path}: node.id {stored_node} does not match the configured node.id {self.node_id}")
            self._directory_ids[log_dir] = props.get("directory.id") or _new_uuid_text()
            return
        if self.cluster_id is None:
            self.cluster_id = _new_uuid_text()
        directory_id = _new_uuid_text()
        files.write_properties(path, {"cluster.id": self.cluster_id, "directory.id": directory_id,
                                      "node.id": str(self.node_id), "version": str(META_PROPERTIES_VERSION)})
        self._directory_ids[log_dir] = directory_id

    # --- startup ---

    def startup(self) -> None:
        """Load every log directory, then start the background tasks."""
        if self._started:
            return
        self._started = True
        for log_dir in self.log_dirs:
            try:
                self._load_log_dir(log_dir)
            except (InconsistentClusterIdError, CorruptRecordError, InvalidRecordError):
                # (the log's record errors are ValueErrors too, as broker.record's subclasses:
                # bad log bytes still fail the startup, not just their directory)
                raise
            except (OSError, KafkaStorageError, ValueError) as exc:
                log.error("failed to load log dir %s: %s", log_dir, exc)
                self._mark_offline(log_dir, f"error while loading log dir {log_dir}: {exc}",
                                   exc if isinstance(exc, OSError) else None)
        if not self.live_log_dirs:
            raise KafkaStorageError(f"no log directory could be loaded: {self.log_dirs}")
        self._schedule_tasks()
        self.scheduler.startup()
        if self.cleaner is not None:
            self.cleaner.startup()

    def _load_log_dir(self, log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self._ensure_meta_properties(log_dir)
        marker = log_dir / files.CLEAN_SHUTDOWN_FILE
        had_clean = marker.exists()
        self._had_clean_shutdown[log_dir] = had_clean
        if had_clean:
            marker.unlink()
            files.fsync_dir(log_dir)
        recovery_points = self._read_checkpoint(log_dir / files.RECOVERY_POINT_CHECKPOINT_FILE)
        log_start_offsets = self._read_checkpoint(log_dir / files.LOG_START_OFFSET_CHECKPOINT_FILE)
        for sub in sorted(log_dir.iterdir()):
            if not sub.is_dir():
                continue
            name = sub.name
            if name.endswith(DELETE_DIR_SUFFIX):
                self._schedule_dir_deletion(sub)
                continue
            if name.endswith(FUTURE_DIR_SUFFIX) or name.endswith(STRAY_DIR_SUFFIX):
                log.info("ignoring %s (no replica movement on a single node)", sub)
                continue
            tp = files.parse_partition_dir_name(name)
            if tp is None:
                log.warning("ignoring %s: not a partition directory", sub)
                continue
            with self._lock:
                if tp in self._logs:
                    raise ValueError(f"duplicate log directories for {tp[0]}-{tp[1]}: {sub} and "
                                     f"{self._logs[tp].dir}")
            lg = UnifiedLog.create(sub, self.config_for(tp[0]), log_start_offset=log_start_offsets.get(tp, 0),
                                   recovery_point=recovery_points.get(tp, 0), scheduler=self.scheduler,
                                   time=self.time, last_shutdown_clean=had_clean,
                                   producer_id_expiration_ms=self.producer_id_expiration_ms,
                                   failure_channel=self.failure_channel,
                                   remote_storage_system_enable=self.remote_storage_system_enable)
            log.info("loaded log %s: %s (clean shutdown: %s, recovered segments: %s)", name, lg,
                     had_clean, lg.load_stats.recovered_segments)
            with self._lock:
                self._logs[tp] = lg

    @staticmethod
    def _read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
        try:
            return files.read_offset_checkpoint(path)
        except ValueError as exc:  # unreadable: recover everything from the start
            log.warning("ignoring unreadable checkpoint %s: %s", path, exc)
            return {}

    def _schedule(self, name: str, fn: Callable[[], object], period_ms: int) -> None:
        if 0 < period_ms < INT64_MAX:
            self._tasks.append(self.scheduler.schedule(name, fn, self.initial_task_delay_ms, period_ms))

    def _schedule_tasks(self) -> None:
        self._schedule("kafka-log-retention", self.cleanup_logs, self.retention_check_interval_ms)
        self._schedule("kafka-log-flusher", self.flush_dirty_logs, self.flush_check_ms)
        self._schedule("kafka-recovery-point-checkpoint", self.checkpoint_log_recovery_offsets,
                       self.flush_recovery_offset_checkpoint_ms)
        self._schedule("kafka-log-start-offset-checkpoint", self.checkpoint_log_start_offsets,
                       self.flush_start_offset_checkpoint_ms)
        self._schedule("highwatermark-checkpoint", self.checkpoint_high_watermarks,
                       self.high_watermark_checkpoint_ms)
        self._schedule("producer-expiration-check", self.remove_expired_producers,
                       self.producer_id_expiration_check_interval_ms)

    def run_pending(self, now_ms: int | None = None) -> int:
        """Run the due background tasks now (tests drive a ``Scheduler`` with MockTime)."""
        return self.scheduler.run_pending(now_ms)

    # --- logs ---

    def get_log(self, topic: str, partition: int) -> UnifiedLog | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[UnifiedLog]:
        with self._lock:
            return list(self._logs.values())

    def logs_by_topic_partition(self) -> dict[tuple[str, int], UnifiedLog]:
        with self._lock:
            return dict(self._logs)

    def _logs_in_dir(self, log_dir: Path) -> dict[tuple[str, int], UnifiedLog]:
        wanted = str(Path(log_dir).absolute())
        with self._lock:
            return {tp: lg for tp, lg in self._logs.items() if lg.parent_dir == wanted}

    def _next_log_dir(self) -> Path:
        live = self.live_log_dirs
        if not live:
            raise KafkaStorageError(f"no log directory is online (offline: {self.offline_log_dirs})")
        counts = {d: 0 for d in live}
        for lg in self._logs.values():
            d = Path(lg.parent_dir)
            if d in counts:
                counts[d] += 1
        return min(live, key=lambda d: (counts[d], self.log_dirs.index(d)))

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None,
                          topic_id: uuid.UUID | None = None) -> UnifiedLog:
        """The log of (topic, partition), created (empty, in the online directory with the
        fewest partitions) if absent. ``topic_id`` is written to partition.metadata; an
        existing log with another topic id is refused (ValueError)."""
        validate_topic_name(topic)
        if partition < 0:
            raise ValueError(f"invalid partition {partition}")
        with self._lock:
            existing = self._logs.get((topic, partition))
            if existing is not None:
                if topic_id is not None:
                    if existing.topic_id is None:
                        with existing.local_log.io("error while writing partition.metadata"):
                            files.write_partition_metadata(existing.dir, topic_id)
                        existing.topic_id = topic_id
                    elif existing.topic_id != topic_id:
                        raise ValueError(f"log {existing.name} has topic id {existing.topic_id}, not {topic_id}")
                return existing
            if config is not None:
                self._topic_configs.setdefault(topic, config)
            log_dir = self._next_log_dir()
            lg = UnifiedLog.create(log_dir / files.partition_dir_name(topic, partition),
                                   config or self.config_for(topic), scheduler=self.scheduler, time=self.time,
                                   last_shutdown_clean=True, topic_id=topic_id,
                                   producer_id_expiration_ms=self.producer_id_expiration_ms,
                                   failure_channel=self.failure_channel,
                                   remote_storage_system_enable=self.remote_storage_system_enable)
            self._logs[(topic, partition)] = lg
            log.info("created log for partition %s-%d in %s", topic, partition, log_dir)
            return lg

    def delete_log(self, topic: str, partition: int) -> UnifiedLog | None:
        """Kafka's asynchronous delete: the log stops taking requests, its directory is
        renamed ``<topic>-<partition>.<uuid>-delete`` (reads already handed out stay
        readable) and removed after file.delete.delay.ms. Returns the removed log."""
        with self._lock:
            lg = self._logs.pop((topic, partition), None)
            if lg is None:
                return None
            if not any(t == topic for t, _ in self._logs):
                self._topic_configs.pop(topic, None)
            self._removed_logs.append(lg)
        lg.mark_deleted()
        if self.remote_log_manager is not None:
            self.remote_log_manager.on_partition_deleted(topic, partition)
        parent = Path(lg.parent_dir)
        if self.cleaner is not None and not self.failure_channel.is_offline(parent):
            self.cleaner.manager.remove_log((topic, partition), parent)
        if self.failure_channel.is_offline(parent):
            lg.close_handlers()
            return lg
        unique = uuid.uuid4().hex
        suffix_len = len(DELETE_DIR_SUFFIX) + len(unique) + 2 + len(str(partition))
        name = f"{topic[:255 - suffix_len]}-{partition}.{unique}{DELETE_DIR_SUFFIX}"
        try:
            lg.rename_dir(name)
        except KafkaStorageError:
            lg.close_handlers()
            return lg
        self._checkpoint_dir(parent)
        self.scheduler.schedule_once("delete-logs", lambda: self._delete_removed_log(lg),
                                     lg.config.file_delete_delay_ms)
        return lg

    def _delete_removed_log(self, lg: UnifiedLog) -> None:
        with self._lock:
            if lg in self._removed_logs:
                self._removed_logs.remove(lg)
        try:
            lg.delete()
        except KafkaStorageError as exc:
            log.error("failed to delete %s: %s", lg.dir, exc)

    def _schedule_dir_deletion(self, directory: Path) -> None:
        def delete() -> None:
            if self.failure_channel.is_offline(directory.parent):
                return
            try:
                shutil.rmtree(directory)
            except OSError as exc:
                self._mark_offline(directory.parent, f"error while deleting {directory}: {exc}", exc)

        self.scheduler.schedule_once("delete-logs", delete, self.default_config.file_delete_delay_ms)

    # --- background work ---

    def cleanup_logs(self, now_ms: int | None = None) -> int:
        """Retention: delete old segments of every log (retention.ms, retention.bytes, and
        segments below the log start offset); returns the number deleted."""
        total = 0
        for lg in self.all_logs():
            if lg.is_offline:
                continue
            try:
                total += lg.delete_old_segments(now_ms)
            except KafkaStorageError as exc:
                log.error("retention of %s failed: %s", lg.name, exc)
        return total

    def flush_dirty_logs(self, now_ms: int | None = None) -> int:
        """flush.ms: flush every log whose last flush is at least flush.ms old."""
        flushed = 0
        for lg in self.all_logs():
            if lg.is_offline:
                continue
            try:
                flushed += lg.flush_if_due(now_ms)
            except KafkaStorageError as exc:
                log.error("flush of %s failed: %s", lg.name, exc)
        return flushed

    def remove_expired_producers(self, now_ms: int | None = None) -> None:
        for lg in self.all_logs():
            if not lg.is_offline:
                lg.remove_expired_producers(now_ms)

    def _write_dir_checkpoint(self, log_dir: Path, file_name: str,
                              value: Callable[[UnifiedLog], int | None]) -> None:
        if self.failure_channel.is_offline(log_dir):
            return
        entries = {}
        for tp, lg in self._logs_in_dir(log_dir).items():
            offset = value(lg)
            if offset is not None:
                entries[tp] = offset
        try:
            with self._checkpoint_lock:
                files.write_offset_checkpoint(log_dir / file_name, entries)
        except OSError as exc:
            self._mark_offline(log_dir, f"error while writing {file_name} in {log_dir}: {exc}", exc)

    def checkpoint_log_recovery_offsets(self) -> None:
        """recovery-point-offset-checkpoint of every online directory; then drop producer
        snapshots no restart can need any more."""
        for log_dir in self.live_log_dirs:
            self._write_dir_checkpoint(log_dir, files.RECOVERY_POINT_CHECKPOINT_FILE, lambda lg: lg.recovery_point)
            for lg in self._logs_in_dir(log_dir).values():
                try:
                    lg.delete_snapshots_after_recovery_point_checkpoint()
                except (OSError, KafkaStorageError) as exc:
                    log.warning("deleting old snapshots of %s failed: %s", lg.name, exc)

    def checkpoint_log_start_offsets(self) -> None:
        for log_dir in self.live_log_dirs:
            self._write_dir_checkpoint(log_dir, files.LOG_START_OFFSET_CHECKPOINT_FILE, _checkpointed_start)

    def checkpoint_high_watermarks(self) -> None:
        for log_dir in self.live_log_dirs:
            self._write_dir_checkpoint(log_dir, files.REPLICATION_OFFSET_CHECKPOINT_FILE,
                                       lambda lg: lg.high_watermark)

    def _checkpoint_dir(self, log_dir: Path) -> None:
        self._write_dir_checkpoint(log_dir, files.RECOVERY_POINT_CHECKPOINT_FILE, lambda lg: lg.recovery_point)
        self._write_dir_checkpoint(log_dir, files.LOG_START_OFFSET_CHECKPOINT_FILE, _checkpointed_start)
        self._write_dir_checkpoint(log_dir, files.REPLICATION_OFFSET_CHECKPOINT_FILE, lambda lg: lg.high_watermark)

    # --- shutdown ---

    def shutdown(self) -> None:
        """Flush and close every log, write the checkpoints, then the clean-shutdown marker
        of every directory where all of that succeeded."""
        if self._shut_down:
            return
        self._shut_down = True
        if self.cleaner is not None:
            self.cleaner.shutdown()
        for task in self._tasks:
            task.cancel()
        if self._owns_scheduler:
            self.scheduler.shutdown()
        with self._lock:
            removed, self._removed_logs = self._removed_logs, []
        for lg in removed:  # their -delete directories are removed by the next start
            lg.close_handlers()
        for log_dir in self.log_dirs:
            if self.failure_channel.is_offline(log_dir):
                for lg in self._logs_in_dir(log_dir).values():
                    lg.close_handlers()
                continue
            logs = self._logs_in_dir(log_dir)
            ok = True
            for lg in logs.values():
                try:
                    lg.flush(True)
                    lg.close()
                except (KafkaStorageError, OSError) as exc:
                    log.error("closing %s failed: %s", lg.name, exc)
                    ok = False
            self._checkpoint_dir(log_dir)
            if ok and not self.failure_channel.is_offline(log_dir):
                try:
                    files.atomic_write(log_dir / files.CLEAN_SHUTDOWN_FILE, _CLEAN_SHUTDOWN_BODY)
                except OSError as exc:
                    self._mark_offline(log_dir, f"error while writing the clean shutdown marker: {exc}", exc)
        log.info("log manager shut down (offline dirs: %s)", self.offline_log_dirs)

    def __repr__(self) -> str:
        return f"LogManager(log_dirs={[str(d) for d in self.log_dirs]}, logs={len(self._logs)})"
