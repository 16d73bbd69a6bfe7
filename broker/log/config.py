"""Topic-level log configuration (``LogConfig``) with Kafka's keys and defaults.

Owns: the table of per-topic keys the storage engine obeys (segment.bytes, retention.ms,
flush.messages, ...) and ``LogConfig``, a frozen, typed view of one topic's values. The
broker's ``log.*`` defaults (``log.segment.bytes`` ...) map onto these keys through
``SERVER_DEFAULT_KEYS``; per-topic overrides win over them.

Validation, two levels:

* ``LOG_CONFIG_DEF``'s types and ranges (what the storage engine needs to work) are checked
  whenever a ``LogConfig`` is built, so a ``UnifiedLog`` built directly (tests, tools,
  bench) may use small segments, e.g. ``segment.bytes=400`` to get several of them.
* ``validate_topic_config`` adds Kafka 4's user-facing constraints (``LogConfig``'s
  ConfigDef and ``LogConfig.validateValues``): ``segment.bytes`` at least 1 MiB
  (``MIN_SEGMENT_BYTES``), ``min.compaction.lag.ms`` <= ``max.compaction.lag.ms``, no
  value twice in a list (``cleanup.policy=delete,delete``). An empty ``cleanup.policy`` is
  accepted, as Kafka 4's ``ValidList.in`` does (neither deletion nor compaction). The
  server applies it at its boundaries: CreateTopics, AlterConfigs and
  IncrementalAlterConfigs (INVALID_CONFIG with the message) and server.properties at
  startup (the broker refuses to start).
* ``internal.segment.bytes`` (Kafka 4's ``LogConfig.INTERNAL_SEGMENT_BYTES_CONFIG``, "for
  testing only"): a topic-level key without the 1 MiB minimum that, when set, replaces
  segment.bytes as the segment size. DescribeConfigs lists it only for a topic that sets it.
* Tiered storage (KIP-405, KIP-950), Kafka's rules and messages (``LogConfig.validate*``):
  ``remote.storage.enable=true`` is refused with compaction ("Remote log storage is
  unsupported for the compacted topics") and, when the caller says the broker has
  remote.log.storage.system.enable=false, with "Tiered Storage functionality is disabled
  in the broker. Topic cannot be configured with remote log storage."
  (``validateRemoteStorageOnlyIfSystemEnabled``); ``local.retention.ms`` /
  ``local.retention.bytes`` (-2: retention.ms / retention.bytes) may not exceed
  retention.ms / retention.bytes; with ``remote.log.copy.disable=true`` they must be -2 or
  equal to them (``validateRetentionConfigsWhenRemoteCopyDisabled``); turning
  remote.storage.enable from true (``current``) to false needs
  ``remote.log.delete.on.disable=true`` (``validateTurningOffRemoteStorageWithDelete``).
  Kafka raises these as bare messages (``ConfigException(message)``): ``TopicConfigError``
  carries them without the "Invalid value" prefix.

Invariants: a ``LogConfig`` never changes; a topic's config change builds a new one.

Thread-safety: immutable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from broker.config import (
    BOOLEAN,
    DOUBLE,
    INT,
    LIST,
    LONG,
    LONG_MAX,
    STRING,
    ConfigDef,
    ConfigError,
    at_least,
    between,
    one_of,
)

DELETE = "delete"
COMPACT = "compact"

# Kafka 4's minimum of segment.bytes / log.segment.bytes (atLeast(1024 * 1024)).
MIN_SEGMENT_BYTES = 1024 * 1024
# The smallest segment the storage engine can work with (one batch header).
_ENGINE_MIN_SEGMENT_BYTES = 14
INTERNAL_SEGMENT_BYTES = "internal.segment.bytes"
REMOTE_STORAGE_ENABLE = "remote.storage.enable"
REMOTE_LOG_COPY_DISABLE = "remote.log.copy.disable"
REMOTE_LOG_DELETE_ON_DISABLE = "remote.log.delete.on.disable"
# Keys DescribeConfigs lists only when a topic sets them (Kafka's internal configs).
INTERNAL_KEYS = frozenset({INTERNAL_SEGMENT_BYTES})

def _gzip_level(key: str, value: Any) -> None:
    """Kafka's GZIP level validator: -1 (Deflater.DEFAULT_COMPRESSION) or [1, 9]."""
    if value is not None and value != -1 and not 1 <= value <= 9:
        raise ConfigError(key, value, "Value must be -1 or in [1, 9]")


LOG_CONFIG_DEF = (
    ConfigDef()
    .define("segment.bytes", INT, 1073741824,
            "Roll the active segment when it would exceed this size (at least 1 MiB at the "
            "server's boundaries).", at_least(_ENGINE_MIN_SEGMENT_BYTES))
    .define(INTERNAL_SEGMENT_BYTES, INT, None,
            "The maximum size of a single log file, replacing segment.bytes without its "
            "1 MiB minimum. This should be used for testing only.",
            at_least(_ENGINE_MIN_SEGMENT_BYTES))
    .define("segment.ms", LONG, 604800000,
            "Roll a non-empty segment after this long (from its first batch's timestamp).",
            at_least(1))
    .define("segment.jitter.ms", LONG, 0,
            "Random jitter subtracted from segment.ms.", at_least(0))
    .define("segment.index.bytes", INT, 10485760,
            "Preallocated size of each offset and time index.", at_least(4))
    .define("index.interval.bytes", INT, 4096,
            "Bytes of log between two sparse index entries.", at_least(0))
    .define("flush.messages", LONG, LONG_MAX,
            "fsync after this many appended messages (1 = every append).", at_least(1))
    .define("flush.ms", LONG, LONG_MAX,
            "fsync when the oldest unflushed append is this old.", at_least(0))
    .define("retention.ms", LONG, 604800000,
            "Delete a segment whose newest record is older than this; -1: no limit.", at_least(-1))
    .define("retention.bytes", LONG, -1,
            "Delete old segments while the log exceeds this size; -1: no limit.")
    .define("max.message.bytes", INT, 1048588,
            "Largest record batch the topic accepts (after compression).", at_least(0))
    .define("message.timestamp.type", STRING, "CreateTime",
            "CreateTime keeps the producer's timestamp; LogAppendTime stamps the broker's.",
            one_of("CreateTime", "LogAppendTime"))
    .define("message.timestamp.before.max.ms", LONG, LONG_MAX,
            "How far in the past a CreateTime timestamp may be.", at_least(0))
    .define("message.timestamp.after.max.ms", LONG, 3600000,
            "How far in the future a CreateTime timestamp may be.", at_least(0))
    .define("cleanup.policy", LIST, [DELETE],
            "delete, compact, or both.", one_of(DELETE, COMPACT))
    .define("compression.type", STRING, "producer",
            "The topic's final codec; 'producer' keeps what the producer sent.",
            one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"))
    .define("compression.gzip.level", INT, -1,
            "Level of the gzip codec when compression.type=gzip (-1: the codec's default).",
            _gzip_level)
    .define("compression.lz4.level", INT, 9,
            "Level of the lz4 codec when compression.type=lz4.", between(1, 17))
    .define("compression.zstd.level", INT, 3,
            "Level of the zstd codec when compression.type=zstd.", between(-131072, 22))
    .define("file.delete.delay.ms", LONG, 60000,
            "Delay before a .deleted file is removed.", at_least(0))
    .define("preallocate", BOOLEAN, False, "Preallocate new segment files to segment.bytes.")
    .define("min.insync.replicas", INT, 1,
            "With acks=all, the replicas that must have a write (always 1 here).", at_least(1))
    .define("min.cleanable.dirty.ratio", DOUBLE, 0.5,
            "Log cleaner: dirty ratio that makes a log cleanable.", between(0, 1))
    .define("delete.retention.ms", LONG, 86400000,
            "Compacted topics: how long tombstones are kept.", at_least(0))
    .define("min.compaction.lag.ms", LONG, 0, "Compacted topics: minimum age before cleaning.",
            at_least(0))
    .define("max.compaction.lag.ms", LONG, LONG_MAX, "Compacted topics: maximum age before cleaning.",
            at_least(1))
    .define("unclean.leader.election.enable", BOOLEAN, False, "Accepted for compatibility.")
    # Tiered storage (KIP-405; broker/log/remote): Kafka's topic-level keys and defaults.
    .define(REMOTE_STORAGE_ENABLE, BOOLEAN, False,
            "Copy this topic's closed segments to remote storage (needs the broker's "
            "remote.log.storage.system.enable=true; refused with cleanup.policy=compact).")
    .define(REMOTE_LOG_COPY_DISABLE, BOOLEAN, False,
            "Remote-storage topics (KIP-950): stop copying segments; the remote ones stay "
            "readable and under retention, local segments go by retention.ms / retention.bytes.")
    .define(REMOTE_LOG_DELETE_ON_DISABLE, BOOLEAN, False,
            "Remote-storage topics (KIP-950): must be true to turn remote.storage.enable "
            "off; the topic's remote segments are then deleted.")
    .define("local.retention.ms", LONG, -2,
            "Remote-storage topics: how long a segment is kept locally once copied; -2: "
            "retention.ms, -1: no limit.", at_least(-2))
    .define("local.retention.bytes", LONG, -2,
            "Remote-storage topics: the local size above which copied segments are deleted "
            "locally; -2: retention.bytes, -1: no limit.", at_least(-2))
    .define("message.downconversion.enable", BOOLEAN, True, "Accepted for compatibility.")
)

# Broker-wide keys (server.properties) that give the default of a topic-level key.
SERVER_DEFAULT_KEYS = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "message.max.bytes": "max.message.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "log.cleanup.policy": "cleanup.policy",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.preallocate": "preallocate",
    "min.insync.replicas": "min.insync.replicas",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.local.retention.ms": "local.retention.ms",
    "log.local.retention.bytes": "local.retention.bytes",
}


@dataclass(frozen=True)
class LogConfig:
    """One topic's effective log configuration (defaults < broker log.* < topic overrides)."""

    values: Mapping[str, Any]
    overrides: Mapping[str, Any]

    @classmethod
    def from_props(cls, overrides: Mapping[str, Any] | None = None,
                   defaults: Mapping[str, Any] | None = None) -> LogConfig:
        overrides = dict(overrides or {})
        merged = dict(defaults or {})
        merged.update(overrides)
        values = LOG_CONFIG_DEF.parse(merged, strict=True)
        parsed_overrides = {k: values[k] for k in overrides}
        return cls(values, parsed_overrides)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def segment_bytes(self) -> int:
        """The segment size: internal.segment.bytes when set, else segment.bytes."""
        internal = self.values.get(INTERNAL_SEGMENT_BYTES)
        return self.values["segment.bytes"] if internal is None else internal

    @property
    def segment_ms(self) -> int:
        return self.values["segment.ms"]

    @property
    def segment_jitter_ms(self) -> int:
        return self.values["segment.jitter.ms"]

    @property
    def max_index_size(self) -> int:
        return self.values["segment.index.bytes"]

    @property
    def index_interval_bytes(self) -> int:
        return self.values["index.interval.bytes"]

    @property
    def flush_interval_messages(self) -> int:
        return self.values["flush.messages"]

    @property
    def flush_ms(self) -> int:
        return self.values["flush.ms"]

    @property
    def retention_ms(self) -> int:
        return self.values["retention.ms"]

    @property
    def retention_bytes(self) -> int:
        return self.values["retention.bytes"]

    @property
    def max_message_size(self) -> int:
        return self.values["max.message.bytes"]

    @property
    def log_append_time(self) -> bool:
        return self.values["message.timestamp.type"] == "LogAppendTime"

    @property
    def timestamp_before_max_ms(self) -> int:
        return self.values["message.timestamp.before.max.ms"]

    @property
    def timestamp_after_max_ms(self) -> int:
        return self.values["message.timestamp.after.max.ms"]

    @property
    def compact(self) -> bool:
        return COMPACT in self.values["cleanup.policy"]

    @property
    def delete(self) -> bool:
        return DELETE in self.values["cleanup.policy"]

    @property
    def file_delete_delay_ms(self) -> int:
        return self.values["file.delete.delay.ms"]

    @property
    def preallocate(self) -> bool:
        return self.values["preallocate"]

    @property
    def remote_storage_enable(self) -> bool:
        return self.values[REMOTE_STORAGE_ENABLE]

    @property
    def remote_log_copy_disable(self) -> bool:
        return self.values[REMOTE_LOG_COPY_DISABLE]

    @property
    def remote_log_delete_on_disable(self) -> bool:
        return self.values[REMOTE_LOG_DELETE_ON_DISABLE]

    @property
    def local_retention_ms(self) -> int:
        """local.retention.ms with -2 resolved to retention.ms."""
        value = self.values["local.retention.ms"]
        return self.retention_ms if value == -2 else value

    @property
    def local_retention_bytes(self) -> int:
        """local.retention.bytes with -2 resolved to retention.bytes."""
        value = self.values["local.retention.bytes"]
        return self.retention_bytes if value == -2 else value


class TopicConfigError(ConfigError):
    """A ``ConfigError`` whose message is Kafka's own, without the "Invalid value"
    prefix (Kafka's ``ConfigException(message)`` / ``InvalidConfigurationException``)."""

    def __init__(self, key: str, value: Any, message: str) -> None:
        self.key = key
        self.value = value
        ValueError.__init__(self, message)


REMOTE_STORAGE_DISABLED_IN_BROKER = ("Tiered Storage functionality is disabled in the broker. "
                                     "Topic cannot be configured with remote log storage.")
TURNING_OFF_WITHOUT_DELETE = (
    "It is invalid to disable remote storage without deleting remote data. If you want to keep the "
    "remote data and turn to read only, please set `remote.storage.enable=true,remote.log.copy.disable=true`. "
    "If you want to disable remote storage and delete all remote data, please set "
    "`remote.storage.enable=false,remote.log.delete.on.disable=true`.")


def validate_topic_config(config: LogConfig, keys: Iterable[str] | None = None, *,
                          current: LogConfig | None = None,
                          remote_storage_system_enable: bool | None = None) -> None:
    """Kafka 4's user-facing constraints on top of ``LOG_CONFIG_DEF``'s (see the module
    docstring): ``ConfigError`` naming the key and the constraint. ``keys``: the keys the
    caller set (a topic's overrides, or the topic keys server.properties sets); None: all.
    ``current``: the topic's config before an alteration (None: a new topic);
    ``remote_storage_system_enable``: the broker's remote.log.storage.system.enable (None:
    not checked)."""
    def given(key: str) -> bool:
        return keys is None or key in keys

    keys = None if keys is None else set(keys)
    for key, key_def in LOG_CONFIG_DEF.keys.items():
        value = config.values.get(key)
        if key_def.type == LIST and given(key) and value and len(set(value)) != len(value):
            raise ConfigError(key, ",".join(value), "values must not be duplicated")
    segment_bytes = config.values["segment.bytes"]
    if given("segment.bytes") and segment_bytes < MIN_SEGMENT_BYTES:
        raise ConfigError("segment.bytes", segment_bytes, f"Value must be at least {MIN_SEGMENT_BYTES}")
    min_lag, max_lag = config.values["min.compaction.lag.ms"], config.values["max.compaction.lag.ms"]
    if (given("min.compaction.lag.ms") or given("max.compaction.lag.ms")) and min_lag > max_lag:
        raise ConfigError("min.compaction.lag.ms", min_lag,
                          f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
                          f"max.compaction.lag.ms ({max_lag})")
    if config.remote_storage_enable:
        if remote_storage_system_enable is False:
            raise TopicConfigError(REMOTE_STORAGE_ENABLE, "true", REMOTE_STORAGE_DISABLED_IN_BROKER)
        _validate_remote_storage(config, given)
    elif current is not None and current.remote_storage_enable and not config.remote_log_delete_on_disable:
        raise TopicConfigError(REMOTE_STORAGE_ENABLE, "false", TURNING_OFF_WITHOUT_DELETE)


def _validate_remote_storage(config: LogConfig, given) -> None:
    """Kafka's ``LogConfig.validateRemoteStorageRequiresDeleteCleanupPolicy``,
    ``validateRemoteStorageRetention*`` and ``validateRetentionConfigsWhenRemoteCopyDisabled``:
    no compaction, local retention within retention (equal to it without copies)."""
    if config.compact:
        raise ConfigError(REMOTE_STORAGE_ENABLE, "true",
                          "Remote log storage is unsupported for the compacted topics")
    for local_key, key in (("local.retention.ms", "retention.ms"), ("local.retention.bytes", "retention.bytes")):
        local, total = config.values[local_key], config.values[key]
        if local == -2 or total == -1 or not (given(local_key) or given(key)):
            continue
        if local == -1:
            raise ConfigError(local_key, local, f"Value must not be -1 as {key} value is set as {total}")
        if local > total:
            raise ConfigError(local_key, local, f"Value must not be more than {key} property value: {total}")
    if config.remote_log_copy_disable:
        for local_key, key in (("local.retention.bytes", "retention.bytes"), ("local.retention.ms", "retention.ms")):
            local = config.values[local_key]
            if local != -2 and local != config.values[key]:
                raise TopicConfigError(
                    local_key, local, f"When `remote.log.copy.disable` is set to true, the `{local_key}` and "
                    f"`{key}` must be set to the identical value because there will be no more logs "
                    "copied to the remote storage.")


def topic_defaults_from_server(server_props: Mapping[str, Any]) -> dict[str, Any]:
    """Topic-level defaults from a broker's ``log.*`` keys (``log.retention.hours`` and
    ``log.retention.minutes`` included, with Kafka's precedence ms > minutes > hours)."""
    out = {topic_key: server_props[k] for k, topic_key in SERVER_DEFAULT_KEYS.items()
           if k in server_props}
    if "log.retention.ms" not in server_props:
        if "log.retention.minutes" in server_props:
            out["retention.ms"] = int(server_props["log.retention.minutes"]) * 60000
        elif "log.retention.hours" in server_props:
            out["retention.ms"] = int(server_props["log.retention.hours"]) * 3600000
    if "log.roll.ms" not in server_props and "log.roll.hours" in server_props:
        out["segment.ms"] = int(server_props["log.roll.hours"]) * 3600000
    return out


