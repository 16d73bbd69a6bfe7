"""The broker's topic metadata: which topics exist, their partition counts, topic ids and
per-topic config overrides (Kafka keeps these in ZooKeeper or the KRaft metadata log; a
single node keeps them in a small file).

Owns:

* ``TopicRegistry``: the in-memory table and its file, ``kafkalog-topics.json``, written
  atomically (``broker.log.files.atomic_write``: temp file, fsync, rename, fsync dir) to
  EVERY online log directory on each change. Format::

      {"version": 1,                 # format version (1)
       "epoch": 42,                  # +1 on every write; the highest readable copy wins
       "node_id": 1,
       "topics": {
         "orders": {"topic_id": "Jx0jOUhPRHy7G5tqpyM3zA",   # Kafka's base64 Uuid text
                    "partitions": 3,
                    "configs": {"retention.ms": "60000"}}}}   # overrides, as given

  A directory that was offline during a change holds an older epoch and is overwritten
  at the next write. Values are kept as the client sent them (strings), so
  DescribeConfigs returns them unchanged.

* ``TopicManager``: the registry plus the ``LogManager``: topic creation (name, partition,
  replication and config validation with Kafka's error codes), deletion, partition
  additions, config changes (Alter/IncrementalAlterConfigs: registry first, then the live
  logs), auto-creation, the effective ``LogConfig`` of each topic, and the startup
  reconciliation with the partition directories found on disk:

  - a registry topic whose partition directory is missing gets an empty log (a crash
    between the registry write and the log creation, which happen in that order), unless
    a log directory is offline: the log may be there, so the partition stays unavailable
    (LEADER_NOT_AVAILABLE in Metadata) rather than forked;
  - a partition directory of a topic the registry does not know (or beyond its partition
    count) is a stray left by an interrupted deletion (the registry is written first) and
    is deleted, as KRaft brokers do with stray logs;
  - when no registry file exists at all (a log directory written by Apache Kafka or an
    older version), every partition directory is adopted: topic = the directory name,
    partitions = highest index + 1, topic id = its ``partition.metadata`` or a new one.

Invariants: the registry is written before logs are created and before they are
deleted, so the file is the source of truth after any crash; a topic's partitions are
0..n-1, each with a log; every name is valid (``validate_topic_name``).

Thread-safety: ``TopicManager._lock`` serialises create/delete/add-partitions/alter-configs
(admin requests are rare); readers (``get``, ``topics``, ``log_config``) take an immutable
snapshot (``TopicInfo`` tuples in a dict replaced on every change) without locking.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from broker.config import BrokerConfig, ConfigError
from broker.log import files
from broker.log.config import (
    LOG_CONFIG_DEF,
    SERVER_DEFAULT_KEYS,
    LogConfig,
    topic_defaults_from_server,
    validate_topic_config,
)
from broker.log.errors import KafkaStorageError
from broker.log.manager import LogManager, validate_topic_name
from broker.protocol import ErrorCode
from broker.server.errors import ApiError

log = logging.getLogger(__name__)

REGISTRY_FILE = "kafkalog-topics.json"
REGISTRY_VERSION = 1
# Not a Kafka limit: each partition is a directory with two preallocated index files, so
# an absurd count in one CreateTopics/CreatePartitions request would fill the disk.
MAX_PARTITIONS_PER_TOPIC = 10_000


class TopicInfo(NamedTuple):
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: Mapping[str, str]  # per-topic overrides, as given


def _collision_key(name: str) -> str:
    return name.replace(".", "_")


class TopicRegistry:
    """The topic table and its copies in the log directories (format in the module doc)."""

    def __init__(self, log_dirs: list[Path], node_id: int) -> None:
        self.log_dirs = [Path(d).absolute() for d in log_dirs]
        self.node_id = node_id
        self.epoch = 0
        self.found = False  # whether any copy existed at load
        self.topics: dict[str, TopicInfo] = {}

    def load(self) -> None:
        """Read the highest-epoch readable copy; unreadable copies are logged and skipped."""
        best = None
        for d in self.log_dirs:
            path = d / REGISTRY_FILE
            if not path.exists():
                continue
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                if data.get("version") != REGISTRY_VERSION:
                    raise ValueError(f"unknown version {data.get('version')!r}")
                topics = {}
                for name, t in data["topics"].items():
                    validate_topic_name(name)
                    count = int(t["partitions"])
                    if count < 1:
                        raise ValueError(f"topic {name}: {count} partitions")
                    configs = {str(k): str(v) for k, v in t.get("configs", {}).items()}
                    topics[name] = TopicInfo(name, files.decode_topic_id(t["topic_id"]), count, configs)
                epoch = int(data["epoch"])
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                log.error("ignoring unreadable topic registry %s: %s", path, exc)
                continue
            self.found = True
            if best is None or epoch > best[0]:
                best = (epoch, topics)
        if best is not None:
            self.epoch, self.topics = best

    def save(self, topics: dict[str, TopicInfo], live_dirs: list[Path]) -> None:
        """Write ``topics`` with the next epoch to every directory of ``live_dirs``; the
        in-memory table changes only when at least one copy was written."""
        epoch = self.epoch + 1
        body = {
            "version": REGISTRY_VERSION,
            "epoch": epoch,
            "node_id": self.node_id,
            "topics": {
                name: {"topic_id": files.encode_topic_id(t.topic_id), "partitions": t.partitions,
                       "configs": dict(t.configs)}
                for name, t in sorted(topics.items())
            },
        }
        data = json.dumps(body, indent=1, sort_keys=False).encode("utf-8")
        written = 0
        for d in live_dirs:
            try:
                d.mkdir(parents=True, exist_ok=True)
                files.atomic_write(d / REGISTRY_FILE, data)
                written += 1
            except OSError as exc:
                log.error("could not write the topic registry to %s: %s", d, exc)
        if not written:
            raise KafkaStorageError(f"the topic registry could not be written to any of {live_dirs}")
        self.epoch = epoch
        self.topics = topics


class TopicManager:
    """Topics over the ``LogManager`` (lifecycle, validation and startup in the module doc)."""

    def __init__(self, log_manager: LogManager, server_config: Mapping[str, Any]) -> None:
        self.log_manager = log_manager
        self.server_config = server_config
        core = BrokerConfig.from_config(server_config)
        self.node_id = core.node_id
        self.num_partitions = core.num_partitions
        self.default_replication_factor = core.default_replication_factor
        self.auto_create_enabled = core.auto_create_topics_enable
        self.delete_enabled = core.delete_topic_enable
        self.topic_defaults = topic_defaults_from_server(server_config)
        self.default_log_config = LogConfig.from_props(defaults=self.topic_defaults)
        self.registry = TopicRegistry(log_manager.log_dirs, self.node_id)
        self._configs: dict[str, tuple[TopicInfo, LogConfig]] = {}  # topic -> (info, its config)
        self._lock = threading.RLock()

    # --- startup ---

    def load(self) -> None:
        """Read the registry (before ``LogManager.startup``, which asks ``log_config``).
        Topics with remote.storage.enable=true on a broker whose
        remote.log.storage.system.enable=false stop the startup, as in Kafka (its
        LogConfig check for configs read from the store): served from their local segments
        only, their remote offsets would vanish and consumers positioned there would be
        reset past them; ConfigError naming the topics."""
        self.registry.load()
        if not self.log_manager.remote_storage_system_enable:
            tiered = sorted(name for name, info in self.registry.topics.items()
                            if str(info.configs.get("remote.storage.enable", "")).strip().lower() == "true")
            if tiered:
                raise ConfigError("remote.log.storage.system.enable", False,
                                  "You have to delete all topics with the property remote.storage.enable=true "
                                  f"before disabling tiered storage cluster-wide (topics: {', '.join(tiered)})")

    def startup(self) -> None:
        """Reconcile the registry with the logs the ``LogManager`` loaded (module doc)."""
        with self._lock:
            topics = dict(self.registry.topics)
            adopted: dict[str, list[tuple[int, Any]]] = {}
            for (topic, partition), lg in sorted(self.log_manager.logs_by_topic_partition().items()):
                info = topics.get(topic)
                if info is not None and partition < info.partitions:
                    continue
                if self.registry.found:
                    log.warning("deleting stray log %s-%d: not in the topic registry", topic, partition)
                    self.log_manager.delete_log(topic, partition)
                    continue
                adopted.setdefault(topic, []).append((partition, lg.topic_id))
            for topic, parts in adopted.items():
                topic_id = next((tid for _, tid in parts if tid is not None), None) or uuid.uuid4()
                count = max(p for p, _ in parts) + 1
                topics[topic] = TopicInfo(topic, topic_id, count, {})
                log.info("adopted topic %s with %d partitions from the log directories", topic, count)
            if adopted or not self.registry.found:
                self.registry.save(topics, self.log_manager.live_log_dirs)
            offline = self.log_manager.offline_log_dirs
            for info in topics.values():
                if offline:  # a missing log may live in the offline directory: never fork it
                    missing = [p for p in range(info.partitions) if self.log_manager.get_log(info.name, p) is None]
                    if missing:
                        log.warning("topic %s: partitions %s are unavailable (offline log dirs %s)",
                                    info.name, missing, offline)
                    continue
                self._create_logs(info, 0)

    def _create_logs(self, info: TopicInfo, first: int) -> None:
        config = self.log_config(info.name)
        for p in range(first, info.partitions):
            self.log_manager.get_or_create_log(info.name, p, config, info.topic_id)

    # --- queries (lock-free snapshots) ---

    def topics(self) -> dict[str, TopicInfo]:
        return self.registry.topics

    def get(self, name: str) -> TopicInfo | None:
        return self.registry.topics.get(name)

    def get_log(self, topic: str, partition: int):
        return self.log_manager.get_log(topic, partition)

    def log_config(self, topic: str) -> LogConfig:
        """The effective config of ``topic``: Kafka defaults < server log.* keys < overrides.
        Cached per ``TopicInfo`` object, so a config change (a new TopicInfo) is never
        answered from a stale cache entry."""
        info = self.registry.topics.get(topic)
        if info is None or not info.configs:
            return self.default_log_config
        cached = self._configs.get(topic)
        if cached is not None and cached[0] is info:
            return cached[1]
        config = LogConfig.from_props(info.configs, self.topic_defaults)
        self._configs[topic] = (info, config)
        return config

    # --- validation ---

    def validate_name(self, name: str) -> None:
        try:
            validate_topic_name(name)
        except ValueError as exc:
            raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc)) from None

    def validate_configs(self, configs: Mapping[str, str | None], kafka_constraints: bool = True,
                         current: Mapping[str, str] | None = None) -> LogConfig:
        """Overrides checked as Kafka 4 does (unknown key, bad value or a value outside
        Kafka's range, e.g. segment.bytes below 1 MiB: INVALID_CONFIG whose message names
        the key and the constraint, ``validate_topic_config``, with this broker's
        remote.log.storage.system.enable and, for an alteration, the ``current`` overrides;
        a null value: INVALID_REQUEST); returns the topic's effective config.
        ``kafka_constraints=False`` checks only what the storage engine needs
        (``LOG_CONFIG_DEF``)."""
        for key, value in configs.items():
            if key not in LOG_CONFIG_DEF.keys:
                raise ApiError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {key}")
            if value is None:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for topic configs: {key}")
        try:
            config = LogConfig.from_props(dict(configs), self.topic_defaults)
            if kafka_constraints:
                before = None if current is None else LogConfig.from_props(dict(current), self.topic_defaults)
                validate_topic_config(config, configs, current=before,
                                      remote_storage_system_enable=self.log_manager.remote_storage_system_enable)
            return config
        except ConfigError as exc:
            raise ApiError(ErrorCode.INVALID_CONFIG, str(exc)) from None

    def resolve_partitions(self, num_partitions: int, replication_factor: int,
                           assignments: list[tuple[int, list[int]]] | None) -> int:
        """The partition count of a new topic (-1 = num.partitions), checked with Kafka's
        codes; a manual assignment must place every partition on this node only."""
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise ApiError(ErrorCode.INVALID_REQUEST,
                               "Both numPartitions or replicationFactor and replicasAssignments were set. "
                               "Both cannot be used at the same time.")
            indexes = sorted(p for p, _ in assignments)
            if indexes != list(range(len(indexes))):
                raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               "Partitions should be a consecutive 0-based integer sequence")
            for _, brokers in assignments:
                self._check_assignment(brokers)
            num_partitions = len(indexes)
        else:
            if num_partitions == -1:
                num_partitions = self.num_partitions
            if replication_factor == -1:
                replication_factor = self.default_replication_factor
            if num_partitions <= 0:
                raise ApiError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
            if replication_factor <= 0:
                raise ApiError(ErrorCode.INVALID_REPLICATION_FACTOR,
                               "Replication factor must be larger than 0.")
            if replication_factor > 1:
                raise ApiError(ErrorCode.INVALID_REPLICATION_FACTOR,
                               f"Unable to replicate the partition {replication_factor} time(s): "
                               f"The target replication factor of {replication_factor} cannot be "
                               f"reached because only 1 broker(s) are registered.")
        if num_partitions > MAX_PARTITIONS_PER_TOPIC:
            raise ApiError(ErrorCode.INVALID_PARTITIONS,
                           f"Number of partitions {num_partitions} is above this broker's limit of "
                           f"{MAX_PARTITIONS_PER_TOPIC} per topic.")
        return num_partitions

    def _check_assignment(self, brokers: list[int]) -> None:
        if list(brokers) != [self.node_id]:
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"Replica assignment {list(brokers)} is not [{self.node_id}] (single-node broker)")

    # --- changes ---

    def create_topic(self, name: str, num_partitions: int, configs: Mapping[str, str],
                     validate_only: bool = False) -> TopicInfo:
        """Create ``name`` (already resolved partition count); ApiError on an invalid
        name, a collision or an existing topic. The configs are re-checked against
        ``LOG_CONFIG_DEF`` only: CreateTopics calls ``validate_configs`` (Kafka's
        constraints) first, and the broker's own topics trust the broker's config (the
        group coordinator's ``offsets.topic.segment.bytes`` is atLeast(1) in Kafka)."""
        self.validate_name(name)
        config = self.validate_configs(configs, kafka_constraints=False)
        with self._lock:
            topics = self.registry.topics
            if name in topics:
                raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            key = _collision_key(name)
            for other in topics:
                if _collision_key(other) == key:
                    raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                   f"Topic '{name}' collides with existing topic: {other}")
            info = TopicInfo(name, uuid.uuid4(), num_partitions, dict(configs))
            if validate_only:
                return info
            new = dict(topics)
            new[name] = info
            self._configs.pop(name, None)
            self.registry.save(new, self.log_manager.live_log_dirs)
            self.log_manager.update_topic_config(name, config)
            self._create_logs(info, 0)
        log.info("created topic %s with %d partitions (overrides %s)", name, num_partitions, dict(configs))
        return info

    def auto_create(self, name: str) -> TopicInfo:
        """Metadata's auto-creation with the broker defaults (an existing topic is returned)."""
        info = self.registry.topics.get(name)
        if info is not None:
            return info
        try:
            return self.create_topic(name, self.num_partitions, {})
        except ApiError as exc:
            if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:  # a concurrent creation won
                existing = self.registry.topics.get(name)
                if existing is not None:
                    return existing
            raise

    def delete_topic(self, name: str) -> None:
        if not self.delete_enabled:
            raise ApiError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        with self._lock:
            topics = self.registry.topics
            info = topics.get(name)
            if info is None:
                raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                               "This server does not host this topic-partition.")
            new = dict(topics)
            del new[name]
            self.registry.save(new, self.log_manager.live_log_dirs)
            self._configs.pop(name, None)
            for p in range(info.partitions):
                self.log_manager.delete_log(name, p)
        log.info("deleted topic %s", name)

    def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                          validate_only: bool = False) -> None:
        with self._lock:
            topics = self.registry.topics
            info = topics.get(name)
            if info is None:
                raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
            if count < info.partitions:
                raise ApiError(ErrorCode.INVALID_PARTITIONS,
                               f"Topic currently has {info.partitions} partitions, which is higher than "
                               f"the requested {count}.")
            if count == info.partitions:
                raise ApiError(ErrorCode.INVALID_PARTITIONS,
                               f"Topic already has {info.partitions} partitions.")
            if count > MAX_PARTITIONS_PER_TOPIC:
                raise ApiError(ErrorCode.INVALID_PARTITIONS,
                               f"Number of partitions {count} is above this broker's limit of "
                               f"{MAX_PARTITIONS_PER_TOPIC} per topic.")
            if assignments is not None:
                if len(assignments) != count - info.partitions:
                    raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                   f"Increasing the number of partitions by {count - info.partitions} "
                                   f"but {len(assignments)} assignments provided.")
                for brokers in assignments:
                    self._check_assignment(brokers)
            if validate_only:
                return
            first = info.partitions
            new = dict(topics)
            new[name] = info._replace(partitions=count)
            self.registry.save(new, self.log_manager.live_log_dirs)
            self._create_logs(new[name], first)
        log.info("topic %s now has %d partitions", name, count)

    def alter_topic_configs(self, name: str, update: Callable[[Mapping[str, str]], Mapping[str, str | None]],
                            validate_only: bool = False) -> TopicInfo:
        """Replace the overrides of ``name`` with ``update(current overrides)`` (Alter- and
        IncrementalAlterConfigs): validated as CreateTopics validates (INVALID_CONFIG naming
        the key, INVALID_REQUEST for a null value), written to the registry, then applied
        to every live partition log at once (``LogManager.update_topic_config``). The read,
        the update and the write happen under the topic lock, so concurrent changes of the
        same topic never lose each other. Returns the new ``TopicInfo`` (unchanged with
        ``validate_only``). UNKNOWN_TOPIC_OR_PARTITION when the topic does not exist."""
        with self._lock:
            topics = self.registry.topics
            info = topics.get(name)
            if info is None:
                raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
            configs = dict(update(info.configs))
            config = self.validate_configs(configs, current=info.configs)
            if validate_only:
                return info
            new = dict(topics)
            # validate_configs refused null values (INVALID_REQUEST): every value is a string
            new[name] = info._replace(configs={k: v for k, v in configs.items() if v is not None})
            self.registry.save(new, self.log_manager.live_log_dirs)
            self._configs[name] = (new[name], config)
            self.log_manager.update_topic_config(name, config)
        log.info("topic %s: config overrides are now %s (were %s)", name, configs, dict(info.configs))
        return new[name]

    # --- DescribeConfigs support ---

    @staticmethod
    def server_synonyms(topic_key: str) -> list[str]:
        """The server.properties keys that set the default of ``topic_key``, highest
        precedence first (Kafka's synonyms), e.g. retention.ms -> log.retention.ms,
        log.retention.minutes, log.retention.hours."""
        out = [server_key for server_key, key in SERVER_DEFAULT_KEYS.items() if key == topic_key]
        out += _EXTRA_SYNONYMS.get(topic_key, [])
        return out


# Time keys Kafka also accepts in coarser units (topic_defaults_from_server reads them).
_EXTRA_SYNONYMS = {
    "retention.ms": ["log.retention.minutes", "log.retention.hours"],
    "segment.ms": ["log.roll.hours"],
}
