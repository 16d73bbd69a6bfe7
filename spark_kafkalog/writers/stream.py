"""The streaming sink: ``df.writeStream.format("kafkalog")`` (micro-batch queries).

Owns ``KafkaLogStreamArrowWriter`` (a ``DataSourceStreamArrowWriter``). Each micro-batch's
tasks run ``common.write_task`` with the micro-batch id and query id read from the task's
local properties (``streaming.sql.batchId``, ``sql.streaming.queryId``); with
``kafkalog.writeBatchHeaders=true`` every record carries them as headers (plus the Spark
partition, attempt and the row's position in the task), so that a consumer can drop the
records of a replayed micro-batch exactly. ``commit(messages, batchId)`` /
``abort(messages, batchId)`` log one line per micro-batch on the driver.

Output modes: append; complete (Spark hands the writer ``overwrite=True``; as Spark's Kafka
sink does, every trigger appends the whole result table, since a log cannot be truncated).
Update mode is refused by Spark 4.x itself for every Python data source ("does not support
Update mode": its ``PythonWriteBuilder`` lacks ``SupportsStreamingUpdateAsAppend``); use
``foreachBatch`` with ``df.write.format("kafkalog")`` meanwhile.

Invariants: as ``batch.py``; a micro-batch re-run after a restart writes its rows again
with the same batch id (at-least-once), which is what the batch headers identify. With
``kafkalog.exactlyOnce``, ``commit`` / ``abort`` complete the micro-batch's task
transactions and a re-run skips the Spark partitions whose transaction had committed
(``exactly_once.py``).

Thread-safety: as ``batch.py``: immutable; Spark re-creates the writer from the pickled
data source for each commit.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

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

__all__ = ["KafkaLogStreamArrowWriter"]


class KafkaLogStreamArrowWriter(DataSourceStreamArrowWriter):
    """Writes each micro-batch's rows as records (see the module docstring)."""

    def __init__(self, options: WriteOptions, columns: SinkColumns, complete_mode: bool = False) -> None:
        self.options = options
        self.columns = columns
        self.complete_mode = complete_mode

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaLogCommitMessage:
        if self.options.exactly_once:
            from .exactly_once import write_task_transactional
            return write_task_transactional(self.options, self.columns, iterator, streaming=True)
        return write_task(self.options, self.columns, iterator, streaming=True)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.options.exactly_once:
            from .exactly_once import commit_transactions
            log.info(commit_transactions(self.options, sink_messages(messages), batchId))
            return
        log.info(commit_summary(sink_messages(messages), batchId))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.options.exactly_once:
            from .exactly_once import abort_transactions
            log.warning(abort_transactions(self.options, sink_messages(messages), batchId))
            return
        log.warning(abort_summary(sink_messages(messages), batchId))
