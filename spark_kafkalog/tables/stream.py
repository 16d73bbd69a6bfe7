"""Exactly-once streaming export of one topic to an Iceberg or a Delta table, with Spark's
structured streaming: the streaming form of ``job.export_table``.

Owns ``export_stream`` (behind ``kafkalog export --format iceberg|delta --streaming`` and
``spark_kafkalog.tables.export_stream``), ``StreamBatchResult`` (what one micro-batch
committed) and ``parse_trigger``.

How a start goes, on the driver:

1. ``target.load()`` and the topic's partitions and id, checked as the batch export does
   (``job._check_topic``: another topic, or another topic id unless
   ``on_new_topic_id="restart"``, is refused with ``TableError`` /
   ``TopicIdMismatchError`` before any query starts). Partitions the table holds start
   at its next offsets, the others at -2 (earliest); a table without offsets starts
   every partition at its earliest offset.
2. ``target.ensure`` (create the table, evolve its schema) with the schema of the
   stream's rows (``layout.table_frame``).
3. ``spark.readStream.format("kafkalog")`` (``subscribe``, ``includeHeaders=true``,
   ``startingOffsets`` = the JSON of step 1, ``maxOffsetsPerTrigger``), written with
   ``foreachBatch`` under a fresh checkpoint directory, and started with the trigger
   asked for: ``availableNow`` (up to the end offsets at the start, then stop) or a
   processing-time interval.

Each micro-batch (``_TableSink``): the executors write its rows as Parquet files
(``job._write_files``: ``files.write_task_files`` in ``mapInArrow``); the driver reloads
the table and makes ONE atomic commit of the files and the offsets
(``job._commit_with_retries``): each partition's next offset becomes the micro-batch's
end offset (read from the query's offset log, which Spark writes before the micro-batch
runs; the last offset seen + 1 when the log cannot be read), merged with what the table
holds. Rows at or below the offsets the table already holds (a batch export or another
streaming export committed them) are dropped first; on ``CommitConflictError`` the table
is reloaded and the commit retried, at most ``max_commit_attempts`` times. A micro-batch
whose rows are all in the table already (or that read nothing) commits nothing.

The table is the checkpoint: a restart resumes from the offsets the table holds,
whatever a checkpoint holds. Every start therefore uses a new Spark checkpoint directory
(a new subdirectory of ``checkpoint_location``, or a temporary directory), which a
daemon thread of the driver (``_CheckpointCleaner``: it waits in the query's
``awaitTermination``) deletes once the query has terminated (stopped, finished or
failed); the caller's ``awaitTermination`` may return a moment before it is gone. A
process killed meanwhile leaves its directory behind: it is never read again. No Python
``StreamingQueryListener`` is involved: Spark calls a listener's ``onQueryStarted`` on
the query's thread while ``start()`` waits for it, which ties every start to the
Python callback server. When ``start`` is interrupted (``KeyboardInterrupt``, a
timeout), the Java gateway connection of the interrupted call is still busy, so the
checkpoint directory is then deleted only when it is local (no JVM call).

Exactly once: the data files and the offsets of a micro-batch are one commit; a
micro-batch killed before its commit leaves files no version references (deleted by a
later export's ``remove_orphans`` once a day old), and the next start reads from the
offsets the table holds.

Thread-safety: ``export_stream`` may be called from any thread; the sink runs on the
query's micro-batch thread (one micro-batch at a time per query) and uses its own
``TableTarget``.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .base import TableError, TableOffsets, TableTarget
from .job import (
    DEFAULT_ORPHAN_AGE_MS,
    _begin,
    _commit_with_retries,
    _file_spec,
    _write_files,
)
from .layout import table_frame

__all__ = ["AVAILABLE_NOW", "StreamBatchResult", "export_stream", "parse_trigger"]

AVAILABLE_NOW = "availableNow"
_AVAILABLE_NOW_SPELLINGS = {"availablenow", "available-now", "available_now"}
# Spark's interval strings: "10 seconds", "1 minute", "500 milliseconds", "5s"
_INTERVAL = re.compile(r"^\s*\d+(\.\d+)?\s*[a-zA-Z]+\s*$")
# keys of the source's offsets JSON that are not topics ("kafkalog:initial")
_NOT_A_TOPIC = ":"


@dataclass(frozen=True)
class StreamBatchResult:
    """What one micro-batch committed (``committed`` False: nothing, its rows were all in
    the table already or it read none)."""

    batch_id: int
    records: int
    files: int
    bytes: int
    partitions: dict[int, int]
    offsets_after: TableOffsets
    version: int | None
    committed: bool
    conflicts: int = 0
    dropped_files: int = 0

    def summary(self) -> str:
        if not self.committed:
            return f"Micro-batch {self.batch_id}: nothing new."
        return (f"Micro-batch {self.batch_id}: {self.records:,} records, {self.files} "
                f"file{'' if self.files == 1 else 's'}, version {self.version}.")


def parse_trigger(trigger: str) -> str:
    """``AVAILABLE_NOW`` for ``availableNow`` (any case, ``available-now``), else the
    processing-time interval as given (Spark's ``trigger(processingTime=...)``)."""
    text = str(trigger or "").strip()
    if text.lower() in _AVAILABLE_NOW_SPELLINGS:
        return AVAILABLE_NOW
    if not _INTERVAL.match(text):
        raise TableError(f"trigger {trigger!r}: availableNow or a processing-time interval such as '10 seconds'")
    return text


def export_stream(spark, *, topic: str, table: str, fmt: str, bootstrap_servers: str | None = None,
                  path: str | Sequence[str] | None = None, options: Mapping[str, str] | None = None,
                  value_format: str | None = None, key_format: str | None = None,
                  schema_registry_url: str | None = None, catalog_uri: str | None = None,
                  catalog_properties: Mapping[str, str] | None = None,
                  storage_options: Mapping[str, str] | None = None,
                  partition_by: str | Sequence[str] | None = None, layout: str = "flat",
                  on_new_topic_id: str = "fail", trigger: str = AVAILABLE_NOW,
                  max_offsets_per_trigger: int | None = None, checkpoint_location: str | None = None,
                  max_commit_attempts: int = 10, query_name: str | None = None,
                  on_commit: Callable[[StreamBatchResult], None] | None = None):
    """Start the streaming export of ``topic`` to ``table`` (module docstring) and return
    its ``StreamingQuery``, started (the caller awaits or stops it). ``on_commit`` is
    called on the query's thread after each micro-batch with its ``StreamBatchResult``
    (an exception it raises fails the query; the micro-batch is committed already).
    Raises ``TableError`` when the export cannot start; a micro-batch's failure fails
    the query (``awaitTermination`` raises it)."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException
    from pyspark.sql.pandas.types import to_arrow_schema

    import spark_kafkalog
    from spark_kafkalog.jobs.export import spark_error_message
    from spark_kafkalog.jobs.session import activate_session

    from .files import utc_timestamps

    trigger = parse_trigger(trigger)
    if max_offsets_per_trigger is not None and int(max_offsets_per_trigger) <= 0:
        raise TableError(f"max_offsets_per_trigger {max_offsets_per_trigger}: a positive number")
    if max_commit_attempts < 1:
        raise TableError(f"max_commit_attempts {max_commit_attempts}: at least 1")
    reader_extra = dict(options or {})
    for key in list(reader_extra):
        if key.lower() in ("maxoffsetspertrigger", "endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
            if key.lower() != "maxoffsetspertrigger":
                raise TableError(f"option {key}: a streaming export has no end (the trigger decides)")
            if max_offsets_per_trigger is not None:
                raise TableError("give max_offsets_per_trigger or the option maxOffsetsPerTrigger, not both")
            max_offsets_per_trigger = int(reader_extra.pop(key))
    begun = _begin(topic=topic, table=table, fmt=fmt, layout=layout, on_new_topic_id=on_new_topic_id,
                   partition_by=partition_by, target=None, catalog_uri=catalog_uri,
                   catalog_properties=catalog_properties, storage_options=storage_options,
                   orphan_age_ms=DEFAULT_ORPHAN_AGE_MS, bootstrap_servers=bootstrap_servers, path=path,
                   options=reader_extra, value_format=value_format, key_format=key_format,
                   schema_registry_url=schema_registry_url)
    target, partitioning, probe, topic_id, start = (begun.target, begun.partitioning, begun.probe, begun.topic_id,
                                                    begun.start)
    reader_options = {k: v for k, v in probe.reader_options.items()
                      if k.lower() not in ("assign", "endingoffsets", "minpartitions")}
    reader_options.update({"subscribe": topic, "includeHeaders": "true",
                           "startingOffsets": json.dumps({topic: {str(p): o for p, o in sorted(start.items())}})})
    if any(k.lower() == "minpartitions" for k in reader_extra):
        reader_options["minPartitions"] = next(v for k, v in reader_extra.items() if k.lower() == "minpartitions")
    if max_offsets_per_trigger is not None:
        reader_options["maxOffsetsPerTrigger"] = str(int(max_offsets_per_trigger))

    run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}"
    checkpoint = _new_checkpoint(checkpoint_location, run_id)
    try:
        activate_session(spark)
        spark_kafkalog.register(spark)
        df = table_frame(spark.readStream.format("kafkalog").options(**reader_options).load(), fmt=fmt,
                         layout=layout)
        schema = utc_timestamps(to_arrow_schema(df.schema, timezone="UTC"))
        target.ensure(schema, partitioning)
        sink = _TableSink(spark, target, fmt=fmt, table=table, topic=topic, topic_id=topic_id,
                          on_new_topic_id=on_new_topic_id, partitioning=partitioning, run_id=run_id,
                          checkpoint=checkpoint, max_commit_attempts=max_commit_attempts, on_commit=on_commit)
        writer = df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
        if query_name is not None:
            writer = writer.queryName(query_name)
        writer = writer.trigger(availableNow=True) if trigger == AVAILABLE_NOW \
            else writer.trigger(processingTime=trigger)
        query = writer.start()
    except (Py4JError, PySparkException) as exc:
        _delete(spark, checkpoint)
        raise TableError(spark_error_message(exc)) from None
    except BaseException:
        # a py4j call may have been interrupted: its connection is still busy, and another
        # call from this thread would wait for it forever
        _delete_local(checkpoint)
        raise
    _CheckpointCleaner(spark, query, checkpoint).start()
    return query


def _new_checkpoint(checkpoint_location: str | None, run_id: str) -> str:
    """A checkpoint directory no query used before: ``<checkpoint_location>/<run id>``, or
    a new temporary directory."""
    if checkpoint_location:
        return f"{str(checkpoint_location).rstrip('/')}/{run_id}"
    return tempfile.mkdtemp(prefix=f"kafkalog-stream-{run_id}-")


def _hadoop_path(spark, uri: str):
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(uri)
    return path, path.getFileSystem(spark._jsc.hadoopConfiguration())


def _delete_local(directory: str) -> None:
    """Delete ``directory`` when it is a local path (``file:`` or no scheme), without the
    JVM; anything else is left alone (never read again)."""
    if directory.startswith("file:"):
        directory = urllib.parse.urlparse(directory).path
    elif "://" in directory:
        return
    shutil.rmtree(directory, ignore_errors=True)


def _delete(spark, directory: str) -> None:
    """Delete ``directory`` (any file system Spark's Hadoop configuration reaches); a
    failure is left alone (the directory is never read again)."""
    try:
        path, fs = _hadoop_path(spark, directory)
        fs.delete(path, True)
    except Exception:  # noqa: BLE001, S110 - best effort: a left-over checkpoint is harmless
        pass


def _batch_end_offsets(spark, checkpoint: str, batch_id: int, topic: str) -> dict[int, int] | None:
    """The end offsets of micro-batch ``batch_id`` of ``topic`` as the query's offset log
    holds them (``<checkpoint>/offsets/<batch id>``: a version line, the batch's
    metadata, then the source's offsets JSON); None when it cannot be read."""
    try:
        path, fs = _hadoop_path(spark, f"{checkpoint.rstrip('/')}/offsets/{batch_id}")
        stream = fs.open(path)
        try:
            text = spark._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
        finally:
            stream.close()
        lines = [line for line in str(text).splitlines() if line.strip()]
        if len(lines) < 3 or not lines[0].startswith("v"):
            return None
        offsets = json.loads(lines[2])
        if isinstance(offsets, str):  # a source's offset kept as a JSON string
            offsets = json.loads(offsets)
        parts = offsets.get(topic) if isinstance(offsets, dict) else None
        if not isinstance(parts, dict):
            return None
        return {int(p): int(o) for p, o in parts.items() if _NOT_A_TOPIC not in str(p) and int(o) >= 0}
    except Exception:  # noqa: BLE001 - the caller falls back to the offsets it saw
        return None


class _TableSink:
    """The ``foreachBatch`` function of one streaming export: write, then one commit per
    micro-batch (module docstring)."""

    def __init__(self, spark, target: TableTarget, *, fmt: str, table: str, topic: str, topic_id: str | None,
                 on_new_topic_id: str, partitioning: Sequence[str], run_id: str, checkpoint: str,
                 max_commit_attempts: int, on_commit: Callable[[StreamBatchResult], None] | None) -> None:
        self.spark = spark
        self.target = target
        self.fmt = fmt
        self.table = table
        self.topic = topic
        self.topic_id = topic_id
        self.on_new_topic_id = on_new_topic_id
        self.partitioning = tuple(partitioning)
        self.run_id = run_id
        self.checkpoint = checkpoint
        self.max_commit_attempts = max_commit_attempts
        self.on_commit = on_commit

    def __call__(self, batch_df, batch_id: int) -> None:
        spec = _file_spec(self.target, f"{self.run_id}-{int(batch_id):06d}", self.fmt, self.partitioning)
        files = _write_files(self.spark, batch_df, spec, f"kafkalog streaming export of {self.topic}")
        ends: dict[int, int] = {}
        for f in files:
            ends[f.partition] = max(ends.get(f.partition, 0), f.last_offset + 1)
        logged = _batch_end_offsets(self.spark, self.checkpoint, int(batch_id), self.topic)
        if logged is not None:
            for p, o in logged.items():
                ends[p] = max(ends.get(p, 0), o)
        outcome = _commit_with_retries(
            self.target, self.target.load(), files, TableOffsets(self.topic, self.topic_id, ends),
            topic=self.topic, topic_id=self.topic_id, on_new_topic_id=self.on_new_topic_id, spec=spec,
            table=self.table, max_commit_attempts=self.max_commit_attempts, skip_unchanged=True)
        per_partition: dict[int, int] = {}
        for f in outcome.files:
            per_partition[f.partition] = per_partition.get(f.partition, 0) + f.records
        result = StreamBatchResult(
            batch_id=int(batch_id), records=sum(per_partition.values()), files=len(outcome.files),
            bytes=sum(f.size for f in outcome.files), partitions=per_partition, offsets_after=outcome.offsets,
            version=outcome.state.version, committed=outcome.committed, conflicts=outcome.conflicts,
            dropped_files=outcome.dropped)
        if self.on_commit is not None:
            self.on_commit(result)


class _CheckpointCleaner(threading.Thread):
    """A daemon thread of the driver that waits for one streaming export's query to
    terminate (stopped, finished or failed, or its SparkSession stopped), then deletes
    its checkpoint directory. It holds one Java gateway connection while it waits."""

    def __init__(self, spark, query, checkpoint: str) -> None:
        super().__init__(name=f"kafkalog-checkpoint-cleaner-{query.id}", daemon=True)
        self.spark = spark
        self.query = query
        self.checkpoint = checkpoint

    def run(self) -> None:
        try:
            self.query.awaitTermination()
        except Exception:  # noqa: BLE001, S110 - a failed query terminated too; the caller sees its error
            pass
        _delete(self.spark, self.checkpoint)
