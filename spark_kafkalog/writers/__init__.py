"""The ``kafkalog`` sink: ``df.write`` and ``df.writeStream`` to Kafka topics.

Owns the entry points the data source calls, ``make_writer(options, schema, overwrite)``
and ``make_stream_writer(options, schema, overwrite)``, which validate the options and the
input columns on the driver (so a bad query fails before any record is sent) and return a
``KafkaLogArrowWriter`` (``batch.py``) or a ``KafkaLogStreamArrowWriter`` (``stream.py``);
the shared task body and commit messages are in ``common.py``. This docstring is the
sink's user manual.

Usage::

    (df.selectExpr("CAST(id AS STRING) AS key", "payload AS value")
       .write.format("kafkalog").mode("append")
       .option("kafka.bootstrap.servers", "host:9092")
       .option("topic", "orders")
       .save())

    (stream_df.writeStream.format("kafkalog")
       .option("kafka.bootstrap.servers", "host:9092")
       .option("checkpointLocation", "/chk/orders")
       .option("kafkalog.writeBatchHeaders", "true")      # optional, see Semantics
       .start())

Input columns (the rules of Spark's Kafka sink; names are case-insensitive):

``value`` (binary or string, required; null = a tombstone)
``key`` (binary or string; null = no key)
``topic`` (string): used when the ``topic`` option is not set (the option wins); a null
    topic fails the task
``partition`` (int): the record's partition; null or no column = the producer's choice
    (murmur2 of the key, as Kafka's default partitioner, else sticky batches)
``headers`` (array<struct<key:string,value:binary>>)
``timestamp`` (timestamp): the record's CreateTime (null or no column = the send time)
Any other column is an error naming it and its type, except ``offset`` and
``timestampType``, which a DataFrame read from the ``kafkalog`` / ``kafka`` source carries
and which are ignored, so that a read DataFrame can be written to another topic as it is.

Options:

``kafka.bootstrap.servers`` (required)
    The brokers (host:port, comma-separated).
``topic``
    The topic of every row (wins over a ``topic`` column).
``kafka.*``
    Producer settings, passed through with Kafka's keys: ``kafka.acks`` (default all),
    ``kafka.enable.idempotence`` (default true), ``kafka.compression.type`` (none, gzip,
    snappy, lz4, zstd; default none), ``kafka.linger.ms`` (default 5),
    ``kafka.batch.size`` (default here 1000000, librdkafka's, not Kafka's 16384: a task
    hands over whole Arrow batches, and 1-MB record batches cost the broker and the task
    a fraction of the CPU per row of 16-KiB ones), ``kafka.buffer.memory``, ``kafka.max.request.size``,
    ``kafka.delivery.timeout.ms``, ``kafka.request.timeout.ms``, ``kafka.retries``, ...
    An unknown key is an error. As in Spark, ``kafka.key.serializer`` and
    ``kafka.value.serializer`` are refused; so is ``kafka.partitioner.class`` (use a
    ``partition`` column).
``kafkalog.writeBatchHeaders`` (default false)
    Add to every record the headers ``kafkalog.queryId`` and ``kafkalog.batchId``
    (streaming only: the micro-batch), ``kafkalog.partition`` and ``kafkalog.attempt``
    (the Spark task) and ``kafkalog.seq`` (the row's 0-based position in the task's
    input), as UTF-8 text, after the row's own headers.
``kafkalog.exactlyOnce`` (default false)
    Exactly-once (``exactly_once.py``): each task writes in a Kafka transaction left open
    for the driver, whose ``commit`` commits them all and whose ``abort`` aborts them;
    retried attempts fence earlier ones; a replayed micro-batch already committed is
    skipped. Readers with ``isolation.level=read_committed`` see each row once. Needs
    ``kafka.acks=all`` and idempotence (the defaults); ``kafka.transaction.timeout.ms``
    (default 60000) must exceed a write's or micro-batch's duration. See the exactly-once
    sink in docs/spark/writing.md.
``kafkalog.transactionalIdPrefix`` (default ``kafkalog-sink``)
    The prefix of the tasks' transactional ids (and of the streams' marker groups).
``checkpointLocation``: Spark's own (streaming).
``valueFormat`` / ``keyFormat`` (avro, protobuf, json) and the options with them
    Typed writes: the ``value`` / ``key`` column (a struct, or any type its schema takes)
    is encoded with a writer schema resolved (and registered) on the driver before any
    task starts (``spark_kafkalog.formats.write_schema``, ``formats.encode``; see "Typed
    writes" in docs/spark/formats.md).

Unreachable cluster: ``make_writer`` and ``make_stream_writer`` run on the driver
(pyspark calls ``make_stream_writer`` before each micro-batch's tasks, and again to commit
or abort it: not checked then) and check the cluster with one Metadata request
(``common.check_reachable``, bounded by ``kafka.max.block.ms``): when no bootstrap server
answers, the write fails once, from the driver, with ``no broker of X reachable (connection
refused); waited 60000 ms (kafka.max.block.ms)``, before any task starts.

Modes: batch writes append (``mode("append")``; Spark refuses the default ErrorIfExists
and Ignore for Python data sources, and ``overwrite`` is refused here: a Kafka log cannot
be overwritten). Streaming: append, and complete (every trigger appends the whole result
table, as Spark's Kafka sink does). Update mode is refused by Spark 4.x itself for every
Python data source sink; ``foreachBatch(lambda df, _: df.write.format("kafkalog")...)``
works in any mode.

Threads: in pyspark 4 a write started from a thread other than the one that created the
session fails with ``DATA_SOURCE_NOT_FOUND`` (Spark looks a write's format up in the JVM
thread's active session, which only that thread has); call
``spark_kafkalog.jobs.session.activate_session(spark)`` first in such a thread (see
docs/spark/writing.md, writing from another thread).

Semantics:

- Each Spark task runs one idempotent producer (``enable.idempotence=true``,
  ``acks=all``): within a task, producer retries never duplicate or reorder records (the
  broker deduplicates by producer id and per-partition sequence numbers), and rows reach
  each partition in the task's input order. Setting ``kafka.acks`` to 0 or 1 turns
  idempotence off (and the guarantee with it).
- A task returns only after every record it sent is acknowledged; its commit message
  (``KafkaLogCommitMessage``) lists per topic-partition the first and last offset written
  and the record count, with the producer id and epoch, the Spark partition and attempt
  (and the micro-batch id and query id). The driver logs one summary line per write /
  micro-batch (logger ``spark_kafkalog.writers``, INFO; see it with
  ``spark.sql.pyspark.worker.logging.enabled=true`` and
  ``spark.tvf.python_worker_logs()``); an abort logs at WARNING which tasks failed and
  what the finished ones had written, and a failed task's error says what its attempt had
  written.
- Without ``kafkalog.exactlyOnce``, across Spark task retries and query restarts the sink
  is **at-least-once**, like Spark's Kafka sink: a retried task, or a micro-batch re-run after a restart from its
  checkpoint, writes its rows again, and records already written are never taken back
  (there is no rollback in a log). Deduplicate downstream: on a unique key in the data;
  or with ``kafkalog.writeBatchHeaders=true`` on (``kafkalog.queryId``,
  ``kafkalog.batchId``, ``kafkalog.partition``, ``kafkalog.seq``), keeping the first
  copy, which is exact when a re-run gives each task the same rows in the same order (a
  replayable source without a shuffle before the sink); or by offsets, from the commit
  messages (a failed attempt's records precede its retry's in each partition).

Thread-safety: the factories are pure; writers are immutable and each task uses its own
copy.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .common import (
    BATCH_HEADER_KEYS,
    KafkaLogCommitMessage,
    KafkaLogWriteError,
    WriteOptions,
    WrittenRange,
    abort_summary,
    check_reachable,
    commit_summary,
    parse_write_options,
    sink_columns,
)

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from .batch import KafkaLogArrowWriter
    from .stream import KafkaLogStreamArrowWriter

__all__ = [
    "make_writer", "make_stream_writer", "KafkaLogWriteError", "KafkaLogCommitMessage",
    "WrittenRange", "WriteOptions", "BATCH_HEADER_KEYS", "commit_summary", "abort_summary",
    "parse_write_options", "sink_columns",
]


def make_writer(options: Mapping[str, str], schema: StructType, overwrite: bool) -> KafkaLogArrowWriter:
    """The batch writer for ``DataSource.writer``; raises ``KafkaLogWriteError`` for
    ``overwrite``, bad options or bad input columns."""
    from .batch import KafkaLogArrowWriter
    if overwrite:
        raise KafkaLogWriteError(
            "the kafkalog sink cannot overwrite: a Kafka log is append-only (records are "
            "never replaced or removed by a write); use .mode(\"append\") (Spark's Kafka sink needs "
            "no mode, but pyspark refuses its default, ErrorIfExists, for every Python data source "
            "before the source is called)")
    opts = parse_write_options(options)
    if opts.exactly_once:  # this save()'s id, in its tasks' transactional ids
        opts = dataclasses.replace(opts, write_id=uuid.uuid4().hex[:12])
    columns = sink_columns(schema, opts)
    check_reachable(opts)  # once, on the driver, before any task starts
    opts = _with_writer_schemas(opts, schema)  # registered before any task sends a record
    return KafkaLogArrowWriter(opts, columns)


def make_stream_writer(options: Mapping[str, str], schema: StructType,
                       overwrite: bool) -> KafkaLogStreamArrowWriter:
    """The micro-batch writer for ``DataSource.streamWriter``. ``overwrite`` is Spark's
    complete output mode: accepted, as Spark's Kafka sink does (each trigger appends the
    whole result table)."""
    from .stream import KafkaLogStreamArrowWriter
    opts = parse_write_options(options)
    columns = sink_columns(schema, opts)
    if not _to_commit_or_abort():
        check_reachable(opts)  # once per query start, on the driver, before any task starts
        opts = _with_writer_schemas(opts, schema)
    return KafkaLogStreamArrowWriter(opts, columns, complete_mode=overwrite)


def _with_writer_schemas(opts: WriteOptions, schema: StructType) -> WriteOptions:
    """``opts`` with the typed columns' writer schemas resolved (and registered, a 409
    failing the write here: ``formats.write_schema``), when valueFormat / keyFormat ask."""
    if opts.typed is None:
        return opts
    from ..formats.write_schema import TypedWriteError, resolve_typed_write
    try:
        return dataclasses.replace(opts, encoding=resolve_typed_write(opts.typed, schema, opts.topic))
    except TypedWriteError as exc:
        raise KafkaLogWriteError(str(exc)) from None


def _to_commit_or_abort() -> bool:
    """True when pyspark re-creates the stream writer only to call its ``commit`` or
    ``abort`` (its ``python_streaming_sink_runner`` worker, once per micro-batch): the
    query's start already checked the brokers, and a micro-batch's commit must not depend
    on an extra round trip."""
    import sys
    from types import FrameType

    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith("python_streaming_sink_runner.py"):
            return True
        frame = frame.f_back
    return False
