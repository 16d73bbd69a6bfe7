"""The executors' side of a table export: each Spark task writes its rows as Parquet data
files under the run's location, and tells the driver what it wrote.

Owns ``FileSpec`` (what a task needs: the run's location, the storage options, the table
format, its partition columns) and ``write_task_files`` (the ``mapInArrow`` function:
Arrow batches of table rows in, one row per file written out, a ``WrittenFile`` as JSON),
and ``filesystem_for`` (a pyarrow filesystem from deltalake-style storage options).

Files: one per (Kafka partition, value of the table's identity partition columns, year /
month / day / hour of each column an Iceberg time transform reads, in UTC) of a task, named
``part-<task attempt's uuid>-<n>.parquet`` under ``<location>/<partition path>/`` (Hive
style ``col=value`` directories, for people browsing the store), zstd-compressed. Zoned
timestamps are labelled UTC (the same instants; Spark labels them with the session's zone,
which Iceberg refuses). Delta
files leave the partition columns out (their values are in ``WrittenFile.partition_values``,
as Delta's ``partitionValues``); Iceberg files hold every column (pyiceberg reads the
partition values from the files' statistics). A row's order within a file is its order
in the task (offset order). Each file carries Delta's statistics JSON (numRecords and,
for ``offset``, ``timestamp``, ``partition`` and ``timestampType``, minValues /
maxValues; nullCount of every top-level column).

Invariants: a file is complete (its footer written and closed) before its row is sent; a
task that fails leaves files nobody references (the driver only commits what the task
that succeeded returned; ``TableTarget.remove_orphans`` deletes the rest later). The
partition values of a transform (``day(timestamp)``) are not computed here: Iceberg derives
them from the statistics, which hold for a file of one day.

Thread-safety: each task has its own writers; nothing is shared between tasks.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlparse

from .base import WrittenFile

__all__ = ["FileSpec", "write_task_files", "written_files", "filesystem_for", "utc_timestamps", "OUTPUT_SCHEMA",
           "STATS_COLUMNS"]

OUTPUT_SCHEMA = "file STRING"
STATS_COLUMNS = ("partition", "offset", "timestamp", "timestampType")
_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
# Spark converts a null array<struct> column to Arrow very slowly (seconds per million
# rows, several times the whole read); the job hands the tasks ``headers`` with nulls as
# empty arrays and this flag column saying which were null, and the tasks put the nulls
# back (``_restore_null_headers``) before writing.
HEADERS_NULL_FLAG = "__kafkalog_headers_null"
# Rows buffered per file before a Parquet row group is written (Spark hands a task
# batches of 10,000 rows: one row group each would make small groups).
ROWS_PER_ROW_GROUP = 131_072


@dataclass(frozen=True)
class FileSpec:
    """What every task of one run needs (pickled to the executors)."""

    location: str                               # the run's URI prefix (TableTarget.data_location)
    fmt: str                                    # "iceberg" or "delta"
    identity_columns: tuple[str, ...] = ()      # partition columns whose values split the files
    # Iceberg's time transforms: (transform, source column), e.g. ("day", "timestamp"): one
    # file per year / month / day / hour of the column
    time_columns: tuple[tuple[str, str], ...] = ()
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False)
    compression: str = "zstd"


def filesystem_for(uri: str, storage_options: Mapping[str, str]):
    """A pyarrow filesystem and the path within it for ``uri`` (``file://``, a local path,
    ``s3://``), with deltalake-style options: ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``,
    ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``, ``AWS_ALLOW_HTTP``."""
    from pyarrow import fs as pafs

    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return pafs.LocalFileSystem(), (parsed.path if parsed.scheme else uri)
    if parsed.scheme in ("s3", "s3a"):
        opts = {k.upper(): v for k, v in storage_options.items()}
        kwargs: dict[str, object] = {}
        endpoint = opts.get("AWS_ENDPOINT_URL") or opts.get("AWS_ENDPOINT")
        if endpoint:
            ep = urlparse(endpoint)
            kwargs["endpoint_override"] = ep.netloc or ep.path
            kwargs["scheme"] = ep.scheme or ("http" if opts.get("AWS_ALLOW_HTTP", "").lower() == "true" else "https")
        if opts.get("AWS_ACCESS_KEY_ID"):
            kwargs["access_key"] = opts["AWS_ACCESS_KEY_ID"]
            kwargs["secret_key"] = opts.get("AWS_SECRET_ACCESS_KEY", "")
            if opts.get("AWS_SESSION_TOKEN"):
                kwargs["session_token"] = opts["AWS_SESSION_TOKEN"]
        if opts.get("AWS_REGION") or opts.get("AWS_DEFAULT_REGION"):
            kwargs["region"] = opts.get("AWS_REGION") or opts["AWS_DEFAULT_REGION"]
        return pafs.S3FileSystem(**kwargs), parsed.netloc + parsed.path
    fs, path = pafs.FileSystem.from_uri(uri)
    return fs, path


def _partition_text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def _bucket_text(value, transform: str) -> str:
    if value is None:
        return "null"
    if isinstance(value, dt.datetime):
        return value.strftime({"year": "%Y", "month": "%Y-%m", "day": "%Y-%m-%d", "hour": "%Y-%m-%d-%H"}[transform])
    return _partition_text(value) or "null"


def _stats_value(value, *, up: bool = False):
    """A statistic as Delta's stats JSON holds it; timestamps to the millisecond, a maximum
    rounded up (never below the true one: a reader skips files by it)."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        if up and value.microsecond % 1000:
            value += dt.timedelta(microseconds=1000 - value.microsecond % 1000)
        return value.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


class _OpenFile:
    """One Parquet file being written: its writer, path, rows and running statistics."""

    def __init__(self, fs, path: str, uri: str, schema, compression: str, partition: int,
                 partition_values: dict[str, str | None]) -> None:
        import pyarrow.parquet as pq

        self.path, self.uri = path, uri
        self.stream = fs.open_output_stream(path)
        self.writer = pq.ParquetWriter(self.stream, schema, compression=compression)
        self.partition = partition
        self.partition_values = partition_values
        self.records = 0
        self.pending: list = []
        self.pending_rows = 0
        self.first_offset: int | None = None
        self.last_offset = -1
        self.mins: dict[str, object] = {}
        self.maxs: dict[str, object] = {}
        self.nulls: dict[str, int] = {}

    def write(self, table) -> None:
        import pyarrow.compute as pc

        self.pending.append(table)
        self.pending_rows += table.num_rows
        if self.pending_rows >= ROWS_PER_ROW_GROUP:
            self._flush()
        self.records += table.num_rows
        for name in table.column_names:
            column = table.column(name)
            self.nulls[name] = self.nulls.get(name, 0) + column.null_count
            if name in STATS_COLUMNS and column.null_count < len(column):
                mm = pc.min_max(column)
                lo, hi = mm["min"].as_py(), mm["max"].as_py()
                self.mins[name] = lo if name not in self.mins else min(self.mins[name], lo)
                self.maxs[name] = hi if name not in self.maxs else max(self.maxs[name], hi)
        offsets = table.column("offset") if "offset" in table.column_names else None
        if offsets is not None and len(offsets):
            if self.first_offset is None:
                self.first_offset = int(offsets[0].as_py())
            self.last_offset = int(offsets[-1].as_py())

    def _flush(self) -> None:
        import pyarrow as pa

        if self.pending:
            table = pa.concat_tables(self.pending) if len(self.pending) > 1 else self.pending[0]
            self.writer.write_table(table, row_group_size=max(table.num_rows, 1))
            self.pending, self.pending_rows = [], 0

    def close(self, fs) -> WrittenFile:
        self._flush()
        self.writer.close()
        self.stream.close()
        size = fs.get_file_info(self.path).size
        stats = {"numRecords": self.records,
                 "minValues": {k: _stats_value(v) for k, v in self.mins.items()},
                 "maxValues": {k: _stats_value(v, up=True) for k, v in self.maxs.items()},
                 "nullCount": self.nulls}
        return WrittenFile(self.uri, int(size or 0), self.records, self.partition,
                           self.first_offset if self.first_offset is not None else 0, self.last_offset,
                           self.partition_values, json.dumps(stats, separators=(",", ":"), default=str))


def _groups(batch, spec: FileSpec) -> dict[tuple, object]:
    """The rows of ``batch`` per file key (Kafka partition, identity values..., time
    buckets...): key -> row indices (an int64 array), or None for every row. A task reads
    one partition's range, mostly within one day: a batch of one key takes the fast path
    (no per-row work at all)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = [batch.column(batch.schema.get_field_index("partition")) if "partition" in batch.schema.names
               else _nested(batch, "redpanda.partition")]
    for name in spec.identity_columns:
        columns.append(_nested(batch, name))
    for transform, name in spec.time_columns:
        columns.append(_time_bucket(_nested(batch, name), transform))
    single = []
    for col in columns:
        if col.null_count:
            break
        lo_hi = pc.min_max(col)
        lo, hi = lo_hi["min"].as_py(), lo_hi["max"].as_py()
        if lo != hi:
            break
        single.append(lo)
    else:
        return {tuple(single): None}
    names = [f"k{i}" for i in range(len(columns))]
    keyed = pa.table([*columns, pa.array(range(batch.num_rows), pa.int64())], names=[*names, "row"])
    grouped = keyed.group_by(names, use_threads=False).aggregate([("row", "list")])
    keys = zip(*(grouped.column(n).to_pylist() for n in names), strict=True)
    return {key: rows.values for key, rows in zip(keys, grouped.column("row_list").chunks[0] if
                                                   grouped.column("row_list").num_chunks == 1 else
                                                   grouped.column("row_list").combine_chunks(), strict=True)}


def _time_bucket(col, transform: str):
    """The year / month / day / hour of each value of ``col`` (a timestamp or date), as
    Iceberg's transform of the same name buckets it (in UTC)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_timestamp(col.type) and col.type.tz is not None:
        col = pc.cast(col, pa.timestamp(col.type.unit, tz="UTC"))
    unit = {"year": "year", "month": "month", "day": "day", "hour": "hour"}[transform]
    return pc.floor_temporal(col, unit=unit)


def utc_timestamps(table):
    """``table`` with every zoned timestamp type (nested ones too) labelled UTC: the same
    instants (Arrow stores UTC), the zone Iceberg and Delta take."""
    import pyarrow as pa

    def fix(t):
        if pa.types.is_timestamp(t):
            return pa.timestamp(t.unit, tz="UTC") if t.tz is not None and t.tz != "UTC" else t
        if pa.types.is_struct(t):
            return pa.struct([f.with_type(fix(f.type)) for f in t])
        if pa.types.is_large_list(t):
            return pa.large_list(t.value_field.with_type(fix(t.value_type)))
        if pa.types.is_list(t):
            return pa.list_(t.value_field.with_type(fix(t.value_type)))
        if pa.types.is_map(t):
            return pa.map_(t.key_field.with_type(fix(t.key_type)), t.item_field.with_type(fix(t.item_type)))
        return t

    schema = table.schema if hasattr(table, "schema") else table
    fixed = pa.schema([f.with_type(fix(f.type)) for f in schema], metadata=schema.metadata)
    if fixed.equals(schema):
        return table
    return fixed if not hasattr(table, "schema") else table.cast(fixed)


def _restore_null_headers(batch):
    """The batch with ``headers`` null again where ``HEADERS_NULL_FLAG`` says so, and the
    flag dropped (see the constant)."""
    import pyarrow as pa

    names = batch.schema.names
    if HEADERS_NULL_FLAG not in names:
        return batch
    flag = batch.column(names.index(HEADERS_NULL_FLAG))
    i = names.index("headers")
    headers = batch.column(i)
    if flag.true_count:
        headers = pa.ListArray.from_arrays(headers.offsets, headers.values, type=headers.type, mask=flag)
    columns = [headers if j == i else batch.column(j) for j in range(len(names)) if names[j] != HEADERS_NULL_FLAG]
    # nullable again: Spark marked the column not nullable (it held no null when handed over)
    fields = [f.with_nullable(True) if f.name == "headers" else f for f in batch.schema if f.name != HEADERS_NULL_FLAG]
    return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields, metadata=batch.schema.metadata))


def _nested(batch, dotted: str):
    import pyarrow.compute as pc

    head, *rest = dotted.split(".")
    col = batch.column(batch.schema.get_field_index(head))
    for name in rest:
        col = pc.struct_field(col, name)
    return col


def write_task_files(spec: FileSpec):
    """The ``mapInArrow`` function of a run: writes the task's rows (Arrow record batches
    of the table's schema) to Parquet files, yields one batch with a ``file`` row (the
    ``WrittenFile``'s JSON) per file when the task's input ends."""

    def run(batches: Iterator) -> Iterator:
        import pyarrow as pa

        fs, root = filesystem_for(spec.location, spec.storage_options)
        task = uuid.uuid4().hex
        files: dict[tuple, _OpenFile] = {}
        dropped = set(spec.identity_columns) if spec.fmt == "delta" else set()
        try:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                batch = _restore_null_headers(batch)
                groups = _groups(batch, spec)
                table = utc_timestamps(pa.Table.from_batches([batch]))
                if dropped:
                    table = table.drop_columns([c for c in table.column_names if c in dropped])
                for key, rows in groups.items():
                    part = table if rows is None else table.take(rows)
                    open_file = files.get(key)
                    if open_file is None:
                        values = {name: _partition_text(v)
                                  for name, v in zip(spec.identity_columns, key[1:1 + len(spec.identity_columns)],
                                                     strict=True)}
                        directory = "/".join(f"{n}={_HIVE_NULL if values[n] is None else values[n]}"
                                             for n in spec.identity_columns)
                        buckets = key[1 + len(spec.identity_columns):]
                        if buckets:
                            directory = "/".join([d for d in (directory, "/".join(
                                f"{n.replace('.', '_')}_{t}={_bucket_text(v, t)}"
                                for (t, n), v in zip(spec.time_columns, buckets, strict=True))) if d])
                        if not directory:
                            directory = f"partition={key[0]}"
                        name = f"{directory}/part-{task}-{len(files):05d}.parquet"
                        path = f"{root.rstrip('/')}/{name}"
                        fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
                        open_file = _OpenFile(fs, path, f"{spec.location.rstrip('/')}/{name}", part.schema,
                                              spec.compression, int(key[0]), values)
                        files[key] = open_file
                    open_file.write(part)
            written = [f.close(fs) for f in files.values()]
        except BaseException:
            for f in files.values():
                try:
                    f.writer.close()
                    f.stream.close()
                except Exception:  # noqa: BLE001, S110 - the task fails anyway: its files are orphans
                    pass
            raise
        if written:
            yield pa.RecordBatch.from_pydict({"file": [json.dumps(w.to_dict()) for w in written]})

    return run


def written_files(rows: Sequence) -> list[WrittenFile]:
    """The ``WrittenFile``s of the rows a run's ``mapInArrow`` collected."""
    return [WrittenFile.from_dict(json.loads(r["file"] if not isinstance(r, str) else r)) for r in rows]
