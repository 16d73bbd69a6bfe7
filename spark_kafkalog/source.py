"""The ``kafkalog`` Spark data source; the class docstring below is its user manual.

Owns: ``KafkaLogDataSource`` (name, schema, reader choice: batch, batch with filter
pushdown, streaming) and the detection of pyspark's filter-pushdown planner (see
``readers/batch.py`` for why it matters).

Invariants: options are validated at ``load()`` (``schema()``: the rules batch and
streaming reads share, since pyspark calls it the same way for both) and in full when the
read is planned (batch) or the streaming query starts; a user-given schema other than the
fixed one (or, for a typed read, the one its reader schemas give) is refused. A typed
read's reader schemas are resolved once, by ``schema()`` at ``load()``, and kept on the
data source object, which pyspark pickles after that call for every query of the
DataFrame.

Thread-safety: a data source object is created per query, pickled to the planning
worker, and never shared.
"""

from __future__ import annotations

import sys
from types import FrameType

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader

__all__ = ["KafkaLogDataSource"]

# The module pyspark runs to push filters into a Python data source (pyspark >= 4.1). Spark
# starts it only when spark.sql.python.filterPushdown.enabled is true.
_PUSHDOWN_PLANNER = "data_source_pushdown_filters"


def _planning_with_filter_pushdown() -> bool:
    """Whether the caller is pyspark's filter-pushdown planner (its ``_main`` is on the
    stack, whether it runs as a module of the daemon or as ``__main__``)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith(_PUSHDOWN_PLANNER + ".py"):
            return True
        frame = frame.f_back
    return False


def _check_schema(schema, include_headers: bool, typed=None) -> None:
    from .options import KafkaLogOptionError
    from .schema import kafka_schema

    expected = kafka_schema(include_headers) if typed is None else typed.spark_schema(include_headers)
    if schema is not None and schema.jsonValue() != expected.jsonValue():
        raise KafkaLogOptionError(
            f"The kafkalog source has a fixed schema and cannot be set with a custom one: "
            f"expected {expected.simpleString()}, got {schema.simpleString()}")


# What a typed read's resolution may raise that the user acts on: a bad option, an
# unreachable or refusing Schema Registry. Raised again with one frame (see below).
def _typed_read_errors() -> tuple[type[BaseException], ...]:
    from broker.client.registry import SchemaRegistryError, SchemaRegistryUnreachableError

    from .options import KafkaLogOptionError
    return (KafkaLogOptionError, SchemaRegistryError, SchemaRegistryUnreachableError)


class KafkaLogDataSource(DataSource):
    """``spark.read.format("kafkalog")`` and ``spark.readStream.format("kafkalog")``: Kafka
    topics as a DataFrame or a stream of micro-batches, with the options and the row
    schema of Spark's own Kafka source, read straight from a Kafka log directory (direct
    mode) or from brokers (network mode). Streaming reads: see "Streaming" below.

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

    Schema (fixed unless a typed read asks otherwise, below; every field nullable; exactly
    Spark's Kafka source)::

        key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT,
        timestamp TIMESTAMP, timestampType INT
        [, headers ARRAY<STRUCT<key: STRING, value: BINARY>>]   with includeHeaders=true

    ``timestamp`` is the record's (CreateTime) or its batch's (LogAppendTime, then
    ``timestampType`` = 1) milliseconds; ``headers`` is null, not empty, for a record
    without headers; key and value are null when the producer sent null. Control records
    (transaction markers) and records of aborted transactions never appear.

    Typed reads (this source's own; ``spark_kafkalog.formats``, ``docs/spark/formats.md``):
    ``valueFormat`` / ``keyFormat`` ``string``, ``avro``, ``protobuf`` or ``json`` make the
    column text or a struct of the reader schema (Spark's ``from_avro`` / ``from_protobuf``
    types), decoded with a Schema Registry (``schema.registry.url`` and every other
    ``schema.registry.*`` key of the registry client; in direct mode without it, the log
    directory's ``_schemas`` topic). Values are framed as Confluent's serializers frame them
    (id or GUID in front, or in a ``__value_schema_id`` header; ``valueFraming=none``: bare
    payloads); the subject is ``valueSubject`` or follows ``subject.name.strategy`` (several
    subjects: a struct with one member per record); the reader schema is ``valueSchema``
    (``latest`` when the DataFrame is loaded, ``version:N``, ``id:N`` or inline), and every
    registered version is resolved to it. After Spark's columns come ``keySchemaId`` /
    ``valueSchemaId`` and, with ``mode=PERMISSIVE`` (the default), ``_corrupt_key`` /
    ``_corrupt_value`` (``columnNameOfCorruptRecord``): the bytes of what could not be
    decoded, the typed column being null; ``FAILFAST`` fails naming the topic, partition and
    offset, ``DROPMALFORMED`` leaves the record out. The same in every mode, batch and
    streaming (each micro-batch loads the subjects' versions afresh).

    Where to read (one, or both for stitched reads):

    ``path`` (or ``.load(path)``; ``.load([dir1, dir2])`` for a broker with several
    ``log.dirs``)
        Direct mode: a Kafka log directory (a ``log.dirs`` entry: the directory holding
        ``<topic>-<partition>`` directories; a local path or a ``file:`` URI). The
        executors read the segment files themselves, through the offset and time indexes,
        and decode whole regions of batches column-wise into Arrow; no broker is needed,
        the files are only read (never created, recovered or locked), so a live broker's
        directory, a copy or a backup all work (a torn last batch of a copy taken while
        the broker wrote is left out, as Kafka's recovery would). Every executor must see
        the directory at the same path (local mode, a shared or mounted file system), or
        the directory is on an object store: ``s3://bucket/prefix`` (``s3a://``,
        ``s3n://``), ``gs://``, ``abfs://``, ``abfss://``, ``hdfs://``, holding a copy or
        a backup in the same layout, read with ranged reads (never a whole segment) through
        pyarrow's file systems; S3 settings are Hadoop's ``fs.s3a.*`` options
        (``fs.s3a.endpoint``, ``fs.s3a.endpoint.region``, ``fs.s3a.access.key``,
        ``fs.s3a.secret.key``, ``fs.s3a.session.token``, ``fs.s3a.path.style.access``,
        ``fs.s3a.connection.ssl.enabled``, ``fs.s3a.aws.credentials.provider``), else the
        AWS SDK's environment (``AWS_*``, ``~/.aws``). Topic names are the directory
        names. Transactions: records of aborted transactions are left out (from the
        ``.txnindex`` files) and records of transactions still open when the files are
        read are included, unless ``kafka.isolation.level=read_committed``: then
        "latest" is each partition's last stable offset (the first offset of the oldest
        open transaction, from the producer snapshots and the batch headers after the
        newest one), as a read_committed consumer's end offsets are.
    ``kafka.bootstrap.servers``
        Network mode: the driver plans with Metadata and ListOffsets and the executors
        fetch their ranges from the partition leaders (Fetch v4-11, one request kept in
        flight while the previous response is decoded), from this project's broker or
        any Kafka cluster. ``kafka.isolation.level=read_committed`` leaves out aborted
        transactions and stops at the last stable offset; other ``kafka.*`` keys are
        Kafka consumer settings (``kafka.max.partition.fetch.bytes`` defaults to 8 MiB
        here: bigger responses decode faster; ``kafka.default.api.timeout.ms`` bounds
        how long an unreachable cluster is retried).
    ``path`` and ``kafka.bootstrap.servers`` together
        Stitched reads (``readers/stitched.py``): ``path`` is the cluster's remote storage
        (tiered storage, KIP-405: this broker's ``rsm.config.storage.uri``, or a copy of a
        log directory); the offsets below each partition's local log start that the store
        holds are read from it on the executors, every other offset is fetched from the
        brokers; planning, options and offsets are network mode's. The brokers' part
        reads ``read_committed`` unless ``kafka.isolation.level`` is set.

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

    ``startingOffsets`` (default ``earliest``; ``latest`` in streaming queries)
        ``earliest`` (the log start offset) or JSON
        ``{"topicA":{"0":23,"1":-2},"topicB":{"0":-2}}`` naming every assigned partition
        (-2 = earliest). ``latest`` and -1 are refused in batch queries, as in Spark (when
        the query is planned: ``load()`` cannot tell a batch read from a streaming one).
    ``endingOffsets`` (default ``latest``; batch queries only)
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

    Compacted topics (``cleanup.policy=compact``): the log cleaner removes records that a
    later record of the same key superseded (and, after ``delete.retention.ms``, the
    tombstones), leaving gaps in the offsets; offsets never change. Gaps are normal and
    never data loss: a range [start, end) is where records can be, not a count, so a
    range starting, ending or lying wholly in removed offsets reads the records that
    exist in it (none, possibly) without waiting for the others, in both modes, batch
    and streaming, and a streaming query restarted from a checkpointed offset the
    cleaner removed goes on with the next offset that exists. Only offsets below the
    log start offset (retention, DeleteRecords) are data loss. Counts based on offsets
    (``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``, ``maxRecordsPerPartition``,
    ``minPartitions``, the progress' offsets) count offsets, as in Spark, so they
    overstate the records of a cleaned range. Direct mode reads a live broker's directory
    while it cleans (a segment being swapped in, ``.swap``, is read as the live one).

    ``kafkalog.snapshot`` (default ``false``; batch reads; this source's own)
        ``true``: a table view of a compacted topic: one row per (topic, key) (per
        partition too, for a key written to several partitions), the last
        record of the key in the read's range (so as of ``endingOffsets`` /
        ``endingTimestamp``, from ``startingOffsets``), leaving out keys whose last record
        is a tombstone (null value) and records without a key; the same columns as a
        normal read (the winning record's offset, timestamp, headers), in both modes, and
        the same result before and after the cleaner ran. Computed on the executors:
        a key's records all live in one Kafka partition, so each task reduces its whole
        partition to a map key -> latest record (``spark_kafkalog.snapshot``: memory
        about three times the partition's live keys and values, whatever the range's
        size) - the distributed reduce by key, with no shuffle. Hence refused with
        ``minPartitions`` / ``maxRecordsPerPartition`` (a partition is never split) and
        in streaming queries; with filter pushdown only the ``topic`` / ``partition``
        filters are taken over, those on ``offset`` / ``timestamp`` apply to the
        snapshot's rows (Spark filters them). For partitions whose live keys do not fit
        an executor, read normally and reduce in Spark:
        ``df.groupBy("topic", "key").agg(max_by(struct("*"), "offset").alias("r"))``
        then ``.where("r.value IS NOT NULL")``.

    ``kafkalog.table`` (this source's own; batch and streaming; ``readers/bridge.py``)
        A bridge read: the rows of the topic's Iceberg or Delta table (written by
        ``kafkalog export --format iceberg|delta``) as of its latest commit, then the log
        from the offsets that commit stores, each offset once (the commit is pinned when the
        read is planned). One topic; the starting bounds are refused (the table's offsets
        are the start). ``kafkalog.table.format`` (``iceberg`` / ``delta``, else told from
        the location), ``kafkalog.table.catalog.uri`` and ``kafkalog.table.catalog.<key>``
        (pyiceberg catalog properties), ``kafkalog.table.storage.<key>`` (deltalake storage
        options). Streaming: the first micro-batch of a new query reads the table. See
        docs/spark/tables.md.

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
    ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``, ``maxTriggerDelay`` (see
    "Streaming"; ignored in a batch query, with a warning, as Spark does). Any other
    option is an error that names it with the closest valid name ("did you mean"), or
    lists the valid ones when none is close; a bad value names the option and the values
    it takes. Option names are case-insensitive.

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

    Streaming (``spark.readStream.format("kafkalog")``), in both modes::

        stream = (spark.readStream.format("kafkalog")
                  .option("kafka.bootstrap.servers", "localhost:9092")  # or .load(log_dir)
                  .option("subscribe", "orders")
                  .option("maxOffsetsPerTrigger", 100000)
                  .load())
        (stream.writeStream.format("parquet").option("path", "/out")
         .option("checkpointLocation", "/chk").trigger(availableNow=True).start())

    Same schema, same options as a batch read (``assign`` / ``subscribe`` /
    ``subscribePattern``, ``kafka.*``, ``includeHeaders``, ``failOnDataLoss``,
    ``minPartitions``, ``maxRecordsPerPartition``, ``maxBytesPerBatch``), with Spark's
    streaming rules:

    Offsets
        Each micro-batch reads the offsets [start, end) of every partition. Offsets are
        Spark's ``KafkaSourceOffset`` JSON, the next offset to read per partition:
        ``{"orders": {"0": 42, "1": 7}}``, shown as ``startOffset`` / ``endOffset`` in
        ``query.lastProgress["sources"]`` (``latestOffset``: what the log held when the
        batch was planned) and written to the checkpoint's offset log. A query restarted
        from its checkpoint goes on exactly where its last micro-batch ended: with a sink
        that is exactly-once (file sinks, ``foreachBatch`` keyed on the batch id) every
        record is written once, none skipped. Nothing is committed to Kafka unless
        ``kafkalog.commitOffsetsToGroup`` asks for it (below).
        The first micro-batch of a new query always runs, possibly reading nothing, so
        that the offsets ``startingOffsets`` resolved to are in the checkpoint (pyspark
        keeps no other place for them): a query stopped before any record arrived
        resumes from there, it does not resolve ``latest`` again.
    ``startingOffsets`` (default ``latest``)
        Where a new query starts (a restarted query ignores it and resumes from its
        checkpoint): ``latest``, ``earliest`` or JSON naming every assigned partition
        (-1 = latest, -2 = earliest); ``startingTimestamp`` /
        ``startingOffsetsByTimestamp`` (with ``startingOffsetsByTimestampStrategy``) as
        in batch reads, with the same precedence.
    ``endingOffsets``, ``endingTimestamp``, ``endingOffsetsByTimestamp``
        Refused (``ending offset not valid in streaming queries``), as in Spark; the
        query fails when it starts.
    New partitions
        Partitions that appear while the query runs (a topic gets more partitions, a new
        topic matches ``subscribePattern`` or a ``subscribe``d topic is created) are read
        from their earliest offset; as in Spark, one whose log does not start at 0 is
        reported as data loss (see ``failOnDataLoss``).
    ``maxOffsetsPerTrigger``
        At most about this many records per micro-batch, spread over the partitions in
        proportion to their lag, as Spark's ``KafkaMicroBatchStream.rateLimit`` (a
        partition that has records gets at least one, so a batch may exceed the limit
        by less than the number of partitions). Without it a micro-batch reads
        everything available.
    ``minOffsetsPerTrigger``, ``maxTriggerDelay`` (default ``15m``)
        Skip a trigger while fewer than ``minOffsetsPerTrigger`` records are waiting,
        unless ``maxTriggerDelay`` (Spark's time string: ``500ms``, ``10s``, ``15m``,
        ``1h``) passed since the last micro-batch; must not exceed
        ``maxOffsetsPerTrigger``. Ignored by Trigger.AvailableNow and Trigger.Once.
    Triggers
        Processing-time triggers (the default) read what is new at each trigger, within
        the limits above. ``trigger(availableNow=True)`` takes the latest offsets when the
        query starts as its target, reads up to them (in several micro-batches when
        ``maxOffsetsPerTrigger`` is set; records that arrive later, and partitions created
        later, are left for the next run) and stops. ``trigger(once=True)`` reads
        everything in one micro-batch, ignoring the limits. Continuous processing is not
        supported by Python data sources.
    ``kafkalog.commitOffsetsToGroup`` (this source's own; network mode only)
        A consumer group id: after each micro-batch Spark commits, its end offsets are
        committed to this group (OffsetCommit as a simple consumer, generation -1), so
        that ``kafkalog groups --describe --group G``, kafka-consumer-groups.sh or any
        Kafka lag monitor shows how far the query is behind. For monitoring only: the
        query never reads these offsets back (its checkpoint stays the source of truth,
        as SPARK-27549 proposed), and a failed commit logs a warning (logger
        ``spark_kafkalog``) without failing the query. Use a group no consumer is a
        member of: a group with active members refuses the commit (the warning says
        so). Requires ``kafka.bootstrap.servers``; refused in direct mode, ignored with
        a warning in batch queries.
    ``failOnDataLoss`` (default ``true``)
        Offsets a micro-batch should read that the log no longer holds (retention or
        DeleteRecords removed them before they were read, a partition or topic was
        deleted, a log now ends before the offset read last): with ``true`` the query
        fails with ``KafkaDataLossError`` naming the topic-partition and the offsets
        (``Could not read records in offset [10, 25) for topic partition orders-0``,
        ``Partition orders-1's offset was changed from 40 to 3``, ``{orders-2} are
        gone``); with ``false`` a warning is logged and the query reads what remains
        and goes on. The check runs when the micro-batch is planned and again on the
        executors while they read. ``failOnDataLoss`` may be changed when a failed query
        is restarted.
    Parallelism
        Each micro-batch is split like a batch read: one task per partition's range,
        ``minPartitions`` / ``maxRecordsPerPartition`` splitting, the same direct-mode
        segment scans or network-mode fetches, Arrow batches out.

    Limitations: pyspark gives a Python source no place of its own in the checkpoint
    (Spark's Kafka source keeps its resolved starting offsets in ``sources/0``), so a
    query that fails or is stopped while its very first micro-batch runs resolves
    ``startingOffsets`` again when restarted: with ``latest`` (or a timestamp) and new
    records in between, that batch then reports data loss (``offset was changed``).
    Filter pushdown applies to batch reads only.

    Writing (``df.write.format("kafkalog").mode("append")``, ``df.writeStream``): options
    ``kafka.bootstrap.servers``, ``topic``, ``kafka.*``, ``kafkalog.writeBatchHeaders``;
    at-least-once across Spark task retries by default, no duplicates from producer
    retries; exactly once with ``kafkalog.exactlyOnce=true`` (transactions, readers with
    read_committed). The sink's manual is ``spark_kafkalog.writers``' docstring.
    """

    @classmethod
    def name(cls) -> str:
        return "kafkalog"

    # An option error is raised again from the method pyspark called, without the frames
    # below it: pyspark shows the worker's traceback in its error, so the user reads one
    # frame and the message (what to change), not the parser's call chain.

    def schema(self):
        from .options import KafkaLogOptionError, parse_options
        from .schema import kafka_schema
        try:  # pyspark calls schema() alike for read and readStream: only the shared rules here
            options = parse_options(self.options, streaming=None)
            if options.formats.typed:
                return self._typed_read(options).spark_schema(options.include_headers)
            return kafka_schema(options.include_headers)
        except KafkaLogOptionError as error:
            raise error.with_traceback(None) from None

    def _typed_read(self, options):
        """The reader schemas of a typed read (``formats.registry.TypedRead``), resolved once:
        by ``schema()`` when the DataFrame is loaded (pyspark pickles this object after that
        call, so every later query of the DataFrame reads with the same schemas), or here
        when a user-given schema skipped ``schema()``."""
        typed = getattr(self, "_kafkalog_typed", None)
        if typed is None:
            from .formats.registry import resolve_typed_read

            try:
                typed = self._kafkalog_typed = resolve_typed_read(options)
            except _typed_read_errors() as error:
                raise error.with_traceback(None) from None
        return typed

    def reader(self, schema) -> DataSourceReader:
        from .options import KafkaLogOptionError, parse_options
        from .readers.batch import KafkaLogBatchReader, KafkaLogPushdownReader

        try:
            options = parse_options(self.options)
            typed = self._typed_read(options) if options.formats.typed else None
            _check_schema(schema, options.include_headers, typed)
        except KafkaLogOptionError as error:
            raise error.with_traceback(None) from None
        if _planning_with_filter_pushdown() and options.table is None:  # bridge reads: Spark filters
            return KafkaLogPushdownReader(options, typed)
        return KafkaLogBatchReader(options, typed)

    def streamReader(self, schema) -> DataSourceStreamReader:
        from .options import KafkaLogOptionError, parse_options
        from .readers.stream import KafkaLogStreamReader

        try:
            options = parse_options(self.options, streaming=True)
            typed = self._typed_read(options) if options.formats.typed else None
            _check_schema(schema, options.include_headers, typed)
        except KafkaLogOptionError as error:
            raise error.with_traceback(None) from None
        return KafkaLogStreamReader(options, typed)

    # The same for the sink's driver-side checks: a bad option or column, and an unreachable
    # cluster (BrokerUnreachableError, or a TLS / SASL failure), found before any task runs.

    def writer(self, schema, overwrite):
        from broker.client.errors import KafkaError

        from .writers import KafkaLogWriteError, make_writer
        try:
            return make_writer(self.options, schema, overwrite)
        except (KafkaLogWriteError, KafkaError) as error:
            raise error.with_traceback(None) from None

    def streamWriter(self, schema, overwrite):
        from broker.client.errors import KafkaError

        from .writers import KafkaLogWriteError, make_stream_writer
        try:
            return make_stream_writer(self.options, schema, overwrite)
        except (KafkaLogWriteError, KafkaError) as error:
            raise error.with_traceback(None) from None
