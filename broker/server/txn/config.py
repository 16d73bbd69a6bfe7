"""The transaction coordinator's broker keys (Kafka's names, defaults and documentation)
and ``TransactionConfig``, their typed, frozen view.

Owns the definitions of the ``transaction.state.log.*`` keys (the ``__transaction_state``
topic: partitions, segment bytes, load buffer; replication and min ISR, always 1 on a single
node), the coordinator's timeouts and cleanup intervals (``transaction.max.timeout.ms``,
``transactional.id.expiration.ms``, ``transaction.*.cleanup.interval.ms``), the
``transaction.version`` feature level this broker finalizes
(``kafkalog.feature.transaction.version``) and the retry interval of markers that failed
(``kafkalog.transaction.marker.retry.interval.ms``). ``define_transaction_keys`` adds them
to the broker's table (``broker.server.config.SERVER_CONFIG_DEF``);
``TransactionConfig.from_config`` reads them once from a server config for
``TransactionCoordinator`` (the topic's keys are read by the coordinator runtime's
``InternalTopicSpec`` by their names).

Invariants: the dataclass defaults equal the definitions' defaults. Imports only
``broker.config``. Thread-safety: the table is immutable after import; a
``TransactionConfig`` is frozen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker.config import INT, ConfigDef, at_least, between


def define_transaction_keys(config_def: ConfigDef) -> ConfigDef:
    """Add the transaction coordinator's keys to ``config_def``."""
    return (
        config_def
        .define("transaction.state.log.replication.factor", INT, 1, "Always 1 on a single node.")
        .define("transaction.state.log.min.isr", INT, 1, "Always 1 on a single node.")
        .define("transaction.state.log.num.partitions", INT, 50,
                "The number of partitions for the transaction topic (should not change after deployment).",
                at_least(1))
        .define("transaction.state.log.segment.bytes", INT, 104857600,
                "The transaction topic segment bytes.", at_least(1))
        .define("transaction.state.log.load.buffer.size", INT, 5242880,
                "Batch size for reading from the transaction log segments when loading producer ids "
                "and transactions into the cache.", at_least(1))
        .define("transaction.max.timeout.ms", INT, 900000,
                "The maximum allowed timeout for transactions; a larger transaction.timeout.ms in "
                "InitProducerId gets INVALID_TRANSACTION_TIMEOUT.", at_least(1))
        .define("transactional.id.expiration.ms", INT, 604800000,
                "How long a transactional id without any transaction status update is kept.", at_least(1))
        .define("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10000,
                "The interval at which to roll back transactions that have timed out.", at_least(1))
        .define("transaction.remove.expired.transaction.cleanup.interval.ms", INT, 3600000,
                "The interval at which to remove transactions that have expired "
                "(transactional.id.expiration.ms passing).", at_least(1))
        .define("kafkalog.feature.transaction.version", INT, 2,
                "The transaction.version feature level finalized in ApiVersions (Kafka sets it with "
                "kafka-features.sh): 2 lets Kafka 4 clients use transaction version 2 (KIP-890 part 2).",
                between(0, 2))
        .define("kafkalog.transaction.marker.retry.interval.ms", INT, 1000,
                "How often the markers of a decided transaction are retried after writing them failed.",
                at_least(1))
    )


TRANSACTION_CONFIG_DEF = define_transaction_keys(ConfigDef())


@dataclass(frozen=True)
class TransactionConfig:
    """The transaction coordinator's settings, read once from a server config."""

    max_timeout_ms: int = 900000
    id_expiration_ms: int = 604800000
    abort_interval_ms: int = 10000
    expire_interval_ms: int = 3600000
    transaction_version: int = 2
    marker_retry_interval_ms: int = 1000
    state_log_num_partitions: int = 50
    state_log_segment_bytes: int = 104857600
    state_log_load_buffer_size: int = 5242880

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> TransactionConfig:
        """From a server config (raw or parsed: each key parsed and validated by its
        definition; a missing key takes its default)."""
        v = TRANSACTION_CONFIG_DEF.parse_from(config)
        return cls(
            max_timeout_ms=v["transaction.max.timeout.ms"],
            id_expiration_ms=v["transactional.id.expiration.ms"],
            abort_interval_ms=v["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
            expire_interval_ms=v["transaction.remove.expired.transaction.cleanup.interval.ms"],
            transaction_version=v["kafkalog.feature.transaction.version"],
            marker_retry_interval_ms=v["kafkalog.transaction.marker.retry.interval.ms"],
            state_log_num_partitions=v["transaction.state.log.num.partitions"],
            state_log_segment_bytes=v["transaction.state.log.segment.bytes"],
            state_log_load_buffer_size=v["transaction.state.log.load.buffer.size"],
        )
