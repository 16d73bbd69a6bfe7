"""Exactly-once incremental export of one topic to an Iceberg or a Delta table, with Spark.

Owns ``export_table`` (the batch export behind ``kafkalog export --format iceberg|delta``
and ``spark_kafkalog.tables.export``), ``open_target`` (a ``TableTarget`` from the
arguments) and ``TableExportResult``; and what the streaming export (``stream.py``) shares
with it: ``_write_files`` (step 4) and ``_commit_with_retries`` (step 5), the topic check
(``_check_topic``) and the overlap rule (``_without_overlap``).

One run, on the driver:

1. ``target.load()``: the offsets the table holds (``base.py``), and the topic's id from
   the source (Metadata v10+ in network and stitched mode, ``partition.metadata`` in
   direct mode). A table of another topic, or of the same name with another topic id (the
   topic was deleted and created again), is refused with ``TopicIdMismatchError``, unless
   ``on_new_topic_id="restart"``: the export then starts the new topic from its earliest
   offsets and stores the new id (the old rows stay).
2. The plan (``jobs/export.plan_export``, the source's own planner): each partition from
   the table's next offset (a partition the table does not hold yet, added to the topic
   since, from its earliest offset) to the end offsets now. Records arriving later wait
   for the next run.
3. ``target.ensure``: the table created, or its schema evolved (a typed value's new
   optional fields become new nullable columns), before any file is written.
4. The Spark job (``tasks.write_ranges``): one task per planned range, each reading it
   with the ``kafkalog`` source's own reader, laying the rows out as
   ``layout.table_frame`` does (``tasks.arrow_layout``, to the schema ``table_frame``
   gives) and writing them with ``files.write_task_files`` under the run's location, in
   one Python worker; the driver collects what each task wrote (the streaming export
   writes each micro-batch's DataFrame through ``mapInArrow``: ``_write_files``).
5. One atomic commit (``target.commit``) of every file and the new offsets. When another
   exporter committed meanwhile (``CommitConflictError``), the table is reloaded: files
   entirely at or below its new offsets are dropped, a file across them is rewritten
   without the rows the table already holds, and the commit is tried again (at most
   ``max_commit_attempts`` times). So two exporters at once never duplicate a record.

Exactly once: the data and the offsets are one commit; a run killed before it leaves
files no version references (removed by ``remove_orphans``, run at the start of each
export for runs older than ``orphan_age_ms``), and the next run reads from the offsets the
table holds, whatever happened before.

Thread-safety: one export per thread; the progress callback runs on a monitoring thread
(as ``jobs/export``'s).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .base import CommitConflictError, TableError, TableOffsets, TableState, TableTarget, TopicIdMismatchError
from .files import HEADERS_NULL_FLAG, OUTPUT_SCHEMA, FileSpec, utc_timestamps, write_task_files, written_files
from .layout import LAYOUTS, parse_partition_by, table_frame
from .targets import TABLE_FORMATS, open_target, topic_id_text
from .tasks import write_ranges

__all__ = ["TABLE_FORMATS", "TableExportResult", "open_target", "export_table", "topic_id_text"]

ON_NEW_TOPIC_ID = ("fail", "restart")
DEFAULT_ORPHAN_AGE_MS = 24 * 3600 * 1000

ProgressCallback = Callable[[int, int], None]


@dataclass(frozen=True)
class TableExportResult:
    """What a run added: records per partition, the files, the offsets before and after."""

    table: str
    format: str
    records: int
    files: int
    bytes: int
    partitions: dict[int, int]
    offsets_before: TableOffsets | None
    offsets_after: TableOffsets
    version: int | None
    seconds: float
    conflicts: int = 0
    dropped_files: int = 0
    notes: tuple[str, ...] = field(default=())

    def summary(self) -> str:
        shown = ", ".join(f"{p}: {n:,}" for p, n in sorted(self.partitions.items())[:8])
        more = f", ... ({len(self.partitions) - 8} more)" if len(self.partitions) > 8 else ""
        return (f"Exported {self.records:,} records of {self.offsets_after.topic} ({shown}{more}) to the "
                f"{self.format} table {self.table}: {self.files} file{'' if self.files == 1 else 's'}, "
                f"{self.bytes:,} bytes, version {self.version}, in {self.seconds:.1f} s.")


def _source_topic_id(plan, topic: str) -> str | None:
    """The topic's id as the source sees it, None when it cannot tell
    (``readers.bridge.source_topic_id`` through the plan's offset reader)."""
    from spark_kafkalog.options import parse_options
    from spark_kafkalog.readers import open_offset_reader
    from spark_kafkalog.readers.bridge import source_topic_id

    parsed = parse_options(dict(plan.reader_options))
    reader: Any = open_offset_reader(parsed)
    try:
        return source_topic_id(parsed, reader, topic)
    finally:
        close = getattr(reader, "close", None)
        if close is not None:
            close()


def _check_topic(state: TableState, topic: str, topic_id: str | None, on_new_topic_id: str) -> TableOffsets | None:
    """The stored offsets the export continues from (None: from the beginning)."""
    stored = state.offsets
    if stored is None:
        return None
    if stored.topic != topic:
        raise TableError(f"table {state.location} holds topic {stored.topic!r}, not {topic!r}: one topic per table")
    if stored.topic_id and topic_id and stored.topic_id != topic_id:
        if on_new_topic_id == "restart":
            return None
        raise TopicIdMismatchError(
            f"table {state.location} holds topic {topic} of topic id {stored.topic_id}, but the topic now has id "
            f"{topic_id} (deleted and created again): its offsets mean nothing for it. Export to another table, "
            "or restart from the new topic's earliest offsets (on_new_topic_id=restart, --on-new-topic-id restart)")
    return stored


def _without_overlap(files: list, held: Mapping[int, int], spec: FileSpec) -> tuple[list, int]:
    """``files`` without the rows another writer committed meanwhile (``held``: the
    table's next offsets now): files entirely below are dropped, a file across is
    rewritten without them. Returns (files, how many were dropped or rewritten)."""
    kept: list = []
    gone = 0
    for f in files:
        below = held.get(f.partition, 0)
        if f.last_offset < below:
            gone += 1
        elif f.first_offset < below:
            kept += _rewrite_without(f, below, spec) or []
            gone += 1
        else:
            kept.append(f)
    return kept, gone


def _rewrite_without(written, below: int, spec: FileSpec):
    """``written`` (one file) rewritten without its rows of offsets below ``below``; None
    when none remain."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from .files import filesystem_for

    fs, path = filesystem_for(written.path, spec.storage_options)
    with fs.open_input_file(path) as f:
        table = pq.read_table(f)
    kept = table.filter(pc.greater_equal(table.column("offset"), below))
    if kept.num_rows == 0:
        return None
    rows = list(write_task_files(spec)(iter(kept.to_batches())))
    return written_files([r for batch in rows for r in batch.column("file").to_pylist()])


def export_table(spark, *, topic: str, table: str, fmt: str, bootstrap_servers: str | None = None,
                 path: str | Sequence[str] | None = None, options: Mapping[str, str] | None = None,
                 value_format: str | None = None, key_format: str | None = None,
                 schema_registry_url: str | None = None, catalog_uri: str | None = None,
                 catalog_properties: Mapping[str, str] | None = None,
                 storage_options: Mapping[str, str] | None = None,
                 partition_by: str | Sequence[str] | None = None, layout: str = "flat",
                 on_new_topic_id: str = "fail", progress: ProgressCallback | None = None,
                 max_commit_attempts: int = 10, orphan_age_ms: int = DEFAULT_ORPHAN_AGE_MS,
                 target: TableTarget | None = None) -> TableExportResult:
    """Export what ``topic`` holds after the table's offsets to ``table`` (module
    docstring). Raises ``TableError`` (``jobs.export.ExportError`` for the read's own
    problems: a missing topic, an unreachable cluster, bad options)."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException
    from pyspark.sql.pandas.types import to_arrow_schema

    import spark_kafkalog
    from spark_kafkalog.jobs.export import (
        ExportError,
        _TaskMonitor,
        default_min_partitions,
        plan_export,
        spark_error_message,
    )
    from spark_kafkalog.jobs.session import activate_session
    from spark_kafkalog.planning import split_ranges

    started = time.monotonic()
    begun = _begin(topic=topic, table=table, fmt=fmt, layout=layout, on_new_topic_id=on_new_topic_id,
                   partition_by=partition_by, target=target, catalog_uri=catalog_uri,
                   catalog_properties=catalog_properties, storage_options=storage_options,
                   orphan_age_ms=orphan_age_ms, bootstrap_servers=bootstrap_servers, path=path, options=options,
                   value_format=value_format, key_format=key_format, schema_registry_url=schema_registry_url)
    target, state, partitioning, probe = begun.target, begun.state, begun.partitioning, begun.probe
    topic_id, stored = begun.topic_id, begun.stored
    if stored is not None:
        try:
            plan = plan_export(topic, bootstrap_servers=bootstrap_servers, path=path, options=options,
                               value_format=value_format, key_format=key_format, include_headers=True,
                               schema_registry_url=schema_registry_url,
                               starting_offsets=json.dumps({topic: {str(p): o for p, o in begun.start.items()}}))
        except ExportError as exc:
            raise TableError(str(exc)) from None
    else:
        plan = probe  # from the earliest offsets: what the probe planned
    before = stored
    base_offsets = stored if stored is not None else TableOffsets(topic, topic_id, {})
    new_offsets = TableOffsets(topic, topic_id, dict(base_offsets.next_offsets)).advanced(
        {r.partition: r.end for r in plan.ranges})

    sc = spark.sparkContext
    reader_options = dict(plan.reader_options)
    min_partitions = plan.min_partitions
    if min_partitions is None and plan.max_records_per_partition is None:
        min_partitions = default_min_partitions(plan.total_offsets, sc.defaultParallelism)
        if min_partitions is not None:
            reader_options["minPartitions"] = str(min_partitions)
    tasks = sorted(split_ranges(list(plan.ranges), min_partitions, plan.max_records_per_partition))
    total = plan.total_offsets
    run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}"
    files: list = []
    try:
        activate_session(spark)
        spark_kafkalog.register(spark)
        reader = _source_reader(reader_options)
        df = table_frame(spark.createDataFrame([], _source_schema(reader)), fmt=fmt, layout=layout)
        schema = utc_timestamps(to_arrow_schema(df.schema, timezone="UTC"))
        state = target.ensure(schema, partitioning)
        spec = _file_spec(target, run_id, fmt, partitioning)
        if total > 0:
            group = f"kafkalog-table-export-{uuid.uuid4().hex}"
            monitor = _TaskMonitor(spark, group, tasks, progress, total)
            sc.setJobGroup(group, f"kafkalog export of {topic} to {table}", interruptOnCancel=True)
            try:
                monitor.start()
                files = write_ranges(spark, reader, reader.partitions(), schema, layout, spec)
            finally:
                monitor.stop()
                sc.setLocalProperty("spark.jobGroup.id", None)
    except (Py4JError, PySparkException) as exc:
        raise TableError(spark_error_message(exc)) from None

    # The commit, on top of the latest state: what another exporter committed since the
    # plan (before ``ensure`` or during the job) is dropped from this run's files first.
    outcome = _commit_with_retries(target, state, files, new_offsets, topic=topic, topic_id=topic_id,
                                   on_new_topic_id=on_new_topic_id, spec=spec, table=table,
                                   max_commit_attempts=max_commit_attempts)
    state, files, new_offsets = outcome.state, outcome.files, outcome.offsets
    conflicts, dropped = outcome.conflicts, outcome.dropped
    if progress is not None:
        progress(total, total)
    per_partition: dict[int, int] = {r.partition: 0 for r in plan.ranges}
    for f in files:
        per_partition[f.partition] = per_partition.get(f.partition, 0) + f.records
    return TableExportResult(
        table=state.location, format=fmt, records=sum(per_partition.values()), files=len(files),
        bytes=sum(f.size for f in files), partitions=per_partition, offsets_before=before,
        offsets_after=new_offsets, version=state.version, seconds=time.monotonic() - started,
        conflicts=conflicts, dropped_files=dropped)


@dataclass(frozen=True)
class _Begun:
    """Where an export (batch or streaming) starts: the target and its state, the
    partitioning, the first plan (from the earliest offsets: it names the partitions), the
    topic id, the offsets the table holds (None: none, or a restart after a new topic id)
    and each partition's first offset to export (-2: its earliest)."""

    target: TableTarget
    state: TableState
    partitioning: tuple[str, ...]
    probe: Any
    topic_id: str | None
    stored: TableOffsets | None
    start: dict[int, int]


def _begin(*, topic: str, table: str, fmt: str, layout: str, on_new_topic_id: str, partition_by,
           target: TableTarget | None, catalog_uri: str | None, catalog_properties: Mapping[str, str] | None,
           storage_options: Mapping[str, str] | None, orphan_age_ms: int, **plan_args: Any) -> _Begun:
    """The checks and the first steps both exports share (module docstring, steps 1-2):
    the arguments, the table's state (orphans of killed runs older than ``orphan_age_ms``
    removed; negative: kept), the topic id, the stored offsets. ``plan_args``:
    ``jobs.export.plan_export``'s source arguments."""
    from spark_kafkalog.jobs.export import ExportError, plan_export

    if fmt not in TABLE_FORMATS:
        raise TableError(f"unknown table format {fmt!r}: choose one of {', '.join(TABLE_FORMATS)}")
    if layout not in LAYOUTS:
        raise TableError(f"unknown layout {layout!r}: choose one of {', '.join(LAYOUTS)}")
    if on_new_topic_id not in ON_NEW_TOPIC_ID:
        raise TableError(f"on_new_topic_id {on_new_topic_id!r}: one of {', '.join(ON_NEW_TOPIC_ID)}")
    if not topic or "," in topic:
        raise TableError("one topic per table: give exactly one topic")
    try:
        partitioning = parse_partition_by(partition_by, fmt, layout)
    except ValueError as exc:
        raise TableError(str(exc)) from None
    if target is None:
        target = open_target(fmt, table, topic=topic, catalog_uri=catalog_uri,
                             catalog_properties=catalog_properties, storage_options=storage_options)
    state = target.load()
    if state.version is not None and orphan_age_ms >= 0:
        target.remove_orphans(int(time.time() * 1000) - orphan_age_ms)
    try:
        probe = plan_export(topic, include_headers=True, **plan_args)
    except ExportError as exc:
        raise TableError(str(exc)) from None
    topic_id = _source_topic_id(probe, topic)
    stored = _check_topic(state, topic, topic_id, on_new_topic_id)
    partitions = [r.partition for r in probe.ranges]
    if stored is not None:
        missing = sorted(set(stored.next_offsets) - set(partitions))
        if missing:
            raise TableError(f"table {state.location} holds partitions {missing} that topic {topic} does not have")
    start = {p: (stored.next_offsets.get(p, -2) if stored is not None else -2) for p in partitions}
    return _Begun(target, state, partitioning, probe, topic_id, stored, start)


def _source_reader(reader_options: Mapping[str, str]):
    """The ``kafkalog`` source's batch reader of the planned ranges (a typed read's
    schemas resolved once, here), which the tasks of ``tasks.write_ranges`` run."""
    from broker.client.registry import SchemaRegistryError, SchemaRegistryUnreachableError
    from spark_kafkalog.formats.registry import resolve_typed_read
    from spark_kafkalog.options import KafkaLogOptionError, parse_options
    from spark_kafkalog.readers.batch import KafkaLogBatchReader

    try:
        options = parse_options(dict(reader_options))
        typed = resolve_typed_read(options) if options.formats.typed else None
    except (KafkaLogOptionError, SchemaRegistryError, SchemaRegistryUnreachableError) as exc:
        raise TableError(str(exc)) from None
    return KafkaLogBatchReader(options, typed)


def _source_schema(reader):
    """The Spark schema of the rows ``reader`` yields (the source's, typed or not)."""
    from spark_kafkalog.schema import kafka_schema

    include_headers = reader.options.include_headers
    return kafka_schema(include_headers) if reader.typed is None else reader.typed.spark_schema(include_headers)


@dataclass(frozen=True)
class _CommitOutcome:
    """What ``_commit_with_retries`` did: the state after the commit (the reloaded one
    when nothing was committed), the files and offsets committed (the overlap dropped),
    the conflicts met, the files dropped or rewritten, and whether a commit happened."""

    state: TableState
    files: list
    offsets: TableOffsets
    conflicts: int
    dropped: int
    committed: bool


def _write_files(spark, df, spec: FileSpec, description: str,
                 monitor: Callable[[str], Any] | None = None) -> list:
    """The executors write ``df`` (the table's rows) as Parquet files under
    ``spec.location`` (``files.write_task_files`` in ``mapInArrow``); returns what they
    wrote. ``monitor`` (the batch export's): called with a new job group id, returns an
    object with ``start()`` / ``stop()`` following the job's tasks; the job then runs in
    that group. Without it the job runs in the calling thread's group (a streaming
    query's micro-batch keeps its own, which ``StreamingQuery.stop`` cancels)."""
    job = _with_headers_flag(df).mapInArrow(write_task_files(spec), OUTPUT_SCHEMA)
    if monitor is None:
        return written_files(job.collect())
    sc = spark.sparkContext
    group = f"kafkalog-table-export-{uuid.uuid4().hex}"
    follower = monitor(group)
    sc.setJobGroup(group, description, interruptOnCancel=True)
    try:
        follower.start()
        rows = job.collect()
    finally:
        follower.stop()
        sc.setLocalProperty("spark.jobGroup.id", None)
    return written_files(rows)


def _commit_with_retries(target: TableTarget, base: TableState, files: list, new_offsets: TableOffsets, *,
                         topic: str, topic_id: str | None, on_new_topic_id: str, spec: FileSpec, table: str,
                         max_commit_attempts: int, skip_unchanged: bool = False) -> _CommitOutcome:
    """One atomic commit of ``files`` and ``new_offsets`` on top of ``base`` (the latest
    state the caller loaded): the files' rows at or below the offsets the table holds
    (another exporter committed them) are dropped first (``_without_overlap``), and the
    offsets merged with the table's. On ``CommitConflictError`` the table is reloaded and
    the commit tried again, at most ``max_commit_attempts`` times (then ``TableError``).
    ``skip_unchanged``: commit nothing when no file remains and the offsets would not
    advance (every row is in the table already)."""
    conflicts = dropped = 0
    while True:
        held = _check_topic(base, topic, topic_id, on_new_topic_id)
        files, gone = _without_overlap(files, held.next_offsets if held is not None else {}, spec)
        dropped += gone
        now = held if held is not None else TableOffsets(topic, topic_id, {})
        new_offsets = now.advanced(new_offsets.next_offsets)
        before = now.next_offsets
        if skip_unchanged and not files and all(o <= before.get(p, 0) for p, o in new_offsets.next_offsets.items()):
            return _CommitOutcome(base, files, new_offsets, conflicts, dropped, committed=False)
        try:
            state = target.commit(base, files, new_offsets)
            return _CommitOutcome(state, files, new_offsets, conflicts, dropped, committed=True)
        except CommitConflictError:
            conflicts += 1
            if conflicts >= max_commit_attempts:
                raise TableError(f"table {table}: {conflicts} commits in a row lost to other writers; "
                                 "the data files of this run are not referenced (run again)") from None
            base = target.load()


def _with_headers_flag(df):
    """``df`` with null ``headers`` handed over as empty arrays plus
    ``files.HEADERS_NULL_FLAG`` saying which were null: Spark converts a null
    array<struct> to Arrow several times slower than the whole read otherwise; the tasks
    put the nulls back before writing."""
    from pyspark.sql import functions as F

    if "headers" not in df.columns:
        return df
    empty = F.expr("cast(array() as array<struct<key:string,value:binary>>)")
    return (df.withColumn(HEADERS_NULL_FLAG, F.isnull("headers"))
            .withColumn("headers", F.coalesce(F.col("headers"), empty)))


def _file_spec(target: TableTarget, run_id: str, fmt: str, partitioning: Sequence[str]) -> FileSpec:
    from .layout import _TRANSFORM

    identity = tuple(p for p in partitioning if not _TRANSFORM.match(p))
    times = tuple((m.group(1), m.group(2)) for m in (_TRANSFORM.match(p) for p in partitioning) if m)
    return FileSpec(target.data_location(run_id), fmt, identity, times, target.storage_options())
