"""Export Kafka topics to Parquet, CSV or JSON files with a Spark batch job.

Owns the export job behind ``kafkalog export``: planning the offsets to read on the
driver, the read through the ``kafkalog`` source, the columns each file format gets, the
write, the offsets-based progress reports, and the result (records, bytes, per-partition
counts, files). The command (its options, session, progress bar and summary) is
``spark_kafkalog/cli/export_cmd.py``, which also runs as a script (all the same code)::

    kafkalog export --topic clicks --format parquet --output /data/clicks --path /var/lib/kafka
    spark-submit spark_kafkalog/cli/export_cmd.py --topic clicks --format csv --output out \\
        --bootstrap-servers broker:9092
    python spark_kafkalog/cli/export_cmd.py ...     (== python -m spark_kafkalog.cli.export_cmd)

This module is a library (it never imports the command line): ``export(spark, topics=...,
fmt=..., output=...)``, or ``plan_export`` (no Spark needed: fails fast on bad input) then
``run_export(spark, plan, ...)``.

Output columns: Spark's Kafka schema, ``key, value, topic, partition, offset, timestamp,
timestampType`` (+ ``headers`` with ``include_headers``), one row per record, in each
task's offset order. Parquet keeps ``key``/``value`` (and header values) as BINARY.
CSV and JSON cannot hold bytes well, so they get strings, per ``binary_encoding``:
``utf8`` (the default for them: the bytes decoded as UTF-8, an invalid sequence becomes
U+FFFD as Python's ``errors="replace"`` does; choose ``base64`` or ``hex`` (lower case)
to keep arbitrary bytes exactly); Parquet takes the option too. A null key or value stays
null: an empty field in CSV (an empty string is ``""``), ``null`` in JSON (every line has
every column). CSV is RFC 4180 (a header line; quotes doubled, fields with commas, quotes
or line breaks quoted; leading and trailing spaces kept) and holds ``headers`` as a JSON
string ``[{"key":"k","value":"v"},...]``; JSON lines hold them as an array of objects.
Timestamps are written by Spark's own formatters (ISO 8601 in the session time zone).

Typed keys and values: ``value_format`` / ``key_format`` (``binary``, the default,
``string``, ``avro``, ``protobuf``, ``json``) and ``schema_registry_url`` are the source's
``valueFormat`` / ``keyFormat`` / ``schema.registry.url`` (``docs/spark/formats.md``); the
source's other typed-read options (``schema.registry.*``, ``valueSubject``,
``valueSchema``, ``mode``, ...) go in ``options``. Giving one both as an argument and in
``options`` is an error. A typed column keeps its Spark type: Parquet and JSON lines hold a
struct as a struct (nested records, arrays, maps, timestamps kept; JSON lines as nested
objects, every field written, nulls as ``null``), CSV, which cannot hold one, gets the
struct, array or map as JSON text (Spark's ``to_json``, null fields written), a string
stays a string. The columns the typed read adds after Spark's Kafka ones (and after
``headers``) are exported too, in the source's order: ``keySchemaId`` / ``valueSchemaId``
(int) and, in PERMISSIVE mode, the corrupt-record columns (``_corrupt_key``,
``_corrupt_value``: the undecodable bytes, encoded as ``key`` and ``value`` are under
``binary_encoding``). In direct mode the schemas come from the registry when a URL is
given, else from the log directory's ``_schemas`` partition (the source's rule).

Which offsets: ``starting_offsets`` / ``ending_offsets`` are Spark's ``startingOffsets`` /
``endingOffsets`` (``earliest``/``latest`` or per-partition JSON); ``options`` go to the
reader as they are (``failOnDataLoss``, ``kafka.*``, ``startingTimestamp``,
``maxRecordsPerPartition``, ``minPartitions``, ...). The driver plans once, with the
source's own planner, and freezes the result into ``assign`` plus JSON
``startingOffsets``/``endingOffsets`` for the read, so that records arriving during the
export are not read and the planned ranges are exactly the ones Spark reads. Every topic
must exist (an error names the missing ones). With both bootstrap servers and a path the
read is stitched (``readers/stitched.py``): the offsets the brokers keep only in remote
storage are read from the path, the rest fetched. A log directory may be an object-store URI
(``s3://bucket/prefix``, with ``fs.s3a.*`` keys in ``options``: see ``options.py``); the
executors then read it with ranged reads, and progress is counted the same way. A topic
or range without records writes an empty dataset: the directory with ``_SUCCESS`` and,
for Parquet, one file holding only the schema; the result says 0 records.

Splitting and progress: unless ``minPartitions`` or ``maxRecordsPerPartition`` is given,
the read is split into about ``TASKS_PER_CORE`` tasks per core of the session (Spark's
``minPartitions``) with at least ``MIN_OFFSETS_PER_TASK`` offsets each; each task writes
one file. While Spark writes, a thread polls the job's tasks (``SparkContext``'s status
tracker, and the status store behind it for which tasks ended) and reports, through
``progress(done, total)``, the offsets of the ranges whose tasks have finished. So the
granularity is one task: the count jumps by a task's range when it ends and never counts
offsets of a running task (with a Python data source Spark reports a task's input
metrics only when it ends). ``done`` is exact at each report; offsets that hold no record
(transaction markers, aborted or compacted records) count as read. The last report is
``(total, total)``.

Counts: the records of each task come from its output metrics (what it wrote), mapped to
its offset range, then summed per topic-partition. If that mapping cannot be made (no
status store, or Spark's read planned another number of tasks than the driver, as when
records were deleted in between and ``failOnDataLoss=false`` cut the ranges), the new
files are read back and counted instead (``ExportResult.counts_from`` says which).

Errors: ``ExportError`` with a one-line message, for bad arguments, a missing topic or log
directory, an unreachable cluster (after ``kafka.default.api.timeout.ms``, 60 s by
default), an existing output with mode ``errorifexists``, and any Spark failure (the
first meaningful line of its Java or Python exception, without the stack trace).

Thread-safety: one export at a time per thread; concurrent exports on one SparkSession
from different threads are fine (each tags its jobs with its own job group, and makes the
session its thread's active one first: ``jobs/session.py``'s ``activate_session``). ``progress``
is called from the monitoring thread (one that raises is not called again, but for the
final ``(total, total)``, which ``run_export`` makes on the caller's thread).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from spark_kafkalog.planning import OffsetRange

__all__ = [
    "ExportError", "ExportPlan", "ExportResult", "FORMATS", "BINARY_ENCODINGS", "MODES",
    "plan_export", "run_export", "export", "output_columns", "count_records_in_files",
    "spark_error_message", "default_min_partitions",
]

FORMATS = ("parquet", "csv", "json")
BINARY_ENCODINGS = ("utf8", "base64", "hex")
MODES = ("errorifexists", "overwrite", "append")
TASKS_PER_CORE = 4
MIN_OFFSETS_PER_TASK = 100_000
POLL_SECONDS = 0.5
# How long to wait, after the write returned, for Spark's listener bus to deliver the
# last task ends to the status store.
FINAL_COUNTS_WAIT_SECONDS = 10.0

ProgressCallback = Callable[[int, int], None]

# Options that the arguments set, and that the frozen plan replaces.
_ARGUMENT_KEYS = {"subscribe": "topics", "subscribepattern": "topics", "assign": "topics",
                  "path": "path", "paths": "path", "kafka.bootstrap.servers": "bootstrap_servers",
                  "startingoffsets": "starting_offsets", "endingoffsets": "ending_offsets"}
_BOUND_KEYS = {"startingtimestamp", "endingtimestamp", "startingoffsetsbytimestamp",
               "endingoffsetsbytimestamp", "startingoffsetsbytimestampstrategy"}


# The typed-read options the arguments of ``plan_export`` set (argument -> reader option).
_FORMAT_ARGUMENTS = {"value_format": "valueFormat", "key_format": "keyFormat",
                     "schema_registry_url": "schema.registry.url"}


class ExportError(Exception):
    """The export could not be done; the message is one line for the user."""


@dataclass(frozen=True)
class ExportPlan:
    """What to read, resolved on the driver: one ``OffsetRange`` per assigned partition
    (possibly empty) and the frozen reader options that make Spark read exactly them."""
    topics: tuple[str, ...]
    mode: str                        # "network", "direct" or "stitched"
    source: str                      # bootstrap servers or log directories, for messages
    ranges: tuple[OffsetRange, ...]
    # what the read is given (kafka.sasl.jaas.config, schema.registry.basic.auth.user.info,
    # ...): kept out of the plan's repr, which a log or a traceback may show
    reader_options: Mapping[str, str] = field(repr=False)
    include_headers: bool
    min_partitions: int | None
    max_records_per_partition: int | None
    seconds: float = 0.0

    @property
    def total_offsets(self) -> int:
        return sum(r.size for r in self.ranges)


@dataclass(frozen=True)
class ExportResult:
    """What an export wrote. ``partitions``: records per (topic, partition), every planned
    partition included; ``bytes``: the size of the data files written; ``files``: their
    paths (URIs for non-local outputs); ``seconds``: planning plus the Spark job."""
    records: int
    bytes: int
    partitions: dict[tuple[str, int], int]
    files: tuple[str, ...]
    seconds: float
    output: str
    format: str
    offsets: int
    tasks: int
    ranges: tuple[OffsetRange, ...] = ()
    counts_from: str = "task metrics"   # or "output files"

    def summary(self) -> str:
        """One paragraph for people: records, partitions, where, files, time."""
        parts = sorted(self.partitions.items())
        shown = ", ".join(f"{t}-{p}: {n:,}" for (t, p), n in parts[:8])
        if len(parts) > 8:
            shown += f", ... ({len(parts) - 8} more)"
        topics = sorted({t for t, _ in self.partitions})
        noun = "topic" if len(topics) == 1 else "topics"
        tasks = (f", written by {self.tasks} Spark task{'' if self.tasks == 1 else 's'}"
                 if self.tasks else ",")
        return (f"Exported {self.records:,} records ({self.offsets:,} offsets) from "
                f"{len(parts)} partition{'' if len(parts) == 1 else 's'} of {noun} "
                f"{', '.join(topics)} ({shown}) to {self.output} as {self.format}: "
                f"{len(self.files)} file{'' if len(self.files) == 1 else 's'}, "
                f"{_human_bytes(self.bytes)}{tasks} in {self.seconds:.1f} s.")


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{n:,} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n:,} bytes"


# --- planning (no Spark) ---

def _topic_list(topics: str | Sequence[str]) -> tuple[str, ...]:
    items = [topics] if isinstance(topics, str) else list(topics)
    names = [t.strip() for item in items for t in str(item).split(",") if t.strip()]
    if not names:
        raise ExportError("no topic given")
    return tuple(dict.fromkeys(names))


def _offsets_option(value, name: str) -> str:
    if isinstance(value, Mapping):
        return json.dumps(value)
    text = str(value).strip()
    if not text:
        raise ExportError(f"{name} is empty: give earliest, latest or per-partition JSON")
    return text


def plan_export(topics: str | Sequence[str], *, bootstrap_servers: str | None = None,
                path: str | Sequence[str] | None = None, starting_offsets="earliest",
                ending_offsets="latest", include_headers: bool = False,
                options: Mapping[str, str] | None = None, value_format: str | None = None,
                key_format: str | None = None,
                schema_registry_url: str | None = None) -> ExportPlan:
    """Resolve what to read (see the module docstring); raises ``ExportError``. Needs no
    Spark: the source's planner runs here, against the log directory or the cluster (the
    typed-read options are validated, the registry is not asked before the read)."""
    from broker.client.errors import BrokerUnreachableError, KafkaError
    from broker.log.storage import is_uri
    from spark_kafkalog.errors import KafkaDataLossError
    from spark_kafkalog.options import KafkaLogOptionError, parse_options
    from spark_kafkalog.planning import check_range, resolve_bounds
    from spark_kafkalog.readers import open_offset_reader

    started = time.monotonic()
    names = _topic_list(topics)
    if bootstrap_servers is None and path is None:
        raise ExportError("give bootstrap servers (network mode), a log directory path (direct "
                          "mode), or both (stitched mode: path is the cluster's remote storage)")
    opts: dict[str, str] = {}
    for key, value in (options or {}).items():
        argument = _ARGUMENT_KEYS.get(str(key).lower())
        if argument is not None:
            raise ExportError(f"option {key!r} is set by the export's {argument} argument")
        opts[str(key)] = "" if value is None else str(value)
    given = {"value_format": value_format, "key_format": key_format,
             "schema_registry_url": schema_registry_url}
    for argument, setting in given.items():
        if setting is None:
            continue
        option = _FORMAT_ARGUMENTS[argument]
        if any(k.lower() == option.lower() for k in opts):
            raise ExportError(f"option {option!r} is also given by the export's {argument} "
                              "argument: give one of them")
        text = str(setting).strip()
        if not text:
            raise ExportError(f"{argument} is empty")
        opts[option] = text.lower() if argument != "schema_registry_url" else text
    if include_headers:
        opts = {k: v for k, v in opts.items() if k.lower() != "includeheaders"}
        opts["includeHeaders"] = "true"
    opts["subscribe"] = ",".join(names)
    opts["startingOffsets"] = _offsets_option(starting_offsets, "starting offsets")
    opts["endingOffsets"] = _offsets_option(ending_offsets, "ending offsets")
    if bootstrap_servers is not None:
        if not str(bootstrap_servers).strip():
            raise ExportError("bootstrap servers are empty: give host:port[,host:port...]")
        opts["kafka.bootstrap.servers"] = str(bootstrap_servers).strip()
    if path is not None:
        dirs = [path] if isinstance(path, (str, os.PathLike)) else list(path)
        if not dirs:
            raise ExportError("no log directory given")
        if len(dirs) == 1:
            opts["path"] = str(dirs[0])
        else:
            opts["paths"] = json.dumps([str(d) for d in dirs])
    try:
        parsed = parse_options(opts)
    except KafkaLogOptionError as exc:
        raise ExportError(str(exc)) from None
    for directory in parsed.paths:
        if not is_uri(directory) and not os.path.isdir(directory):
            raise ExportError(f"log directory {directory} does not exist or is not a directory")

    if parsed.mode == "direct":
        source = ", ".join(parsed.paths)
    elif parsed.mode == "stitched":
        source = f"{parsed.brokers} + {', '.join(parsed.paths)}"
    else:
        source = parsed.brokers
    try:
        # an object store's missing bucket, prefix or refused credentials: a clear error
        reader = open_offset_reader(parsed)
    except (OSError, ValueError) as exc:
        raise ExportError(str(exc)) from None
    try:
        tps = reader.topic_partitions(names)
        missing = [t for t in names if t not in {topic for topic, _ in tps}]
        if missing:
            raise ExportError(
                f"topic{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                f"do{'' if len(missing) > 1 else 'es'} not exist in {reader.describe()}")
        tps = sorted(tps)
        start, end, earliest, latest = resolve_bounds(parsed, reader, tps)
        ranges = tuple(OffsetRange(tp[0], tp[1], *check_range(
            tp, start[tp], end[tp], earliest[tp], latest[tp], parsed.fail_on_data_loss))
            for tp in tps)
    except (KafkaLogOptionError, KafkaDataLossError) as exc:
        raise ExportError(str(exc)) from None
    except KafkaError as exc:
        hint = ""
        if isinstance(exc, BrokerUnreachableError):  # names the cause, the wait and its option
            pass
        elif "reachable" in str(exc) or "timed out" in str(exc).lower():
            timeout = parsed.kafka_params.get("default.api.timeout.ms", "60000")
            hint = f" (waited kafka.default.api.timeout.ms={timeout})"
        raise ExportError(f"{exc}{hint}") from None
    finally:
        close = getattr(reader, "close", None)
        if close is not None:
            close()

    frozen = {k: v for k, v in opts.items()
              if k.lower() not in _ARGUMENT_KEYS and k.lower() not in _BOUND_KEYS}
    for key in ("path", "paths", "kafka.bootstrap.servers"):
        if key in opts:
            frozen[key] = opts[key]
    by_topic: dict[str, list[OffsetRange]] = {}
    for r in ranges:
        by_topic.setdefault(r.topic, []).append(r)
    frozen["assign"] = json.dumps({t: [r.partition for r in rs] for t, rs in by_topic.items()})
    frozen["startingOffsets"] = json.dumps({t: {str(r.partition): r.start for r in rs}
                                            for t, rs in by_topic.items()})
    frozen["endingOffsets"] = json.dumps({t: {str(r.partition): r.end for r in rs}
                                          for t, rs in by_topic.items()})
    return ExportPlan(
        topics=names, mode=parsed.mode, source=source, ranges=ranges, reader_options=frozen,
        include_headers=parsed.include_headers, min_partitions=parsed.min_partitions,
        max_records_per_partition=parsed.max_records_per_partition,
        seconds=time.monotonic() - started)


def default_min_partitions(total_offsets: int, parallelism: int) -> int | None:
    """minPartitions for a read of ``total_offsets`` on ``parallelism`` cores: about
    ``TASKS_PER_CORE`` tasks per core, none below ``MIN_OFFSETS_PER_TASK`` offsets; None
    when one task per partition is as fine."""
    wanted = min(max(parallelism, 1) * TASKS_PER_CORE, total_offsets // MIN_OFFSETS_PER_TASK)
    return wanted if wanted > 1 else None


# --- the Spark job ---

def output_columns(df, fmt: str, binary_encoding: str | None, include_headers: bool):
    """``df`` (the source's rows) with the columns ``fmt`` gets (module docstring): binary
    columns encoded, typed ones kept (CSV: structs, arrays and maps as JSON text), the
    typed read's extra columns after the Kafka ones."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, BinaryType, MapType, StructType

    encoding = binary_encoding or (None if fmt == "parquet" else "utf8")

    def encode(col):
        if encoding is None:
            return col
        if encoding == "utf8":
            return F.make_valid_utf8(col.cast("string"))
        if encoding == "base64":
            return F.base64(col)
        return F.lower(F.hex(col))

    types = {f.name: f.dataType for f in df.schema.fields}

    def typed(name: str):
        dtype = types[name]
        if isinstance(dtype, BinaryType):
            return encode(F.col(name)).alias(name)
        if fmt == "csv" and isinstance(dtype, (StructType, ArrayType, MapType)):
            return F.to_json(F.col(name), {"ignoreNullFields": "false"}).alias(name)
        return F.col(name)

    columns = [typed("key"), typed("value"),
               F.col("topic"), F.col("partition"), F.col("offset"), F.col("timestamp"),
               F.col("timestampType")]
    if include_headers:
        headers = F.col("headers")
        if encoding is not None:
            headers = F.transform(headers, lambda h: F.struct(
                h["key"].alias("key"), encode(h["value"]).alias("value")))
        if fmt == "csv":
            headers = F.to_json(headers, {"ignoreNullFields": "false"})
        columns.append(headers.alias("headers"))
    kafka = {"key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
             "headers"}
    columns += [typed(name) for name in df.columns if name not in kafka]
    return df.select(*columns)


def _writer_options(fmt: str) -> dict[str, str]:
    if fmt == "csv":
        return {"header": "true", "escape": '"', "ignoreLeadingWhiteSpace": "false",
                "ignoreTrailingWhiteSpace": "false"}
    if fmt == "json":
        return {"ignoreNullFields": "false"}
    return {}


def _hadoop_fs(spark, output: str):
    sc = spark.sparkContext
    path = sc._jvm.org.apache.hadoop.fs.Path(output)
    return path.getFileSystem(sc._jsc.hadoopConfiguration()), path


def _data_files(spark, output: str) -> dict[str, int]:
    """path -> size of the data files in ``output`` (not ``_SUCCESS``, ``.crc``...)."""
    fs, path = _hadoop_fs(spark, output)
    if not fs.exists(path):
        return {}
    out = {}
    for status in fs.listStatus(path):
        name = status.getPath().getName()
        if status.isFile() and not name.startswith(("_", ".")):
            text = str(status.getPath())
            out[text[len("file:"):] if text.startswith("file:/") else text] = status.getLen()
    return out


def count_records_in_files(spark, fmt: str, files: Sequence[str]) -> dict[tuple[str, int], int]:
    """Records per (topic, partition) in exported ``files`` of format ``fmt``, by reading
    them back (the fallback of the task-metrics counts)."""
    from pyspark.sql import functions as F

    if not files:
        return {}
    if fmt == "parquet":
        df = spark.read.parquet(*files)
    elif fmt == "json":
        df = spark.read.schema("topic STRING, partition INT").json(list(files))
    else:
        df = (spark.read.option("header", "true").option("multiLine", "true")
              .option("escape", '"').csv(list(files)))
    rows = (df.select(F.col("topic"), F.col("partition").cast("int").alias("partition"))
            .groupBy("topic", "partition").count().collect())
    return {(r["topic"], r["partition"]): r["count"] for r in rows}


class _TaskMonitor:
    """Follows the write job's tasks (job group ``group``) and maps the finished ones to
    ``tasks`` (RDD partition i reads ``tasks[i]``, the source's planning order)."""

    def __init__(self, spark, group: str, tasks: Sequence[OffsetRange],
                 callback: ProgressCallback | None, total: int) -> None:
        self._sc = spark.sparkContext
        self._group = group
        self._tasks = list(tasks)
        self._callback = callback
        self._total = total
        self._done: dict[int, int | None] = {}   # partition id -> records written
        self._reported = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kafkalog-export-progress",
                                        daemon=True)
        self.failed: str | None = None
        try:
            self._store = self._sc._jsc.sc().statusStore()
        except Exception as exc:  # noqa: BLE001 - py4j or a Spark without it
            self._store = None
            self.failed = f"no status store: {exc}"

    def start(self) -> None:
        if self._store is not None and self._tasks:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            try:
                self._poll()
            except Exception as exc:  # noqa: BLE001 - never break the export
                self.failed = f"polling failed: {exc}"
                return

    def _poll(self) -> bool:
        """Read the finished tasks; True when all are known."""
        tracker = self._sc.statusTracker()
        for job_id in tracker.getJobIdsForGroup(self._group):
            job = tracker.getJobInfo(job_id)
            for stage_id in (job.stageIds if job is not None else ()):
                stage = tracker.getStageInfo(stage_id)
                if stage is None or stage.numTasks != len(self._tasks):
                    continue
                if stage.numCompletedTasks <= len(self._done) and len(self._done) < len(self._tasks):
                    continue  # nothing new since the last look
                for attempt in range(stage.currentAttemptId + 1):
                    seq = self._store.taskList(stage_id, attempt, 2**31 - 1)
                    for i in range(seq.size()):
                        task = seq.apply(i)
                        if task.status() != "SUCCESS":
                            continue
                        pid = task.partitionId()
                        if pid in self._done or not 0 <= pid < len(self._tasks):
                            continue
                        metrics = task.taskMetrics()
                        self._done[pid] = (metrics.get().outputMetrics().recordsWritten()
                                           if metrics.isDefined() else None)
        self._report()
        return len(self._done) == len(self._tasks)

    def _report(self) -> None:
        done = sum(self._tasks[pid].size for pid in self._done)
        if self._callback is not None and done != self._reported:
            self._reported = done
            try:
                self._callback(done, self._total)
            except Exception:  # noqa: BLE001 - a broken callback must not break the export
                self._callback = None

    def final_counts(self) -> list[int] | None:
        """Records written by each task, once every task is known; None when the tasks
        cannot be mapped (the caller then counts the files)."""
        if self._store is None or self.failed is not None:
            return None
        deadline = time.monotonic() + FINAL_COUNTS_WAIT_SECONDS
        while True:
            try:
                complete = self._poll()
            except Exception as exc:  # noqa: BLE001
                self.failed = f"polling failed: {exc}"
                return None
            if complete:
                break
            if time.monotonic() > deadline:
                self.failed = (f"{len(self._done)} of {len(self._tasks)} tasks seen in the "
                               "status store")
                return None
            time.sleep(0.05)
        counts = [self._done[i] for i in range(len(self._tasks))]
        known = [c for c in counts if c is not None]
        return known if len(known) == len(counts) else None


_PY_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)): (.+)$")
_JAVA_PREFIX = re.compile(r"^(?:[a-z_][\w$]*\.)+([A-Z][\w$]*(?:Exception|Error)): ")


def spark_error_message(exc: BaseException) -> str:
    """The first meaningful line of a Spark failure: the Python exception raised in a
    worker when there is one (``KafkaDataLossError: ...``), else the Java exception's
    message without its package, class chain or stack trace."""
    text = str(exc)
    if "Traceback (most recent call last)" in text:
        # the last traceback's exception: the one raised (an earlier one is what it was
        # raised while handling, e.g. the corrupt batch behind a KafkaDataLossError)
        tail = text.rsplit("Traceback (most recent call last)", 1)[1]
        for line in tail.splitlines():
            if line[:1].isspace() or not line.strip():
                continue
            m = _PY_EXCEPTION.match(line.strip())
            if m:
                name = m.group(1).rsplit(".", 1)[-1]
                return _one_line(f"{name}: {m.group(2)}")
    for line in text.splitlines():
        line = line.strip()
        if (not line or line.startswith(("An error occurred while calling", "at ", "JVM stacktrace"))):
            continue
        if line.startswith(": "):
            line = line[2:]
        while True:  # "org.x.SparkException: java.io.IOException: msg" -> "IOException: msg"
            m = _JAVA_PREFIX.match(line)
            rest = line[m.end():] if m else ""
            if m and _JAVA_PREFIX.match(rest):
                line = rest
                continue
            if m:
                line = f"{m.group(1)}: {rest}"
            break
        return _one_line(line)
    return _one_line(text) or type(exc).__name__


def _one_line(text: str) -> str:
    text = re.sub(r"\s*SQLSTATE: \w+\s*$", "", " ".join(text.split()))
    return text


def _local_output(output: str) -> str | None:
    """The local path of ``output``, None for other file systems."""
    if output.startswith("file:"):
        from urllib.parse import unquote, urlparse
        return unquote(urlparse(output).path)
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", output):
        return None
    return os.path.abspath(output)


def run_export(spark, plan: ExportPlan, *, fmt: str, output: str, mode: str = "errorifexists",
               binary_encoding: str | None = None,
               progress: ProgressCallback | None = None) -> ExportResult:
    """Read ``plan`` with Spark and write it to ``output`` as ``fmt``; raises
    ``ExportError``. ``progress(done, total)`` gets the offsets read so far."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    import spark_kafkalog
    from spark_kafkalog.jobs.session import activate_session
    from spark_kafkalog.planning import split_ranges

    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if mode not in MODES:
        raise ExportError(f"unknown mode {mode!r}: choose one of {', '.join(MODES)}")
    if binary_encoding is not None and binary_encoding not in BINARY_ENCODINGS:
        raise ExportError(f"unknown binary encoding {binary_encoding!r}: choose one of "
                          f"{', '.join(BINARY_ENCODINGS)}")
    if not str(output).strip():
        raise ExportError("no output directory given")
    output = str(output)
    local = _local_output(output)
    display = local if local is not None else output
    started = time.monotonic()
    sc = spark.sparkContext

    min_partitions = plan.min_partitions
    reader_options = dict(plan.reader_options)
    if min_partitions is None and plan.max_records_per_partition is None:
        min_partitions = default_min_partitions(plan.total_offsets, sc.defaultParallelism)
        if min_partitions is not None:
            reader_options["minPartitions"] = str(min_partitions)
    tasks = sorted(split_ranges(list(plan.ranges), min_partitions, plan.max_records_per_partition))
    total = plan.total_offsets

    try:
        activate_session(spark)  # a caller's thread has no active session of its own
        fs, path = _hadoop_fs(spark, output)
        if mode == "errorifexists" and fs.exists(path):
            raise ExportError(f"output {display} already exists (use mode overwrite or append)")
        before = _data_files(spark, output) if mode == "append" else {}
        spark_kafkalog.register(spark)
        df = spark.read.format("kafkalog").options(**reader_options).load()
        writer = (output_columns(df, fmt, binary_encoding, plan.include_headers)
                  .write.mode(mode).format(fmt).options(**_writer_options(fmt)))
    except (Py4JError, PySparkException) as exc:
        raise ExportError(spark_error_message(exc)) from None

    group = f"kafkalog-export-{uuid.uuid4().hex}"
    saved = {key: sc.getLocalProperty(key) for key in
             ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")}
    monitor = _TaskMonitor(spark, group, tasks, progress, total)
    sc.setJobGroup(group, f"kafkalog export of {', '.join(plan.topics)} to {display}",
                   interruptOnCancel=True)
    try:
        monitor.start()
        writer.save(output)
    except (Py4JError, PySparkException) as exc:
        raise ExportError(spark_error_message(exc)) from None
    finally:
        monitor.stop()
        for key, value in saved.items():
            sc.setLocalProperty(key, value)

    try:
        counts = monitor.final_counts() if tasks else []
        files = {p: n for p, n in _data_files(spark, output).items() if p not in before}
        per_partition = {r.topic_partition: 0 for r in plan.ranges}
        if counts is not None:
            counts_from = "task metrics"
            for task, records in zip(tasks, counts):
                per_partition[task.topic_partition] += records
        else:
            counts_from = "output files"
            for tp, records in count_records_in_files(spark, fmt, sorted(files)).items():
                per_partition[tp] = per_partition.get(tp, 0) + records
    except (Py4JError, PySparkException) as exc:
        raise ExportError(spark_error_message(exc)) from None
    if progress is not None:
        progress(total, total)
    return ExportResult(
        records=sum(per_partition.values()), bytes=sum(files.values()), partitions=per_partition,
        files=tuple(sorted(files)), seconds=plan.seconds + time.monotonic() - started,
        output=display, format=fmt, offsets=total, tasks=len(tasks), ranges=plan.ranges,
        counts_from=counts_from)


def export(spark, *, topics: str | Sequence[str], fmt: str, output: str,
           bootstrap_servers: str | None = None, path: str | Sequence[str] | None = None,
           starting_offsets="earliest", ending_offsets="latest",
           options: Mapping[str, str] | None = None, mode: str = "errorifexists",
           include_headers: bool = False, binary_encoding: str | None = None,
           progress: ProgressCallback | None = None, value_format: str | None = None,
           key_format: str | None = None,
           schema_registry_url: str | None = None) -> ExportResult:
    """Export ``topics`` (a name, a comma list or a sequence) from a cluster
    (``bootstrap_servers``) or a log directory (``path``) to ``output`` as ``fmt``
    (``parquet``, ``csv``, ``json``), the key and value read as ``key_format`` /
    ``value_format``; see the module docstring. Raises ``ExportError``."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)}")
    plan = plan_export(topics, bootstrap_servers=bootstrap_servers, path=path,
                       starting_offsets=starting_offsets, ending_offsets=ending_offsets,
                       include_headers=include_headers, options=options,
                       value_format=value_format, key_format=key_format,
                       schema_registry_url=schema_registry_url)
    return run_export(spark, plan, fmt=fmt, output=output, mode=mode,
                      binary_encoding=binary_encoding, progress=progress)

