"""The log manager's broker keys (Kafka's names, defaults and documentation) and
``LogManagerConfig``, their typed, frozen view.

Owns the definitions of the keys of ``broker/log/manager.py``'s background tasks:
``log.retention.check.interval.ms``, ``log.flush.scheduler.interval.ms``,
``log.flush.offset.checkpoint.interval.ms``,
``log.flush.start.offset.checkpoint.interval.ms`` and ``producer.id.expiration.ms``.
``define_log_manager_keys`` adds them to the broker's table
(``broker.server.config.SERVER_CONFIG_DEF``); ``LogManagerConfig.from_config`` reads them
once from a server config, so that ``LogManager.from_server_config`` never re-reads a key
with a default of its own. The log directories, node.id and cluster.id are core keys
(``broker.config.BrokerConfig``); the broker-wide defaults of topic keys (log.segment.bytes,
log.retention.hours ...) are ``broker/log/config.py``'s.

Invariants: the dataclass defaults equal the definitions' defaults. Imports only
``broker.config``. Thread-safety: the table is immutable after import; a
``LogManagerConfig`` is frozen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker.config import INT, LONG, LONG_MAX, ConfigDef, at_least


def define_log_manager_keys(config_def: ConfigDef) -> ConfigDef:
    """Add the log manager's keys to ``config_def``."""
    return (
        config_def
        .define("log.retention.check.interval.ms", LONG, 300000,
                "How often retention is enforced.", at_least(1))
        .define("log.flush.scheduler.interval.ms", LONG, LONG_MAX,
                "How often the flush.ms policy is checked.", at_least(1))
        .define("log.flush.offset.checkpoint.interval.ms", INT, 60000,
                "How often recovery points are checkpointed.", at_least(0))
        .define("log.flush.start.offset.checkpoint.interval.ms", INT, 60000,
                "How often log start offsets are checkpointed.", at_least(0))
        .define("producer.id.expiration.ms", INT, 86400000,
                "Forget an idle producer's state after this.", at_least(1))
    )


LOG_MANAGER_CONFIG_DEF = define_log_manager_keys(ConfigDef())


@dataclass(frozen=True)
class LogManagerConfig:
    """The intervals of the log manager's background tasks."""

    retention_check_interval_ms: int = 300000
    flush_check_ms: int = LONG_MAX
    flush_recovery_offset_checkpoint_ms: int = 60000
    flush_start_offset_checkpoint_ms: int = 60000
    producer_id_expiration_ms: int = 86400000

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> LogManagerConfig:
        """From a server config (raw or parsed: each key parsed and validated by its
        definition; a missing key takes its default)."""
        v = LOG_MANAGER_CONFIG_DEF.parse_from(config)
        return cls(
            retention_check_interval_ms=v["log.retention.check.interval.ms"],
            flush_check_ms=v["log.flush.scheduler.interval.ms"],
            flush_recovery_offset_checkpoint_ms=v["log.flush.offset.checkpoint.interval.ms"],
            flush_start_offset_checkpoint_ms=v["log.flush.start.offset.checkpoint.interval.ms"],
            producer_id_expiration_ms=v["producer.id.expiration.ms"],
        )
