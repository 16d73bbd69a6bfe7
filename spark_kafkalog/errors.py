"""Data loss: the error and the reporting every read path shares (driver and executors).

Owns: ``TopicPartition`` (``(topic, partition)``, the key type of every offset map),
``KafkaDataLossError`` (Spark's KAFKA_DATA_LOSS: offsets a read needs are not in the log
any more) and the two ways a loss is reported: ``report_data_loss`` (the lost offsets
[from, to) of one partition) and ``report_data_loss_message`` (a loss without an offset
range: a partition gone, a partition added late, offsets moved backwards), plus
``format_partition`` / ``format_partitions`` (Kafka's ``topic-partition`` spelling used in
the messages).

Who reports: the planner on the driver (``planning.check_range``, ``planning.stream_ranges``)
and the executors' range readers (``readers.direct``, ``readers.network``), when the log
moved on between planning and reading. This module is the only part of the source the
executors need for that: it imports nothing of the package and nothing heavy, so a task
never loads the planner (``planning.py``) or Spark's filter classes.

Invariants: with ``fail`` (the ``failOnDataLoss`` option) a loss raises
``KafkaDataLossError`` whose message is Spark's instruction followed by ``Reason:`` and what
was lost (partition and offsets where known); without it the same reason is logged as a
warning on the ``spark_kafkalog`` logger and the caller goes on with what remains. An
empty range (``from >= to``) is no loss and reports nothing.

Thread-safety: pure functions (logging is thread-safe).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

__all__ = [
    "TopicPartition", "KafkaDataLossError", "DATA_LOSS_INSTRUCTION", "report_data_loss",
    "report_data_loss_message", "format_partition", "format_partitions",
]

log = logging.getLogger("spark_kafkalog")

TopicPartition = tuple[str, int]

DATA_LOSS_INSTRUCTION = (
    "Some data may have been lost because they are not available in Kafka any more; either the "
    "data was aged out by Kafka or the topic may have been deleted before all the data in the "
    "topic was processed. If you don't want your query to fail on such cases, set the source "
    "option failOnDataLoss to false.")


class KafkaDataLossError(RuntimeError):
    """Offsets of the requested range are not in the log (KAFKA_DATA_LOSS)."""


def format_partition(tp: TopicPartition) -> str:
    """``topic-partition``, as Kafka's ``TopicPartition.toString``."""
    return f"{tp[0]}-{tp[1]}"


def format_partitions(tps: Iterable[TopicPartition]) -> str:
    """``{a-0, a-1, b-0}``: the partitions sorted."""
    return "{" + ", ".join(format_partition(tp) for tp in sorted(tps)) + "}"


def report_data_loss(tp: TopicPartition, lost_from: int, lost_to: int, why: str, fail: bool) -> None:
    """Lost offsets [lost_from, lost_to) of ``tp``: raise ``KafkaDataLossError`` when
    ``fail``, else log a warning."""
    if lost_from >= lost_to:
        return
    reason = (f"Could not read records in offset [{lost_from}, {lost_to}) for topic partition "
              f"{format_partition(tp)}: {why}.")
    if fail:
        raise KafkaDataLossError(f"{DATA_LOSS_INSTRUCTION} Reason: {reason}")
    log.warning("%s Some data may have been lost; failOnDataLoss=false: the records in "
                "[%d, %d) of %s are skipped.", reason, lost_from, lost_to, format_partition(tp))


def report_data_loss_message(reason: str, fail: bool) -> None:
    """A loss told by ``reason`` alone (Spark's ``reportDataLoss``): raise
    ``KafkaDataLossError`` when ``fail``, else log a warning."""
    if fail:
        raise KafkaDataLossError(f"{DATA_LOSS_INSTRUCTION} Reason: {reason}")
    log.warning("%s failOnDataLoss=false: the query goes on.", reason)
