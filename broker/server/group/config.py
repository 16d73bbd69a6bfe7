"""The group coordinator's configuration: its keys (Kafka's names, defaults and
documentation) and ``GroupConfig``, the typed, frozen view the coordinator and its parts
take.

Owns the definitions of the classic group keys (``group.initial.rebalance.delay.ms``,
``group.{min,max}.session.timeout.ms``, ``group.max.size``), the KIP-848 consumer group keys
(``group.consumer.*``, ``group.coordinator.rebalance.protocols``) and the offsets keys
(``offsets.*``, ``offset.metadata.max.bytes``). ``define_group_keys`` adds them to the
broker's table (``broker.server.config.SERVER_CONFIG_DEF``); ``GroupConfig.from_config``
reads a parsed server config once, so no part re-reads a key with its own default.

Imports only ``broker.config``. Thread-safety: definitions are immutable after import; a
``GroupConfig`` is frozen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker.config import INT, LIST, LONG, ConfigDef, ConfigError, at_least, between

CLASSIC, CONSUMER = "classic", "consumer"
ASSIGNOR_NAMES = ("uniform", "range")


def _known_rebalance_protocols(key: str, value: Any) -> None:
    unknown = [p for p in value or () if p not in (CLASSIC, CONSUMER)]
    if unknown or CLASSIC not in (value or ()):
        raise ConfigError(key, value, "the protocols are classic (always) and consumer")


def _known_assignors(name: str, value: Any) -> None:
    unknown = [v for v in value or () if v not in ASSIGNOR_NAMES]
    if not value or unknown:
        raise ConfigError(name, value, "the assignors are uniform and range")


def define_group_keys(config_def: ConfigDef) -> ConfigDef:
    """Add the group coordinator's keys to ``config_def``."""
    return (
        config_def
        # Classic consumer groups (membership.py)
        .define("group.initial.rebalance.delay.ms", INT, 3000,
                "The amount of time the group coordinator will wait for more consumers to join a new "
                "group before performing the first rebalance.", at_least(0))
        .define("group.min.session.timeout.ms", INT, 6000,
                "The minimum allowed session timeout for registered consumers.", at_least(0))
        .define("group.max.session.timeout.ms", INT, 1800000,
                "The maximum allowed session timeout for registered consumers.", at_least(0))
        .define("group.max.size", INT, 2147483647,
                "The maximum number of consumers that a single consumer group can accommodate.", at_least(1))
        # KIP-848 consumer groups (consumer_membership.py)
        .define("group.consumer.heartbeat.interval.ms", INT, 5000,
                "The heartbeat interval given to the members of a consumer group.", at_least(1))
        .define("group.consumer.session.timeout.ms", INT, 45000,
                "The timeout to detect client failures when using the consumer group protocol.", at_least(1))
        .define("group.consumer.max.size", INT, 2147483647,
                "The maximum number of consumers that a single consumer group can accommodate.", at_least(1))
        .define("group.coordinator.rebalance.protocols", LIST, [CLASSIC, CONSUMER],
                "The group protocols served: classic (JoinGroup/SyncGroup) and consumer (KIP-848, "
                "ConsumerGroupHeartbeat); without consumer its APIs are not advertised.",
                _known_rebalance_protocols)
        .define("group.consumer.assignors", LIST, list(ASSIGNOR_NAMES),
                "The server side assignors as a list of names (uniform, range); the first one is used "
                "by default.", _known_assignors)
        # The offsets topic (coordinator.py, over broker.server.coordinator)
        .define("offsets.topic.replication.factor", INT, 1, "Always 1 on a single node.")
        .define("offsets.topic.num.partitions", INT, 50,
                "The number of partitions for the offset commit topic (should not change after "
                "deployment: an existing __consumer_offsets keeps its own count).", at_least(1))
        .define("offsets.topic.segment.bytes", INT, 104857600,
                "The offsets topic segment bytes should be kept relatively small in order to "
                "facilitate faster log compaction and cache loads.", at_least(14))
        .define("offsets.topic.compression.codec", INT, 0,
                "Compression codec for the offsets topic (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd); "
                "each commit is one batch, hence atomic.", between(0, 4))
        .define("offsets.load.buffer.size", INT, 5242880,
                "Batch size for reading from the offsets segments when loading offsets into the "
                "cache (soft-limit, overridden if records are too large).", at_least(1))
        .define("offsets.retention.minutes", INT, 10080,
                "Offsets of a standalone (assign()) consumer expire this long after their last "
                "commit; those of a group with a protocol this long after it became empty.",
                at_least(1))
        .define("offsets.retention.check.interval.ms", LONG, 600000,
                "Frequency at which to check for stale offsets.", at_least(1))
        .define("offset.metadata.max.bytes", INT, 4096,
                "The maximum size for a metadata entry associated with an offset commit.")
        .define("offsets.commit.timeout.ms", INT, 5000,
                "Accepted for compatibility: with one replica a commit is answered as soon as its "
                "append returns (Kafka waits up to this for the offsets topic's replicas).", at_least(1))
    )


GROUP_CONFIG_DEF = define_group_keys(ConfigDef())


@dataclass(frozen=True)
class GroupConfig:
    """The group coordinator's settings, read once from a parsed server config."""

    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_group_size: int = 2147483647
    consumer_heartbeat_interval_ms: int = 5000
    consumer_session_timeout_ms: int = 45000
    consumer_max_size: int = 2147483647
    rebalance_protocols: tuple[str, ...] = (CLASSIC, CONSUMER)
    consumer_assignors: tuple[str, ...] = ASSIGNOR_NAMES
    offsets_retention_ms: int = 10080 * 60_000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> GroupConfig:
        """From a server config (parsed or raw: each key is parsed and validated by its
        definition; a missing key takes its default)."""
        v = GROUP_CONFIG_DEF.parse({k: config[k] for k in GROUP_CONFIG_DEF.keys if k in config})
        return cls(
            initial_rebalance_delay_ms=v["group.initial.rebalance.delay.ms"],
            min_session_timeout_ms=v["group.min.session.timeout.ms"],
            max_session_timeout_ms=v["group.max.session.timeout.ms"],
            max_group_size=v["group.max.size"],
            consumer_heartbeat_interval_ms=v["group.consumer.heartbeat.interval.ms"],
            consumer_session_timeout_ms=v["group.consumer.session.timeout.ms"],
            consumer_max_size=v["group.consumer.max.size"],
            rebalance_protocols=tuple(v["group.coordinator.rebalance.protocols"]),
            consumer_assignors=tuple(n.strip() for n in v["group.consumer.assignors"] if n.strip()),
            offsets_retention_ms=v["offsets.retention.minutes"] * 60_000,
            offsets_retention_check_interval_ms=v["offsets.retention.check.interval.ms"],
            offset_metadata_max_bytes=v["offset.metadata.max.bytes"],
        )
