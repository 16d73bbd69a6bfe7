"""The ``kafkalog`` Spark data source; the class docstring below is its user manual.

Owns: ``KafkaLogDataSource`` (name, schema, reader choice) and the detection of pyspark's
filter-pushdown planner (see ``readers/batch.py`` for why it matters).

Invariants: options are validated at ``load()`` (``schema()``) and again when the read is
planned; a user-given schema other than the fixed one is refused.

Thread-safety: a data source object is created per query, pickled to the planning
worker, and never shared.
"""

from __future__ import annotations

import sys

from pyspark.sql.datasource import DataSource, DataSourceReader

__all__ = ["KafkaLogDataSource"]

# The module pyspark runs to push filters into a Python data source (pyspark >= 4.1). Spark
# starts it only when spark.sql.python.filterPushdown.enabled is true.
_PUSHDOWN_PLANNER = "data_source_pushdown_filters"


def _planning_with_filter_pushdown() -> bool:
    """Whether the caller is pyspark's filter-pushdown planner (its ``_main`` is on the
    stack, whether it runs as a module of the daemon or as ``__main__``)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith(_PUSHDOWN_PLANNER + ".py"):
            return True
        frame = frame.f_back
    return False


class KafkaLogDataSource(DataSource):
    """``spark.read.format("kafkalog")``: Kafka topics as a DataFrame, with the options
    and the row schema of Spark's own Kafka source, read straight from a Kafka log
    directory (direct mode) or from brokers (network mode).

    Registration: installing the ``spark-kafkalog`` distribution installs the top-level
    module ``pyspark_kafkalog``, which pyspark finds on its own (``DefaultSource``), so
    ``spark.read.format("kafkalog")`` works with no extra call; ``spark_kafkalog.register(spark)``
    registers it explicitly (e.g. when the package is only on ``sys.path``).

    Example::

        df = (spark.read.format("kafkalog")
              .option("subscribe", "orders")
              .option("startingOffsets", "earliest")
              .load("/var/lib/kafka/data"))            # a log dir, a copy or a backup
        df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")

    Schema (fixed; every field nullable; exactly Spark's Kafka source)::

        key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT,
        timestamp TIMESTAMP, timestampType INT
        [, headers ARRAY<STRUCT<key: STRING, value: BINARY>>]   with includeHeaders=true

    ``timestamp`` is the record's (CreateTime) or its batch's (LogAppendTime, then
    ``timestampType`` = 1) milliseconds; ``headers`` is null, not empty, for a record
    without headers; key and value are null when the producer sent null. Control records
    (transaction markers) and records of aborted transactions never appear.

    Where to read (exactly one):

    ``path`` (or ``.load(path)``; ``.load([dir1, dir2])`` for a broker with several
    ``log.dirs``)
        Direct mode: a Kafka log directory (a ``log.dirs`` entry: the directory holding
        ``<topic>-<partition>`` directories; a local path or a ``file:`` URI). The
        executors read the segment files themselves, through the offset and time indexes,
        and decode whole regions of batches column-wise into Arrow; no broker is needed,
        the files are only read (never created, recovered or locked), so a live broker's
        directory, a copy or a backup all work (a torn last batch of a copy taken while
        the broker wrote is left out, as Kafka's recovery would). Every executor must see
        the directory at the same path (local mode, a shared or mounted file system).
        Topic names are the directory names. Transactions: records of aborted
        transactions are left out (from the ``.txnindex`` files) and records of
        transactions still open when the files are read are included;
        ``kafka.isolation.level`` applies to network mode only.
    ``kafka.bootstrap.servers``
        Network mode: the driver plans with Metadata and ListOffsets and the executors
        fetch their ranges from the partition leaders (Fetch v4-11, one request kept in
        flight while the previous response is decoded), from this project's broker or
        any Kafka cluster. ``kafka.isolation.level=read_committed`` leaves out aborted
        transactions and stops at the last stable offset; other ``kafka.*`` keys are
        Kafka consumer settings (``kafka.max.partition.fetch.bytes`` defaults to 8 MiB
        here: bigger responses decode faster; ``kafka.default.api.timeout.ms`` bounds
        how long an unreachable cluster is retried).

    Which partitions (exactly one, as in Spark):

    ``assign``
        JSON ``{"topicA":[0,1],"topicB":[2,4]}``: these partitions (each must exist).
    ``subscribe``
        Comma-separated topics: all their partitions (a topic that does not exist is
        read as empty, with a warning).
    ``subscribePattern``
        A regular expression (Python ``re``, matched against the whole topic name):
        all partitions of the matching topics; Kafka's internal topics
        (``__consumer_offsets``, ``__transaction_state``) only with
        ``kafka.exclude.internal.topics=false``.

    Which offsets (per partition the rows with offsets in [start, end)):

    ``startingOffsets`` (default ``earliest``)
        ``earliest`` (the log start offset) or JSON
        ``{"topicA":{"0":23,"1":-2},"topicB":{"0":-2}}`` naming every assigned partition
        (-2 = earliest). ``latest`` and -1 are refused in batch queries, as in Spark.
    ``endingOffsets`` (default ``latest``)
        ``latest`` (the log end offset when the query is planned) or JSON (-1 = latest);
        ``earliest`` and -2 are refused.
    ``startingTimestamp`` / ``endingTimestamp``
        Milliseconds since the epoch, for every partition: the bound is the first offset
        whose record timestamp is >= it (Kafka's ListOffsets, through the time index).
    ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp``
        The same per partition: JSON ``{"topicA":{"0":1700000000000,"1":...}}`` naming
        every assigned partition.
    Precedence for each bound: timestamp > offsetsByTimestamp > offsets. A timestamp
    matching no record: an ending bound becomes latest; a starting bound follows
    ``startingOffsetsByTimestampStrategy``: ``error`` (default: the query fails) or
    ``latest``.

    Lost data:

    ``failOnDataLoss`` (default ``true``)
        When requested offsets are not in the log (below its log start offset: deleted by
        retention or DeleteRecords; above its end; or gone while the query ran): with
        ``true`` the query fails with an error naming the partition and the lost range;
        with ``false`` it logs a warning and returns the remaining rows.

    Parallelism (one Spark task per range, planned on the driver, deterministic):

    ``minPartitions``
        Split large ranges so that there are at least about this many tasks (Spark's
        KafkaOffsetRangeCalculator: pieces in proportion to each range's size).
    ``maxRecordsPerPartition``
        Split every range into pieces of at most this many offsets (applied first).

    ``includeHeaders`` (default ``false``)
        Add the ``headers`` column.

    ``maxBytesPerBatch`` (default 16 MiB, this source's own)
        Record bytes decoded into one Arrow batch in direct mode; an executor task holds
        about four times this at its peak, whatever the size of the topic.

    ``kafka.*``
        Kafka consumer configuration for network mode (ignored in direct mode, apart from
        ``kafka.exclude.internal.topics``). As in Spark, ``kafka.auto.offset.reset``,
        ``kafka.key.deserializer``, ``kafka.value.deserializer``,
        ``kafka.enable.auto.commit`` and ``kafka.interceptor.classes`` are refused, and
        ``kafka.group.id`` gets a warning.

    Accepted for compatibility with Spark's Kafka source: ``kafkaConsumer.pollTimeoutMs``,
    ``fetchOffset.numRetries``, ``fetchOffset.retryIntervalMs``, ``groupIdPrefix``
    (validated, used by network mode only) and the streaming-only
    ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``, ``maxTriggerDelay`` (ignored in a
    batch query, with a warning, as Spark does). Any other option is an error that names
    it and lists the valid ones. Option names are case-insensitive.

    Filter pushdown (beyond Spark's Kafka source; pyspark >= 4.1 with
    ``spark.sql.python.filterPushdown.enabled=true``): filters on ``topic`` (=, IN, <>),
    ``partition`` (=, IN, <>, <, <=, >, >=), ``offset`` (=, IN, <, <=, >, >=) and
    ``timestamp`` (=, IN, <, <=, >, >=), and IS [NOT] NULL on them, are taken over by the
    source: partitions and offset ranges outside them are not read at all, a lower bound
    on ``timestamp`` starts each partition at the first offset with a timestamp at or
    above it (time index), and every accepted filter is then applied to the rows exactly,
    so results never depend on the setting. Without the setting the source works the
    same, reading the planned ranges in full.

    When offsets are resolved: when a DataFrame is first planned (its first action), on
    the driver; pyspark then keeps that plan with the DataFrame that ``load()`` returned,
    so running it again reads the same offsets (``load()`` again to see newer records).
    A consequence of pyspark 4.3 to know when filter pushdown is on: a query on that
    DataFrame without any pushable filter (or run with the setting off) reuses the plan
    of the last query whose filters were pushed, and so reads only what that query
    selected. Call ``load()`` for each filtered query (cheap: nothing is read before an
    action) until pyspark keeps pushed-down plans per query.

    Writing (``df.write.format("kafkalog").mode("append")``, ``df.writeStream``): options
    ``kafka.bootstrap.servers``, ``topic``, ``kafka.*``, ``kafkalog.writeBatchHeaders``;
    at-least-once across Spark task retries, no duplicates from producer retries; the
    sink's manual is ``spark_kafkalog.writers``' docstring.
    """

    @classmethod
    def name(cls) -> str:
        return "kafkalog"

    def schema(self):
        from .options import parse_options
        from .schema import kafka_schema
        return kafka_schema(parse_options(self.options).include_headers)

    def reader(self, schema) -> DataSourceReader:
        from .options import KafkaLogOptionError, parse_options
        from .readers.batch import KafkaLogBatchReader, KafkaLogPushdownReader
        from .schema import kafka_schema

        options = parse_options(self.options)
        expected = kafka_schema(options.include_headers)
        if schema is not None and schema.jsonValue() != expected.jsonValue():
            raise KafkaLogOptionError(
                f"The kafkalog source has a fixed schema and cannot be set with a custom one: "
                f"expected {expected.simpleString()}, got {schema.simpleString()}")
        if _planning_with_filter_pushdown():
            return KafkaLogPushdownReader(options)
        return KafkaLogBatchReader(options)

    def writer(self, schema, overwrite):
        from .writers import make_writer
        return make_writer(self.options, schema, overwrite)

    def streamWriter(self, schema, overwrite):
        from .writers import make_stream_writer
        return make_stream_writer(self.options, schema, overwrite)
