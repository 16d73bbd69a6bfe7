"""The batch sink: ``df.write.format("kafkalog")``.

Owns ``KafkaLogArrowWriter`` (a ``DataSourceArrowWriter``): created on the driver by
``make_writer`` with the options and the input schema already validated, pickled to the
executors, where ``write`` runs ``common.write_task`` on the task's Arrow batches; its
``commit`` / ``abort`` run on the driver with the tasks' ``KafkaLogCommitMessage``s and log
one line (logger ``spark_kafkalog.writers``: INFO for a commit, WARNING for an abort).

Invariants: only append is possible (Spark's ``overwrite`` is refused in ``make_writer``,
before any task runs, since a Kafka log cannot be overwritten); ``write`` returns only
after every row it was given is acknowledged; ``commit`` and ``abort`` never touch the
brokers (what is written is written: a Kafka log has no rollback), except with
``kafkalog.exactlyOnce``, where they commit or abort the tasks' transactions
(``exactly_once.py``; ``make_writer`` then draws the write's id for the transactional ids).

Thread-safety: a writer object is immutable after construction; each task works on its own
unpickled copy.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from .common import (
    KafkaLogCommitMessage,
    SinkColumns,
    WriteOptions,
    abort_summary,
    commit_summary,
    log,
    sink_messages,
    write_task,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["KafkaLogArrowWriter"]


class KafkaLogArrowWriter(DataSourceArrowWriter):
    """Writes a DataFrame's rows as records (see ``spark_kafkalog.writers`` for the
    contract and the delivery semantics: at-least-once across Spark task retries, no
    duplicates or reordering from producer retries within a task)."""

    def __init__(self, options: WriteOptions, columns: SinkColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaLogCommitMessage:
        if self.options.exactly_once:
            from .exactly_once import write_task_transactional
            return write_task_transactional(self.options, self.columns, iterator, streaming=False)
        return write_task(self.options, self.columns, iterator, streaming=False)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.options.exactly_once:
            from .exactly_once import commit_transactions
            log.info(commit_transactions(self.options, sink_messages(messages)))
            return
        log.info(commit_summary(sink_messages(messages)))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.options.exactly_once:
            from .exactly_once import abort_transactions
            log.warning(abort_transactions(self.options, sink_messages(messages)))
            return
        log.warning(abort_summary(sink_messages(messages)))
