"""The share groups' broker configuration (KIP-932): Kafka's ``group.share.*`` keys of the
group coordinator and the share-partition manager, and the ``share.coordinator.*`` keys
of the share coordinator and its topic ``__share_group_state``, with Kafka's names,
defaults and bounds; and ``ShareConfig``, the frozen view the share parts take.

The per-group overrides (``share.record.lock.duration.ms``, ``share.auto.offset.reset``
...) are the GROUP config resource's (``broker.server.group.group_configs``); the broker
keys here are their defaults and bounds.

Imports only ``broker.config``. Thread-safety: definitions are immutable after import; a
``ShareConfig`` is frozen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker.config import INT, ConfigDef, at_least, between


def define_share_keys(config_def: ConfigDef) -> ConfigDef:
    """Add the share groups' keys to ``config_def``."""
    return (
        config_def
        # membership (the group coordinator's share part)
        .define("group.share.session.timeout.ms", INT, 45000,
                "The timeout to detect client failures when using the share group protocol.", at_least(1))
        .define("group.share.min.session.timeout.ms", INT, 45000,
                "The minimum allowed session timeout for share group members.", at_least(1))
        .define("group.share.max.session.timeout.ms", INT, 60000,
                "The maximum allowed session timeout for share group members.", at_least(1))
        .define("group.share.heartbeat.interval.ms", INT, 5000,
                "The heartbeat interval given to the members of a share group.", at_least(1))
        .define("group.share.min.heartbeat.interval.ms", INT, 5000,
                "The minimum heartbeat interval for share group members.", at_least(1))
        .define("group.share.max.heartbeat.interval.ms", INT, 15000,
                "The maximum heartbeat interval for share group members.", at_least(1))
        .define("group.share.max.size", INT, 200,
                "The maximum number of members that a single share group can accommodate.", between(1, 1000))
        # share-partitions (the share-partition manager)
        .define("group.share.record.lock.duration.ms", INT, 30000,
                "The record acquisition lock duration in milliseconds for share groups.", between(1000, 3600000))
        .define("group.share.min.record.lock.duration.ms", INT, 15000,
                "The record acquisition lock minimum duration in milliseconds for share groups.",
                between(1000, 30000))
        .define("group.share.max.record.lock.duration.ms", INT, 60000,
                "The record acquisition lock maximum duration in milliseconds for share groups.",
                between(30000, 3600000))
        .define("group.share.delivery.count.limit", INT, 5,
                "The maximum number of delivery attempts for a record delivered to a share group.",
                between(2, 10))
        .define("group.share.partition.max.record.locks", INT, 2000,
                "Share-group record lock limit per share-partition: the records in flight "
                "(between the share-partition start and end offsets).", between(100, 10000))
        .define("group.share.max.share.sessions", INT, 2000,
                "The maximum number of share sessions per broker.", at_least(1))
        # the share coordinator and __share_group_state
        .define("share.coordinator.state.topic.num.partitions", INT, 50,
                "The number of partitions for the share-group state topic (should not change after "
                "deployment: an existing __share_group_state keeps its own count).", at_least(1))
        .define("share.coordinator.state.topic.replication.factor", INT, 1, "Always 1 on a single node.")
        .define("share.coordinator.state.topic.min.isr", INT, 1, "Always 1 on a single node.")
        .define("share.coordinator.state.topic.segment.bytes", INT, 104857600,
                "The log segment size for the share-group state topic.", at_least(14))
        .define("share.coordinator.state.topic.compression.codec", INT, 0,
                "Compression codec for the share-group state topic (0 none, 1 gzip, 2 snappy, 3 lz4, "
                "4 zstd).", between(0, 4))
        .define("share.coordinator.load.buffer.size", INT, 5242880,
                "Batch size for reading from the share-group state topic when loading state into the "
                "cache.", at_least(1))
        .define("share.coordinator.snapshot.update.records.per.snapshot", INT, 500,
                "The number of ShareUpdate records a share-partition gets before a ShareSnapshot "
                "replaces them.", between(0, 500))
    )


SHARE_CONFIG_DEF = define_share_keys(ConfigDef())


@dataclass(frozen=True)
class ShareConfig:
    """The share keys, typed (module docstring)."""

    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 200
    record_lock_duration_ms: int = 30000
    min_record_lock_duration_ms: int = 15000
    max_record_lock_duration_ms: int = 60000
    delivery_count_limit: int = 5
    partition_max_record_locks: int = 2000
    max_share_sessions: int = 2000
    updates_per_snapshot: int = 500

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ShareConfig:
        values = SHARE_CONFIG_DEF.parse_from(config)
        return cls(
            session_timeout_ms=values["group.share.session.timeout.ms"],
            heartbeat_interval_ms=values["group.share.heartbeat.interval.ms"],
            max_size=values["group.share.max.size"],
            record_lock_duration_ms=values["group.share.record.lock.duration.ms"],
            min_record_lock_duration_ms=values["group.share.min.record.lock.duration.ms"],
            max_record_lock_duration_ms=values["group.share.max.record.lock.duration.ms"],
            delivery_count_limit=values["group.share.delivery.count.limit"],
            partition_max_record_locks=values["group.share.partition.max.record.locks"],
            max_share_sessions=values["group.share.max.share.sessions"],
            updates_per_snapshot=values["share.coordinator.snapshot.update.records.per.snapshot"],
        )


__all__ = ["SHARE_CONFIG_DEF", "ShareConfig", "define_share_keys"]
